import { AppError, invalidParameter } from '../model/errors.js';
import type { RouteParams } from './route-table.js';

/**
 * The longest id of each kind a path may carry. Anything longer names nothing that can exist, so
 * it is refused before any key, cache, rate window or store sees it: a client sending ids of
 * thousands of characters cannot fill the gateway's caches with them.
 * - endpoint: endpoint ids are 1-64 letters, digits, `-` and `_` (endpoint-settings.ts);
 * - job: Gantry's job ids are UUIDs (36 characters); 64 leaves room and refuses nothing real;
 * - worker: any pod id a RunPod worker sends (RUNPOD_POD_ID), up to 256 characters;
 * - key: API key ids are UUIDs;
 * - credential: registry credential ids are `rc_` and 16 hex digits.
 */
export const ID_RULES = {
  endpoint: { field: 'endpointId', maxChars: 64 },
  job: { field: 'jobId', maxChars: 64 },
  worker: { field: 'workerId', maxChars: 256 },
  key: { field: 'keyId', maxChars: 64 },
  credential: { field: 'credentialId', maxChars: 64 },
} as const;

// eslint-disable-next-line no-control-regex
const CONTROL = /[\u0000-\u001f\u007f]/;
/** runpod-python waits 5 s after a 429 on job-take; after a 400 it asks again at once. */
const BAD_ID_RETRY_S = 5;

/**
 * Refuses a path id longer than its kind allows or holding control characters: 400 naming the
 * field, or (`backOff`, job-take) 429 INVALID_WORKER_ID with Retry-After, because runpod-python
 * reads a 400 there as "no job" and asks again at once.
 *
 * @example checkIds({ endpoint: 'echo', job: 'x'.repeat(65) }, false) // throws 400 naming jobId
 */
export function checkIds(params: RouteParams, backOff: boolean): void {
  for (const kind of ['endpoint', 'job', 'worker', 'key', 'credential'] as const) {
    const value = params[kind];
    if (value === undefined) continue;
    const rule = ID_RULES[kind];
    if (value.length <= rule.maxChars && !CONTROL.test(value)) continue;
    const refusal = invalidParameter(rule.field, `must be 1-${rule.maxChars} characters without control characters`);
    if (backOff) throw new AppError('INVALID_WORKER_ID', refusal.message, refusal.extra, { 'retry-after': String(BAD_ID_RETRY_S) });
    throw refusal;
  }
}
