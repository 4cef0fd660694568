import type { IncomingMessage, ServerResponse } from 'node:http';
import { AppError } from '../errors.js';
import { queryInteger } from '../jobs/policy.js';
import type { App } from '../app.js';
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

const OPERATIONS: Record<string, { method: string; needsJob: boolean }> = {
  'job-take': { method: 'GET', needsJob: false },
  'job-take-batch': { method: 'GET', needsJob: false },
  'job-stop': { method: 'GET', needsJob: false },
  ping: { method: 'GET', needsJob: false },
  'job-done': { method: 'POST', needsJob: true },
  'job-stream': { method: 'POST', needsJob: true },
};

export function isWorkerOperation(operation: string): boolean {
  return operation in OPERATIONS;
}

const WORKER_ID = /^[A-Za-z0-9][A-Za-z0-9._:@-]{0,127}$/;
const MAX_BATCH = 100;
/** Worker results may be larger than a submission; the 20 MB runsync limit applies to them too. */
const RESULT_LIMIT = 20 * MB;

/**
 * Worker routes: runpod-python's protocol (DESIGN.md §1), worker-scoped key. Ids come from the
 * path only (runpod-python's sticky X-Request-ID header names the wrong job).
 */
export async function handleWorkerRoute(app: App, r: WorkerRequest): Promise<void> {
  const op = OPERATIONS[r.operation];
  if (!op) throw new AppError(404, 'NOT_FOUND', `Unknown operation: ${r.operation}`);
  const method = r.req.method ?? 'GET';
  if (method !== op.method) {
    throw new AppError(405, 'METHOD_NOT_ALLOWED', `${method} is not allowed on /${r.operation} (use ${op.method})`, undefined, { allow: op.method });
  }
  const workerId = r.workerId;
  if (!workerId || !WORKER_ID.test(workerId)) {
    throw new AppError(400, 'INVALID_PARAMETER', 'Invalid parameter: worker id must be 1-128 characters of letters, digits and ._:@-', { field: 'workerId' });
  }
  if (op.needsJob !== (r.jobId !== undefined)) {
    throw new AppError(404, 'NOT_FOUND', op.needsJob ? `/${r.operation} needs /{worker_id}/{job_id}` : `Unknown route under /${r.operation}`);
  }
  await app.auth.authorize(r.req, 'worker', r.endpointId);
  const endpoint = await app.jobs.getEndpoint(r.endpointId);
  if (!endpoint) throw new AppError(404, 'ENDPOINT_NOT_FOUND', `Endpoint ${r.endpointId} not found`);
  const jobId = r.jobId ?? '';

  switch (r.operation) {
    case 'job-take': {
      const [job] = await app.workers.take(r.endpointId, workerId, 1, r.signal);
      if (!job) return sendNoContent(r.res);
      return sendJsonText(r.res, 200, app.workers.renderForWorker(job));
    }
    case 'job-take-batch': {
      const size = queryInteger('batch_size', r.query.get('batch_size'), 1, 1, MAX_BATCH, true);
      const jobs = await app.workers.take(r.endpointId, workerId, size, r.signal);
      if (jobs.length === 0) return sendNoContent(r.res);
      return sendJsonText(r.res, 200, `[${jobs.map((job) => app.workers.renderForWorker(job)).join(',')}]`);
    }
    case 'job-stop': {
      const ids = await app.workers.stops(workerId, r.signal);
      if (ids.length === 0) return sendNoContent(r.res);
      return sendJson(r.res, 200, { jobsToStop: ids });
    }
    case 'ping': {
      const held = (r.query.get('job_id') ?? '').split(',').filter((id) => id !== '');
      const unhealthy = r.query.get('status') === 'unhealthy';
      const reason = unhealthy ? [r.query.get('check'), r.query.get('reason')].filter(Boolean).join(': ') || 'reported unhealthy' : null;
      await app.workers.ping(r.endpointId, workerId, held, { healthy: !unhealthy, reason, version: r.query.get('runpod_version') });
      return sendJson(r.res, 200, { ok: true });
    }
    case 'job-done': {
      const outcome = await app.workers.done(r.endpointId, workerId, jobId, await readJsonBody(r.req, RESULT_LIMIT));
      if (outcome.kind === 'progress') return sendJson(r.res, 200, { id: jobId, status: 'IN_PROGRESS', applied: outcome.applied });
      return sendJson(r.res, 200, { id: jobId, status: outcome.job.status, accepted: outcome.kind === 'finished' });
    }
    case 'job-stream': {
      const result = await app.workers.stream(r.endpointId, workerId, jobId, await readJsonBody(r.req, RESULT_LIMIT));
      return sendJson(r.res, 200, { id: jobId, ...result });
    }
  }
}
