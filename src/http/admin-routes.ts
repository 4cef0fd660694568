import type { IncomingMessage, ServerResponse } from 'node:http';
import { randomUUID } from 'node:crypto';
import { AppError, invalidParameter } from '../errors.js';
import { parseEndpointSettings, renderEndpoint } from '../jobs/endpoint-settings.js';
import { generateApiKey, sha256Hex } from '../jobs/secrets.js';
import type { KeyRecord, Scope } from '../store/store.js';
import type { App } from '../app.js';
import { MB, readJsonBody } from './body.js';
import { handlePoolRoute } from './pool-routes.js';
import { sendJson } from './respond.js';
import { handleUsageRoute } from './usage-routes.js';

const SCOPES: Scope[] = ['admin', 'run', 'read', 'worker'];

function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

function renderKey(key: KeyRecord) {
  return { id: key.id, name: key.name, scopes: key.scopes, endpoints: key.endpoints, createdAt: new Date(key.createdAt).toISOString() };
}

/** Validates `{name, scopes, endpoints?}` of POST /admin/v1/keys. */
function parseKeyBody(body: unknown): { name: string; scopes: Scope[]; endpoints: string[] | null } {
  if (!isObject(body)) throw new AppError(400, 'INVALID_BODY', 'Invalid request body: expected a JSON object');
  for (const k of Object.keys(body)) {
    if (!['name', 'scopes', 'endpoints'].includes(k)) throw invalidParameter(k, 'is not a known field (expected name, scopes, endpoints)');
  }
  if (typeof body.name !== 'string' || body.name.trim() === '' || body.name.length > 128) throw invalidParameter('name', 'must be a string of 1-128 characters');
  if (!Array.isArray(body.scopes) || body.scopes.length === 0) throw invalidParameter('scopes', `must be a non-empty array of ${SCOPES.join(', ')}`);
  for (const s of body.scopes) {
    if (!SCOPES.includes(s as Scope)) throw invalidParameter('scopes', `has unknown scope ${JSON.stringify(s)} (expected ${SCOPES.join(', ')})`);
  }
  let endpoints: string[] | null = null;
  if (body.endpoints !== undefined && body.endpoints !== null) {
    if (!Array.isArray(body.endpoints) || body.endpoints.some((e) => typeof e !== 'string' || e === '')) {
      throw invalidParameter('endpoints', 'must be an array of endpoint ids');
    }
    endpoints = [...new Set(body.endpoints as string[])];
  }
  return { name: body.name, scopes: [...new Set(body.scopes as Scope[])], endpoints };
}

/** Creates an API key; the plain key is returned only here. */
export async function createApiKey(app: App, spec: { name: string; scopes: Scope[]; endpoints: string[] | null }, key = generateApiKey()) {
  const record: KeyRecord = { id: randomUUID(), name: spec.name, hash: sha256Hex(key), scopes: spec.scopes, endpoints: spec.endpoints, createdAt: app.now() };
  await app.store.createKey(record);
  return { ...renderKey(record), key };
}

/**
 * Admin API under /admin/v1 (admin-scoped key): keys, endpoints and their workers (pool-routes.ts).
 * `segments` are the path parts after /admin/v1.
 */
export async function handleAdminRoute(app: App, req: IncomingMessage, res: ServerResponse, segments: string[]): Promise<void> {
  await app.auth.authorize(req, 'admin');
  const method = req.method ?? 'GET';
  const [collection, id, ...extra] = segments;
  if (collection === 'endpoints' && id !== undefined && extra[0] === 'workers') return handlePoolRoute(app, req, res, id, extra.slice(1));
  if (collection === 'usage' && id === undefined) return handleUsageRoute(app, req, res);
  if (extra.length > 0) throw new AppError(404, 'NOT_FOUND', 'Unknown admin route');

  if (collection === 'keys') {
    if (id === undefined && method === 'POST') return sendJson(res, 200, await createApiKey(app, parseKeyBody(await readJsonBody(req, MB))));
    if (id === undefined && method === 'GET') return sendJson(res, 200, { keys: (await app.store.listKeys()).map(renderKey) });
    if (id !== undefined && method === 'DELETE') {
      if (!(await app.store.deleteKey(id))) throw new AppError(404, 'KEY_NOT_FOUND', `API key ${id} not found`, { id });
      app.auth.forget();
      return sendJson(res, 200, { id, deleted: true });
    }
  } else if (collection === 'endpoints') {
    if (id === undefined && method === 'POST') {
      const endpoint = parseEndpointSettings(await readJsonBody(req, MB), undefined, app.now(), app.secrets.seal);
      if (!(await app.store.createEndpoint(endpoint))) throw new AppError(409, 'ENDPOINT_EXISTS', `Endpoint ${endpoint.id} already exists`, { id: endpoint.id });
      app.jobs.invalidateEndpoint(endpoint.id);
      app.notifier.publish({ type: 'endpoint-changed', endpointId: endpoint.id });
      return sendJson(res, 200, renderEndpoint(endpoint));
    }
    if (id === undefined && method === 'GET') return sendJson(res, 200, { endpoints: (await app.store.listEndpoints()).map(renderEndpoint) });
    if (id !== undefined) {
      const existing = await app.store.getEndpoint(id);
      if (!existing) throw new AppError(404, 'ENDPOINT_NOT_FOUND', `Endpoint ${id} not found`, { id });
      if (method === 'GET') return sendJson(res, 200, renderEndpoint(existing));
      if (method === 'PATCH') {
        const endpoint = parseEndpointSettings(await readJsonBody(req, MB), existing, app.now(), app.secrets.seal);
        if (!(await app.store.updateEndpoint(endpoint))) throw new AppError(404, 'ENDPOINT_NOT_FOUND', `Endpoint ${id} not found`, { id });
        app.jobs.invalidateEndpoint(id);
        app.notifier.publish({ type: 'endpoint-changed', endpointId: id });
        return sendJson(res, 200, renderEndpoint(endpoint));
      }
      if (method === 'DELETE') {
        await app.store.deleteEndpoint(id);
        app.jobs.invalidateEndpoint(id);
        app.notifier.publish({ type: 'endpoint-changed', endpointId: id });
        return sendJson(res, 200, { id, deleted: true });
      }
    }
  } else {
    throw new AppError(404, 'NOT_FOUND', 'Unknown admin route');
  }
  throw new AppError(405, 'METHOD_NOT_ALLOWED', `${method} is not allowed here`);
}
