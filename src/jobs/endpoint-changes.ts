import { isObject } from '../model/json.js';
import { usdNumber } from '../model/money.js';
import type { EndpointRecord } from '../model/records.js';
import { boundedNames } from '../security/audit-log.js';
import { ENDPOINT_DEFAULTS } from './endpoint-settings.js';

/**
 * What an endpoint create or update changed, for the audit log: the names of the changed
 * fields, the old and new values of those that hold no secret, and for `worker.env` the names
 * of the variables added, removed and changed. Never a secret value: env values, the webhook
 * secret (only `set` or `none`), a worker's command and volumes (a command line may carry a
 * token) are named, not shown.
 */
export interface EndpointChangeDetail {
  fields: string[];
  changes: Record<string, { from: unknown; to: unknown }>;
  env?: { added: string[]; removed: string[]; changed: string[] };
}

/** Settings whose values are shown, as the admin API names them. */
const PLAIN_FIELDS = ['name', 'workersMin', 'workersMax', 'idleTimeout', 'executionTimeoutMs', 'scalerType', 'scalerValue', 'maxAttempts', 'priority', 'preemptible', 'flashboot', 'shareWeight'] as const;
/** Worker settings whose values are shown; the others (command, cwd, volumes) only by name, env by variable names. */
const SHOWN_WORKER_FIELDS = new Set(['image', 'gpus', 'gpuTypes', 'memoryMb', 'registryCredentials', 'prepull']);

/** The record a created endpoint is compared with: the defaults, as parseEndpointSettings starts from. */
function baseline(after: EndpointRecord): EndpointRecord {
  return { ...after, name: after.id, ...ENDPOINT_DEFAULTS, workerJson: null, webhookSecret: null, rateLimitsJson: null, priceUnitsPerSecond: null };
}

const workerOf = (json: string | null): Record<string, unknown> | null => {
  if (json === null) return null;
  const parsed: unknown = JSON.parse(json);
  return isObject(parsed) ? parsed : null;
};

const workerKind = (w: Record<string, unknown> | null): string => (w === null ? 'none' : 'image' in w ? 'container' : 'process');
const price = (units: number | null): number | null => (units === null ? null : usdNumber(BigInt(units)));

/**
 * @example
 * describeEndpointChange(before, after) // { fields: ['workersMax', 'worker.env'], changes: { workersMax: { from: 3, to: 5 } }, env: { added: ['TOKEN'], removed: [], changed: [] } }
 */
export function describeEndpointChange(before: EndpointRecord | undefined, after: EndpointRecord): EndpointChangeDetail {
  const from = before ?? baseline(after);
  const detail: EndpointChangeDetail = { fields: [], changes: {} };
  const change = (field: string, a: unknown, b: unknown, shown = true): void => {
    detail.fields.push(field);
    if (shown) detail.changes[field] = { from: a, to: b };
  };
  for (const field of PLAIN_FIELDS) if (from[field] !== after[field]) change(field, from[field], after[field]);
  if (from.priceUnitsPerSecond !== after.priceUnitsPerSecond) change('pricePerSecond', price(from.priceUnitsPerSecond), price(after.priceUnitsPerSecond));
  if (from.rateLimitsJson !== after.rateLimitsJson) {
    change('rateLimits', from.rateLimitsJson === null ? null : (JSON.parse(from.rateLimitsJson) as unknown), after.rateLimitsJson === null ? null : (JSON.parse(after.rateLimitsJson) as unknown));
  }
  // Sealed anew at each write: a changed text means a secret was sent (set, replaced or removed).
  if (from.webhookSecret !== after.webhookSecret) change('webhookSecret', from.webhookSecret === null ? 'none' : 'set', after.webhookSecret === null ? 'none' : 'set');
  if (from.workerJson !== after.workerJson) describeWorker(workerOf(from.workerJson), workerOf(after.workerJson), detail, change);
  return detail;
}

/** The worker's changed fields: its kind, each field by name (values of SHOWN_WORKER_FIELDS), env by variable names. */
function describeWorker(a: Record<string, unknown> | null, b: Record<string, unknown> | null, detail: EndpointChangeDetail, change: (field: string, x: unknown, y: unknown, shown?: boolean) => void): void {
  if (workerKind(a) !== workerKind(b)) change('worker', workerKind(a), workerKind(b));
  const fields = new Set([...Object.keys(a ?? {}), ...Object.keys(b ?? {})]);
  for (const field of [...fields].sort()) {
    const x = a?.[field];
    const y = b?.[field];
    if (field === 'env') {
      const env = describeEnv(isObject(x) ? x : {}, isObject(y) ? y : {});
      if (env) {
        detail.fields.push('worker.env');
        detail.env = env;
      }
      continue;
    }
    if (JSON.stringify(x) !== JSON.stringify(y)) change(`worker.${field}`, x ?? null, y ?? null, SHOWN_WORKER_FIELDS.has(field));
  }
}

/** The names of the variables added, removed and changed; undefined when none changed. Never a value. */
function describeEnv(a: Record<string, unknown>, b: Record<string, unknown>): EndpointChangeDetail['env'] {
  const added = Object.keys(b).filter((k) => !Object.hasOwn(a, k));
  const removed = Object.keys(a).filter((k) => !Object.hasOwn(b, k));
  const changed = Object.keys(b).filter((k) => Object.hasOwn(a, k) && a[k] !== b[k]);
  if (added.length + removed.length + changed.length === 0) return undefined;
  return { added: boundedNames(added.sort()), removed: boundedNames(removed.sort()), changed: boundedNames(changed.sort()) };
}
