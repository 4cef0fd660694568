import type { IncomingMessage, ServerResponse } from 'node:http';
import { AppError } from '../model/errors.js';
import type { EndpointService } from '../jobs/endpoint-service.js';
import type { WorkerService } from '../jobs/worker-service.js';
import type { KeyService } from '../security/keys.js';
import { authorize } from './auth.js';
import { queryInteger } from './query.js';
import { MB, readJsonBody } from './body.js';
import { sendJson, sendJsonText, sendNoContent } from './respond.js';

/** A worker request after routing: `/v2/{endpointId}/{operation}/{workerId}/{jobId?}`. */
export interface WorkerRequest {
  req: IncomingMessage;
  res: ServerResponse;
  endpointId: string;
  operation: string;
  workerId: string | undefined;
  jobId: string | undefined;
  query: URLSearchParams;
  signal: AbortSignal;
}

type Handler = (workers: WorkerService, r: WorkerRequest, workerId: string, jobId: string) => Promise<void>;

const OPERATIONS: Record<string, { method: string; needsJob: boolean; handle: Handler }> = {
  'job-take': { method: 'GET', needsJob: false, handle: take },
  'job-take-batch': { method: 'GET', needsJob: false, handle: takeBatch },
  'job-stop': { method: 'GET', needsJob: false, handle: stop },
  ping: { method: 'GET', needsJob: false, handle: ping },
  'job-done': { method: 'POST', needsJob: true, handle: done },
  'job-stream': { method: 'POST', needsJob: true, handle: stream },
};

/** True for the operations of the worker protocol. */
export function isWorkerOperation(operation: string): boolean {
  return operation in OPERATIONS;
}

/**
 * Worker ids: any text of 1-256 characters (after URL decoding) without control characters, so
 * any pod id a RunPod worker sends is accepted (docs/security.md).
 */
const MAX_WORKER_ID = 256;
// eslint-disable-next-line no-control-regex
const CONTROL = /[\u0000-\u001f\u007f]/;
/** runpod-python waits 5 s after a 429 on job-take; after a 400 it asks again at once. */
const INVALID_ID_RETRY_S = 5;
const MAX_BATCH = 100;
/** Worker results may be larger than a submission; the 20 MB runsync limit applies to them too. */
const RESULT_LIMIT = 20 * MB;

/** What the worker routes use. */
export interface WorkerRouteDeps {
  workers: WorkerService;
  endpoints: Pick<EndpointService, 'get'>;
  keys: Pick<KeyService, 'authorize'>;
}

/**
 * Worker routes: runpod-python's protocol (docs/worker-protocol.md), worker-scoped key. Ids come
 * from the path only (runpod-python's sticky X-Request-ID header names the wrong job).
 */
export async function handleWorkerRoute(deps: WorkerRouteDeps, r: WorkerRequest): Promise<void> {
  const op = OPERATIONS[r.operation];
  if (!op) throw new AppError('NOT_FOUND', `Unknown operation: ${r.operation}`);
  const method = r.req.method ?? 'GET';
  if (method !== op.method) {
    throw new AppError('METHOD_NOT_ALLOWED', `${method} is not allowed on /${r.operation} (use ${op.method})`, undefined, { allow: op.method });
  }
  const workerId = r.workerId;
  if (!workerId) throw new AppError('INVALID_PARAMETER', `Invalid parameter: /${r.operation} needs a worker id`, { field: 'workerId' });
  if (workerId.length > MAX_WORKER_ID || CONTROL.test(workerId)) throw invalidWorkerId(r.operation);
  if (op.needsJob !== (r.jobId !== undefined)) {
    throw new AppError('NOT_FOUND', op.needsJob ? `/${r.operation} needs /{worker_id}/{job_id}` : `Unknown route under /${r.operation}`);
  }
  await authorize(deps.keys, r.req, 'worker', r.endpointId);
  const endpoint = await deps.endpoints.get(r.endpointId);
  if (!endpoint) throw new AppError('ENDPOINT_NOT_FOUND', `Endpoint ${r.endpointId} not found`);
  await op.handle(deps.workers, r, workerId, r.jobId ?? '');
}

