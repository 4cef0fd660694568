import type { EndpointChange, EndpointService } from '../jobs/endpoint-service.js';
import { renderEndpoint } from '../jobs/endpoint-settings.js';
import type { JobService, RedeliverResult } from '../jobs/job-service.js';
import { AppError, endpointNotFound, invalidBody, invalidParameter, jobNotFound } from '../model/errors.js';
import { isObject } from '../model/json.js';
import type { EndpointRecord, Scope } from '../model/records.js';
import { SCOPES, keySpecRefusal, renderKey, type KeyLimitsChange, type KeyService, type KeySpec, type KeyView } from '../security/keys.js';
import type { BudgetStatus, KeyQuotas } from '../jobs/key-quotas.js';
import { usdToUnits } from '../model/money.js';
import type { RegistryCredentials } from '../security/registry-credentials.js';
import { MB } from './body.js';
import { logRoutes, type LogRouteDeps } from './log-routes.js';
import { sendPoolWorkers, sendWorkerLog, type PoolRouteDeps } from './pool-routes.js';
import { sendJson } from './respond.js';
import type { HttpMethod, Route, RouteCall } from './route-table.js';
import { sendUsage, type UsageRouteDeps } from './usage-routes.js';
import { noteChange, sendAudit, type AuditRouteDeps } from './audit-routes.js';
import { describeEndpointChange } from '../jobs/endpoint-changes.js';

/** What the admin API uses. */
export interface AdminRouteDeps extends PoolRouteDeps, UsageRouteDeps, LogRouteDeps, AuditRouteDeps {
  keys: KeyService;
  endpoints: EndpointService;
  /** Registry logins endpoints pull their images with (never answered with the password). */
  registry: RegistryCredentials;
  /** Each budgeted key's spend in its period; forgets a key's cached limits when they change. */
  quotas: Pick<KeyQuotas, 'budgetStatus' | 'forget'>;
  /** A finished job's webhook delivered again (POST .../jobs/{job}/webhook). */
  jobs: JobService;
}

/** The largest budgetUsd (its units stay exact in a double) and maxConcurrentJobs. */
export const MAX_BUDGET_USD = 900_000;
export const MAX_CONCURRENT_JOBS = 1_000_000;

/**
 * Validates `{budgetUsd?, budgetPeriod?, maxConcurrentJobs?}` of PATCH /admin/v1/keys/{id}
 * against the key's current limits: a field left out keeps its value, null clears it.
 */
