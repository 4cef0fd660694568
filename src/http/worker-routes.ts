import { AppError, invalidParameter, jobNotFound } from '../model/errors.js';
import type { WorkerRefusal, WorkerService } from '../jobs/worker-service.js';
import { queryInteger } from './query.js';
import { MB } from './body.js';
import type { EndpointCall, EndpointRoute, HttpMethod, Route } from './route-table.js';
import { jsonArrayParts, sendJson, sendJsonParts, sendNoContent } from './respond.js';

/** What the worker routes use. */
export interface WorkerRouteDeps {
  workers: WorkerService;
}

const MAX_BATCH = 100;
/** Worker results may be larger than a submission; the 20 MB runsync limit applies to them too. */
const RESULT_LIMIT = 20 * MB;

type Handler = (workers: WorkerService, call: EndpointCall, workerId: string, jobId: string) => Promise<void>;

/**
 * Worker routes: runpod-python's protocol (docs/worker-protocol.md), worker-scoped key, as
 * entries of the route table. Ids come from the path only (runpod-python's sticky X-Request-ID
 * header names the wrong job); the dispatcher refuses worker ids it cannot use (route-ids.ts),
 * on job-take with a 429 runpod-python backs off on.
 *
 * @example routes.add(...workerRoutes({ workers }));
 */
export function workerRoutes(deps: WorkerRouteDeps): Route[] {
  const route = (method: HttpMethod, op: string, spec: Partial<EndpointRoute>, handle: Handler): EndpointRoute => ({
    family: 'worker',
    method,
    path: `/v2/{endpoint}/${op}/{worker}`,
    auth: 'worker',
    needsEndpoint: true,
    ...spec,
    handle: (call) => handle(deps.workers, call, call.params.worker!, call.params.job ?? ''),
  });
  const withJob = (op: string): string => `/v2/{endpoint}/${op}/{worker}/{job}`;
  const ops: EndpointRoute[] = [
    route('GET', 'job-take', { waits: true, handsOutWork: true, backOff: true }, take),
    route('GET', 'job-take-batch', { waits: true, handsOutWork: true, backOff: true }, takeBatch),
    route('GET', 'job-stop', { waits: true, handsOutWork: true, backOff: true }, stop),
    route('GET', 'ping', {}, ping),
    route('POST', 'job-done', { path: withJob('job-done'), bodyLimit: RESULT_LIMIT, rawFields: ['output'], bodyRefused: (call, err) => refuseResult(deps.workers, call, err) }, done),
    route('POST', 'job-stream', { path: withJob('job-stream'), bodyLimit: RESULT_LIMIT }, stream),
  ];
  // Without a worker id: a 400 naming it (the method first, as on the full path).
  const bare = ops.map(
    (op): Route => ({
      family: 'worker',
      method: op.method,
      path: op.path.slice(0, op.path.indexOf('/{worker}')),
      auth: 'public',
      handle: async () => {
        throw invalidParameter('workerId', `is missing: ${op.path.replace('/v2/{endpoint}', '')}`);
      },
    }),
  );
  return [...ops, ...bare];
}

async function take(workers: WorkerService, { res, endpointId, signal }: EndpointCall, workerId: string): Promise<void> {
  const [job] = await workers.take(endpointId, workerId, 1, signal);
  if (!job) return sendNoContent(res);
  sendJsonParts(res, 200, workers.renderForWorker(job));
}

async function takeBatch(workers: WorkerService, { res, endpointId, signal, query }: EndpointCall, workerId: string): Promise<void> {
  const size = queryInteger('batch_size', query.get('batch_size'), 1, 1, MAX_BATCH, true);
  const jobs = await workers.take(endpointId, workerId, size, signal);
  if (jobs.length === 0) return sendNoContent(res);
  sendJsonParts(res, 200, jsonArrayParts(jobs.map((job) => workers.renderForWorker(job))));
}

async function stop(workers: WorkerService, { res, endpointId, signal }: EndpointCall, workerId: string): Promise<void> {
  const ids = await workers.stops(endpointId, workerId, signal);
  if (ids.length === 0) return sendNoContent(res);
  sendJson(res, 200, { jobsToStop: ids });
}

async function ping(workers: WorkerService, { res, endpointId, query }: EndpointCall, workerId: string): Promise<void> {
  const held = (query.get('job_id') ?? '').split(',').filter((id) => id !== '');
  const unhealthy = query.get('status') === 'unhealthy';
  const reason = unhealthy ? [query.get('check'), query.get('reason')].filter(Boolean).join(': ') || 'reported unhealthy' : null;
  await workers.ping(endpointId, workerId, held, { healthy: !unhealthy, reason, version: query.get('runpod_version') });
  sendJson(res, 200, { ok: true });
}

async function done(workers: WorkerService, { res, endpointId, body }: EndpointCall, workerId: string, jobId: string): Promise<void> {
  const outcome = await workers.done(endpointId, workerId, jobId, body);
  if (outcome.kind === 'refused') throw refused(outcome, workerId);
  if (outcome.kind === 'progress') return sendJson(res, 200, { id: jobId, status: 'IN_PROGRESS', applied: outcome.applied });
  sendJson(res, 200, { id: jobId, status: outcome.job.status, accepted: outcome.kind === 'finished' });
}

/** Body codes that the same result would get every time: the job ends FAILED rather than run again. */
const REFUSED_FOR_GOOD = new Set(['PAYLOAD_TOO_LARGE', 'INVALID_JSON', 'JSON_TOO_DEEP']);

/** A job-done body refused for good (too large, not JSON) fails the job; the refusal is answered after. */
async function refuseResult(workers: WorkerService, call: EndpointCall, err: unknown): Promise<void> {
  if (err instanceof AppError && REFUSED_FOR_GOOD.has(err.code)) {
    await workers.refuseResult(call.endpointId, call.params.worker!, call.params.job!, `result refused by the gateway: ${err.message}`);
  }
}

async function stream(workers: WorkerService, { res, endpointId, body }: EndpointCall, workerId: string, jobId: string): Promise<void> {
  const outcome = await workers.stream(endpointId, workerId, jobId, body);
  if (outcome.kind === 'refused') throw refused(outcome, workerId);
  if (outcome.kind === 'stream-full') throw streamBufferFull(outcome.jobId, outcome.maxBytes);
  sendJson(res, 200, { id: jobId, accepted: outcome.accepted, chunks: outcome.chunks });
}

/** 413: the job's undelivered chunks would pass the cap; the run's stream is cut (docs/worker-protocol.md, job-stream). */
function streamBufferFull(jobId: string, maxBytes: number): AppError {
  return new AppError(
    'STREAM_BUFFER_FULL',
    `Job ${jobId}: its readers have not taken the ${maxBytes} bytes of stream already buffered (GANTRY_STREAM_BUFFER_BYTES); this run's stream is cut and its later chunks are refused. Keep running: the result still goes to job-done`,
    { id: jobId },
  );
}

/** A worker's post refused: 404 for a job the endpoint does not have, 409 for one the worker does not hold. */
function refused(outcome: WorkerRefusal, workerId: string): AppError {
  if (outcome.refusal === 'job-not-found') return jobNotFound(outcome.jobId);
  const { job } = outcome;
  return new AppError('JOB_NOT_HELD', `Job ${job.id} is ${job.status} and not held by worker ${workerId}`, { id: job.id, status: job.status });
}