/**
 * A worker id Gantry cannot use: 400 naming workerId; on job-take a 429 with Retry-After instead,
 * because runpod-python reads a 400 there as "no job" and asks again at once, without a log line.
 */
function invalidWorkerId(operation: string): AppError {
  const message = `Invalid parameter: worker id must be 1-${MAX_WORKER_ID} characters without control characters`;
  if (operation === 'job-take' || operation === 'job-take-batch') {
    return new AppError('INVALID_WORKER_ID', message, { field: 'workerId' }, { 'retry-after': String(INVALID_ID_RETRY_S) });
  }
  return new AppError('INVALID_PARAMETER', message, { field: 'workerId' });
}

async function take(workers: WorkerService, r: WorkerRequest, workerId: string): Promise<void> {
  const [job] = await workers.take(r.endpointId, workerId, 1, r.signal);
  if (!job) return sendNoContent(r.res);
  sendJsonText(r.res, 200, workers.renderForWorker(job));
}

async function takeBatch(workers: WorkerService, r: WorkerRequest, workerId: string): Promise<void> {
  const size = queryInteger('batch_size', r.query.get('batch_size'), 1, 1, MAX_BATCH, true);
  const jobs = await workers.take(r.endpointId, workerId, size, r.signal);
  if (jobs.length === 0) return sendNoContent(r.res);
  sendJsonText(r.res, 200, `[${jobs.map((job) => workers.renderForWorker(job)).join(',')}]`);
}

async function stop(workers: WorkerService, r: WorkerRequest, workerId: string): Promise<void> {
  const ids = await workers.stops(r.endpointId, workerId, r.signal);
  if (ids.length === 0) return sendNoContent(r.res);
  sendJson(r.res, 200, { jobsToStop: ids });
}

async function ping(workers: WorkerService, r: WorkerRequest, workerId: string): Promise<void> {
  const held = (r.query.get('job_id') ?? '').split(',').filter((id) => id !== '');
  const unhealthy = r.query.get('status') === 'unhealthy';
  const reason = unhealthy ? [r.query.get('check'), r.query.get('reason')].filter(Boolean).join(': ') || 'reported unhealthy' : null;
  await workers.ping(r.endpointId, workerId, held, { healthy: !unhealthy, reason, version: r.query.get('runpod_version') });
  sendJson(r.res, 200, { ok: true });
}

async function done(workers: WorkerService, r: WorkerRequest, workerId: string, jobId: string): Promise<void> {
  const outcome = await workers.done(r.endpointId, workerId, jobId, await readResult(workers, r, workerId, jobId));
  if (outcome.kind === 'progress') return sendJson(r.res, 200, { id: jobId, status: 'IN_PROGRESS', applied: outcome.applied });
  sendJson(r.res, 200, { id: jobId, status: outcome.job.status, accepted: outcome.kind === 'finished' });
}

/** Body codes that the same result would get every time: the job ends FAILED rather than run again. */
const REFUSED_FOR_GOOD = new Set(['PAYLOAD_TOO_LARGE', 'INVALID_JSON', 'JSON_TOO_DEEP']);

/** A job-done body; one refused for good (too large, not JSON) fails the job, then the refusal is answered. */
async function readResult(workers: WorkerService, r: WorkerRequest, workerId: string, jobId: string): Promise<unknown> {
  try {
    return await readJsonBody(r.req, RESULT_LIMIT);
  } catch (err) {
    if (err instanceof AppError && REFUSED_FOR_GOOD.has(err.code)) await workers.refuseResult(r.endpointId, workerId, jobId, `result refused by the gateway: ${err.message}`);
    throw err;
  }
}

async function stream(workers: WorkerService, r: WorkerRequest, workerId: string, jobId: string): Promise<void> {
  const result = await workers.stream(r.endpointId, workerId, jobId, await readJsonBody(r.req, RESULT_LIMIT));
  sendJson(r.res, 200, { id: jobId, ...result });
}