export function parseKeyLimits(body: unknown, current: KeyLimitsChange): KeyLimitsChange {
  if (!isObject(body)) throw invalidBody('a JSON object');
  for (const k of Object.keys(body)) {
    if (!['budgetUsd', 'budgetPeriod', 'maxConcurrentJobs'].includes(k)) throw invalidParameter(k, 'is not a known field (expected budgetUsd, budgetPeriod, maxConcurrentJobs)');
  }
  const next = { ...current };
  if (body.budgetUsd !== undefined) {
    const units = body.budgetUsd === null ? null : usdToUnits(body.budgetUsd);
    if (body.budgetUsd !== null && (units === null || units > MAX_BUDGET_USD * 1e10)) {
      throw invalidParameter('budgetUsd', `must be USD from 0 to ${MAX_BUDGET_USD} with at most 10 decimals (a number or decimal text), or null for no budget`);
    }
    next.budgetUnits = units;
  }
  if (body.budgetPeriod !== undefined) {
    if (body.budgetPeriod !== null && body.budgetPeriod !== 'day' && body.budgetPeriod !== 'month') throw invalidParameter('budgetPeriod', 'must be day or month (UTC), or null');
    next.budgetPeriod = body.budgetPeriod;
  }
  if (next.budgetUnits === null) next.budgetPeriod = null;
  else if (next.budgetPeriod === null) throw invalidParameter('budgetPeriod', 'is required with budgetUsd (day or month)');
  if (body.maxConcurrentJobs !== undefined) {
    const n = body.maxConcurrentJobs;
    if (n !== null && (typeof n !== 'number' || !Number.isInteger(n) || n < 1 || n > MAX_CONCURRENT_JOBS)) {
      throw invalidParameter('maxConcurrentJobs', `must be an integer from 1 to ${MAX_CONCURRENT_JOBS}, or null for no cap`);
    }
    next.maxConcurrentJobs = n;
  }
  return next;
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
  if (!isObject(body)) throw invalidBody('a JSON object');
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
 * The admin API under /admin/v1 (admin-scoped key, docs/api.md) as entries of the route table:
 * keys, registry credentials, endpoints, their workers (pool-routes.ts), usage (usage-routes.ts)
 * and the audit log (audit-routes.ts), where every change made here is recorded.
 *
 * @example routes.add(...adminRoutes(services));
 */
export function adminRoutes(deps: AdminRouteDeps): Route[] {
  const route = (method: HttpMethod | HttpMethod[], path: string, handle: (call: RouteCall) => Promise<void>, bodyLimit?: number): Route => ({
    family: 'admin',
    method,
    path: `/admin/v1${path}`,
    auth: 'admin',
    ...(bodyLimit === undefined ? {} : { bodyLimit }),
    handle,
  });
  const { keys, endpoints, registry } = deps;
  return [
    route('GET', '/keys', async ({ res }) => sendJson(res, 200, { keys: await Promise.all((await keys.list()).map((k) => withBudget(deps, k))) })),
    route('PATCH', '/keys/{key}', (call) => setKeyLimits(deps, call), MB),
    route('POST', '/keys', (call) => createKey(deps, call), MB),
    route('DELETE', '/keys/{key}', (call) => revokeKey(deps, call)),
    route('GET', '/registry-credentials', async ({ res }) => sendJson(res, 200, { registryCredentials: await registry.list() })),
    route('POST', '/registry-credentials', (call) => createCredential(deps, call), 64 * 1024),
    route('DELETE', '/registry-credentials/{credential}', (call) => deleteCredential(deps, call)),
    route('GET', '/endpoints', async ({ res }) => sendJson(res, 200, { endpoints: (await endpoints.list()).map(renderEndpoint) })),
    route('POST', '/endpoints', (call) => createEndpoint(deps, call), MB),
    route('GET', '/endpoints/{endpoint}', async ({ res, params }) => sendJson(res, 200, renderEndpoint(await existing(endpoints, params.endpoint!)))),
    route('PATCH', '/endpoints/{endpoint}', (call) => updateEndpoint(deps, call), MB),
    route('DELETE', '/endpoints/{endpoint}', (call) => deleteEndpoint(deps, call)),
    route('POST', '/endpoints/{endpoint}/jobs/{job}/webhook', async ({ res, params }) => {
      await existing(deps.endpoints, params.endpoint!);
      sendJson(res, 200, redelivered(params.job!, await deps.jobs.redeliverWebhook(params.endpoint!, params.job!)));
    }),
    route('GET', '/endpoints/{endpoint}/workers', (call) => sendPoolWorkers(deps, call)),
    route('GET', '/endpoints/{endpoint}/workers/{worker}/logs', (call) => sendWorkerLog(deps, call)),
    route('GET', '/usage', (call) => sendUsage(deps, call)),
    ...logRoutes(deps),
    route('GET', '/audit', (call) => sendAudit(deps, call)),
  ];
}

// The changes below are each written to the audit log (audit-routes.ts) once made.

async function setKeyLimits(deps: AdminRouteDeps, call: RouteCall): Promise<void> {
  const id = call.params.key!;
  const key = await deps.keys.get(id);
  if (!key) throw new AppError('KEY_NOT_FOUND', `API key ${id} not found`, { id });
  const updated = await deps.keys.setLimits(id, parseKeyLimits(call.body, key));
  if (!updated) throw new AppError('KEY_NOT_FOUND', `API key ${id} not found`, { id });
  deps.quotas.forget(id);
  await noteChange(deps, call, 'key.limits', { kind: 'key', id }, keyLimitsDetail(renderKey(key), renderKey(updated)));
  sendJson(call.res, 200, await withBudget(deps, renderKey(updated)));
}

async function createKey(deps: AdminRouteDeps, call: RouteCall): Promise<void> {
  const created = await deps.keys.create(parseKeyBody(call.body));
  await noteChange(deps, call, 'key.create', { kind: 'key', id: created.id }, { name: created.name, scopes: created.scopes, endpoints: created.endpoints });
  sendJson(call.res, 200, created);
}

/**
 * DELETE /admin/v1/keys/{id}: a key the gateway manages (a pool worker's own) only with force,
 * since it goes with its worker anyway and revoked by hand cuts the worker off mid-job.
 */
async function revokeKey(deps: AdminRouteDeps, call: RouteCall): Promise<void> {
  const id = call.params.key!;
  const key = await deps.keys.get(id);
  if (key?.managed && call.query.get('force') !== 'true') {
    throw new AppError('KEY_MANAGED', `API key ${id} belongs to a pool worker and is revoked by the gateway when the worker stops; revoke it anyway with ?force=true (gantry keys delete --force; the worker loses its jobs)`, { id });
  }
  if (!(await deps.keys.revoke(id))) throw new AppError('KEY_NOT_FOUND', `API key ${id} not found`, { id });
  await noteChange(deps, call, 'key.revoke', { kind: 'key', id }, { name: key?.name ?? null });
  sendJson(call.res, 200, { id, deleted: true });
}

async function createCredential(deps: AdminRouteDeps, call: RouteCall): Promise<void> {
  const created = await deps.registry.create(call.body);
  // The username is listed by the API too; the password is only said to be set.
  const username = isObject(call.body) ? call.body.username : null;
  await noteChange(deps, call, 'registry-credential.create', { kind: 'registry-credential', id: created.id }, { name: created.name, username, password: 'set' });
  sendJson(call.res, 200, created);
}

async function deleteCredential(deps: AdminRouteDeps, call: RouteCall): Promise<void> {
  const id = call.params.credential!;
  const name = (await deps.registry.list()).find((c) => c.id === id)?.name ?? null;
  const removal = await deps.registry.remove(id);
  if (!removal.ok && removal.reason === 'not-found') throw new AppError('REGISTRY_CREDENTIAL_NOT_FOUND', `Registry credential ${id} not found`, { id });
  if (!removal.ok) {
    const named = removal.endpoints;
    throw new AppError('REGISTRY_CREDENTIAL_IN_USE', `Registry credential ${id} is named by endpoint${named.length > 1 ? 's' : ''} ${named.join(', ')}: change their worker.registryCredentials first`, { id, endpoints: named });
  }
  await noteChange(deps, call, 'registry-credential.delete', { kind: 'registry-credential', id }, { name });
  sendJson(call.res, 200, { id, deleted: true });
}

async function createEndpoint(deps: AdminRouteDeps, call: RouteCall): Promise<void> {
  const created = changed(await deps.endpoints.create(checkEndpointBody(call.body)));
  await noteChange(deps, call, 'endpoint.create', { kind: 'endpoint', id: created.id }, { ...describeEndpointChange(undefined, created) });
  sendJson(call.res, 200, renderEndpoint(created));
}

async function updateEndpoint(deps: AdminRouteDeps, call: RouteCall): Promise<void> {
  const id = call.params.endpoint!;
  const before = await deps.endpoints.load(id);
  const updated = changed(await deps.endpoints.update(id, checkEndpointBody(call.body)));
  await noteChange(deps, call, 'endpoint.update', { kind: 'endpoint', id }, { ...describeEndpointChange(before, updated) });
  sendJson(call.res, 200, renderEndpoint(updated));
}

async function deleteEndpoint(deps: AdminRouteDeps, call: RouteCall): Promise<void> {
  const id = call.params.endpoint!;
  const endpoint = await existing(deps.endpoints, id);
  await deps.endpoints.remove(id);
  await noteChange(deps, call, 'endpoint.delete', { kind: 'endpoint', id }, { name: endpoint.name });
  sendJson(call.res, 200, { id, deleted: true });
}

/** The answer of a webhook resend, or the refusal: 404 no such job; 409 no webhook, a live job, or a delivery pending. */
function redelivered(id: string, result: RedeliverResult): { id: string; status: string; webhook: 'due' } {
  if (result.ok) return { id, status: result.job.status, webhook: 'due' };
  if (result.reason === 'not-found') throw jobNotFound(id);
  const { status } = result.job;
  if (result.reason === 'no-webhook') throw new AppError('NO_WEBHOOK', `Job ${id} was submitted without a webhook`, { id });
  if (result.reason === 'pending') throw new AppError('WEBHOOK_PENDING', `Job ${id}'s webhook is being delivered: wait for its outcome`, { id });
  throw new AppError('INVALID_STATE', `Job ${id} is ${status}: its webhook is sent when it ends`, { id, status });
}

/** A key as listed, with its spend in the current budget period when it has a budget (`budget`: null otherwise). */
async function withBudget(deps: AdminRouteDeps, key: KeyView): Promise<KeyView & { budget: BudgetStatus | null }> {
  const budgetUnits = key.budgetUsd === null ? null : usdToUnits(key.budgetUsd);
  const budget = await deps.quotas.budgetStatus({ id: key.id, name: key.name, budgetUnits, budgetPeriod: key.budgetPeriod, maxConcurrentJobs: key.maxConcurrentJobs });
  return { ...key, budget };
}

/** A key's budget and job cap as changed: the fields that changed, each with its old and new value. */
function keyLimitsDetail(before: KeyView, after: KeyView): Record<string, unknown> {
  const changes: Record<string, { from: unknown; to: unknown }> = {};
  for (const field of ['budgetUsd', 'budgetPeriod', 'maxConcurrentJobs'] as const) {
    if (before[field] !== after[field]) changes[field] = { from: before[field], to: after[field] };
  }
  return { name: after.name, fields: Object.keys(changes), changes };
}

/** An endpoint settings body with its free-text `name` checked (the other fields are checked by endpoint-settings.ts). */
function checkEndpointBody(body: unknown): unknown {
  if (isObject(body)) refuseControl('name', body.name);
  return body;
}

/** The endpoint a create or update stored; 409 when the id is taken, 404 when there is none. */
function changed(change: EndpointChange): EndpointRecord {
  if (change.ok) return change.endpoint;
  if (change.reason === 'exists') throw new AppError('ENDPOINT_EXISTS', `Endpoint ${change.id} already exists`, { id: change.id });
  throw endpointNotFound(change.id);
}

/** The endpoint as stored now (no cache); 404 when there is none. */
async function existing(endpoints: EndpointService, id: string): Promise<EndpointRecord> {
  const endpoint = await endpoints.load(id);
  if (!endpoint) throw endpointNotFound(id);
  return endpoint;
}
