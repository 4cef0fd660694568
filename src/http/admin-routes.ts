import type { IncomingMessage, ServerResponse } from 'node:http';
import type { EndpointService } from '../jobs/endpoint-service.js';
import { renderEndpoint } from '../jobs/endpoint-settings.js';
import { AppError, invalidParameter } from '../model/errors.js';
import { isObject } from '../model/json.js';
import type { Scope } from '../model/records.js';
import { SCOPES, keySpecRefusal, type KeyService, type KeySpec } from '../security/keys.js';
import { authorize } from './auth.js';
import { MB, readJsonBody } from './body.js';
import { handlePoolRoute, type PoolRouteDeps } from './pool-routes.js';
import { sendJson } from './respond.js';
import { handleUsageRoute, type UsageRouteDeps } from './usage-routes.js';

/** What the admin API uses. */
export interface AdminRouteDeps extends PoolRouteDeps, UsageRouteDeps {
  keys: KeyService;
  endpoints: EndpointService;
}

/**
 * C0 control characters and DEL. Admin text is stored as it is (PostgreSQL's `text` rejects NUL,
 * which was a 500) and shown in the console and CLI tables, so names carry none of them.
 */
// eslint-disable-next-line no-control-regex
const CONTROL = /[\u0000-\u001f\u007f]/;

/** Refuses a name with control characters (400 naming `field`); see CONTROL. */
function refuseControl(field: string, value: unknown): void {
  if (typeof value === 'string' && CONTROL.test(value)) throw invalidParameter(field, 'must not contain control characters (U+0000-U+001F, U+007F)');
}

/** Validates `{name, scopes, endpoints?}` of POST /admin/v1/keys. */
function parseKeyBody(body: unknown): KeySpec {
  if (!isObject(body)) throw new AppError('INVALID_BODY', 'Invalid request body: expected a JSON object');
  for (const k of Object.keys(body)) {
    if (!['name', 'scopes', 'endpoints'].includes(k)) throw invalidParameter(k, 'is not a known field (expected name, scopes, endpoints)');
  }
  if (typeof body.name !== 'string' || body.name.trim() === '' || body.name.length > 128) throw invalidParameter('name', 'must be a string of 1-128 characters');
  refuseControl('name', body.name);
  if (!Array.isArray(body.scopes) || body.scopes.length === 0) throw invalidParameter('scopes', `must be a non-empty array of ${SCOPES.join(', ')}`);
  for (const s of body.scopes) {
    if (!SCOPES.includes(s as Scope)) throw invalidParameter('scopes', `has unknown scope ${JSON.stringify(s)} (expected ${SCOPES.join(', ')})`);
  }
  let endpoints: string[] | null = null;
  if (body.endpoints !== undefined && body.endpoints !== null) {
    if (!Array.isArray(body.endpoints) || body.endpoints.some((e) => typeof e !== 'string' || e === '' || CONTROL.test(e))) {
      throw invalidParameter('endpoints', 'must be an array of endpoint ids');
    }
    endpoints = [...new Set(body.endpoints as string[])];
  }
  const spec: KeySpec = { name: body.name, scopes: [...new Set(body.scopes as Scope[])], endpoints };
  const refusal = keySpecRefusal(spec);
  if (refusal) throw invalidParameter('endpoints', refusal);
  return spec;
}

/**
 * Admin API under /admin/v1 (admin-scoped key, docs/api.md): keys, endpoints, their workers
 * (pool-routes.ts) and usage (usage-routes.ts). `segments` are the path parts after /admin/v1.
 */
export async function handleAdminRoute(deps: AdminRouteDeps, req: IncomingMessage, res: ServerResponse, segments: string[]): Promise<void> {
  await authorize(deps.keys, req, 'admin');
  const [collection, id, ...extra] = segments;
  if (collection === 'endpoints' && id !== undefined && extra[0] === 'workers') return handlePoolRoute(deps, req, res, id, extra.slice(1));
  if (collection === 'usage' && id === undefined) return handleUsageRoute(deps, req, res);
  if (extra.length > 0) throw new AppError('NOT_FOUND', 'Unknown admin route');
  if (collection === 'keys') return keyRoute(deps.keys, req, res, id);
  if (collection === 'endpoints') return endpointRoute(deps.endpoints, req, res, id);
  throw new AppError('NOT_FOUND', 'Unknown admin route');
}

async function keyRoute(keys: KeyService, req: IncomingMessage, res: ServerResponse, id: string | undefined): Promise<void> {
  const method = req.method ?? 'GET';
  if (id === undefined && method === 'POST') return sendJson(res, 200, await keys.create(parseKeyBody(await readJsonBody(req, MB))));
  if (id === undefined && method === 'GET') return sendJson(res, 200, { keys: await keys.list() });
  if (id !== undefined && method === 'DELETE') {
    if (!(await keys.revoke(id))) throw new AppError('KEY_NOT_FOUND', `API key ${id} not found`, { id });
    return sendJson(res, 200, { id, deleted: true });
  }
  throw methodNotAllowed(method);
}

/** An endpoint settings body with its free-text `name` checked (the other fields are checked by endpoint-settings.ts). */
async function readEndpointBody(req: IncomingMessage): Promise<unknown> {
  const body = await readJsonBody(req, MB);
  if (isObject(body)) refuseControl('name', body.name);
  return body;
}

async function endpointRoute(endpoints: EndpointService, req: IncomingMessage, res: ServerResponse, id: string | undefined): Promise<void> {
  const method = req.method ?? 'GET';
  if (id === undefined) {
    if (method === 'POST') return sendJson(res, 200, renderEndpoint(await endpoints.create(await readEndpointBody(req))));
    if (method === 'GET') return sendJson(res, 200, { endpoints: (await endpoints.list()).map(renderEndpoint) });
    throw methodNotAllowed(method);
  }
  const existing = await endpoints.load(id);
  if (!existing) throw new AppError('ENDPOINT_NOT_FOUND', `Endpoint ${id} not found`, { id });
  if (method === 'GET') return sendJson(res, 200, renderEndpoint(existing));
  if (method === 'PATCH') return sendJson(res, 200, renderEndpoint(await endpoints.update(id, await readEndpointBody(req))));
  if (method === 'DELETE') {
    await endpoints.remove(id);
    return sendJson(res, 200, { id, deleted: true });
  }
  throw methodNotAllowed(method);
}

function methodNotAllowed(method: string): AppError {
  return new AppError('METHOD_NOT_ALLOWED', `${method} is not allowed here`);
}
