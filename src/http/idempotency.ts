import type { IncomingMessage } from 'node:http';
import { idempotencyKeyOf, type SubmitOperation } from '../jobs/idempotency.js';
import type { JobService } from '../jobs/job-service.js';
import type { SubmitRequest } from '../jobs/policy.js';
import { AppError } from '../model/errors.js';
import type { EndpointRecord, JobRecord } from '../model/records.js';

/** The longest Idempotency-Key accepted (Stripe's bound; a UUID is 36). */
export const IDEMPOTENCY_KEY_MAX_LENGTH = 255;

/** The header set (`true`) on an answer that is an earlier submission's job, found by its Idempotency-Key. */
export const REPLAYED_HEADER = 'idempotent-replayed';
/** REPLAYED_HEADER as headers to send. */
export const REPLAYED: Readonly<Record<string, string>> = { [REPLAYED_HEADER]: 'true' };

/**
 * The request's Idempotency-Key header (docs/api.md): undefined without one; 1 to 255
 * printable ASCII characters, or the same as a structured-field string (`"…"`); anything
 * else, or the header given twice, is a 400 naming it.
 *
 * @example readIdempotencyKey(req) // 'a1f0c2e4-…' or undefined
 */
export function readIdempotencyKey(req: IncomingMessage): string | undefined {
  if (req.headers['idempotency-key'] === undefined) return undefined;
  // Node joins a repeated header with ", ": only the distinct values tell two keys from one.
  const given = req.headersDistinct['idempotency-key'] ?? [];
  const raw = given.length === 1 ? (given[0] ?? '') : '';
  const value = raw.length >= 2 && raw.startsWith('"') && raw.endsWith('"') ? raw.slice(1, -1) : raw;
  if (value.length === 0 || value.length > IDEMPOTENCY_KEY_MAX_LENGTH || !/^[\x20-\x7e]+$/.test(value)) {
    throw new AppError('INVALID_IDEMPOTENCY_KEY', `Invalid Idempotency-Key: one header of 1 to ${IDEMPOTENCY_KEY_MAX_LENGTH} printable ASCII characters (a UUID makes a good key)`, { field: 'Idempotency-Key' });
  }
  return value;
}

/**
 * 409 for a key that made job `job` from another request (another body, or another route):
 * the caller reused a key it meant for something else, and nothing was submitted.
 */
export function idempotencyKeyReused(job: JobRecord): AppError {
  return new AppError(
    'IDEMPOTENCY_KEY_REUSED',
    `This Idempotency-Key was used for another request (job ${job.id}): a retry must send the same route and body; a new request needs a new key`,
    { id: job.id },
    { 'x-should-retry': 'false' },
  );
}

/** A submission under an Idempotency-Key: its job, and whether an earlier submission made it. */
export interface KeyedSubmission {
  job: JobRecord;
  replayed: boolean;
}

/**
 * Submits `request` under the caller's Idempotency-Key `key` (JobService.submitOnce): the job
 * the key made from this same request, else a new one; 409 when the key made a job from
 * another request.
 *
 * @example const { job, replayed } = await submitWithKey(jobs, endpoint, request, { key, keyId, sync: false, operation: 'run' });
 */
export async function submitWithKey(
  jobs: Pick<JobService, 'submitOnce'>,
  endpoint: EndpointRecord,
  request: SubmitRequest,
  opts: { key: string; keyId: string | null; sync: boolean; operation: SubmitOperation; traceparent?: string | undefined },
): Promise<KeyedSubmission> {
  const key = idempotencyKeyOf({ key: opts.key, keyId: opts.keyId, endpointId: endpoint.id, operation: opts.operation, request });
  const submitted = await jobs.submitOnce(endpoint, request, { sync: opts.sync, keyId: opts.keyId, key, traceparent: opts.traceparent });
  if (submitted.outcome === 'conflict') throw idempotencyKeyReused(submitted.job);
  return { job: submitted.job, replayed: submitted.outcome === 'replayed' };
}
