import type { IncomingMessage, ServerResponse } from 'node:http';
import { AppError } from '../errors.js';
import { renderJob, renderJobRef } from '../jobs/job-view.js';
import { parseSubmitBody, queryInteger } from '../jobs/policy.js';
import type { RetryResult } from '../jobs/job-service.js';
import type { JobRecord } from '../store/store.js';
import type { App } from '../app.js';
import { checkImageInput } from '../images/image-endpoints.js';
import { MB, readJsonBody } from './body.js';
import { sendJson, sendJsonText } from './respond.js';

/** A client request after routing: `/v2/{endpointId}/{operation}/{jobId?}`. */
export interface ClientRequest {
  req: IncomingMessage;
  res: ServerResponse;
  endpointId: string;
  operation: string;
  jobId: string | undefined;
  query: URLSearchParams;
  signal: AbortSignal;
}

/** Operation → [scope, methods, rate-limit bucket]. */
const OPERATIONS: Record<string, { scope: 'run' | 'read'; methods: string[]; bucket: string; needsJob: boolean }> = {
  run: { scope: 'run', methods: ['POST'], bucket: 'run', needsJob: false },
  runsync: { scope: 'run', methods: ['POST'], bucket: 'runsync', needsJob: false },
  status: { scope: 'read', methods: ['GET', 'POST'], bucket: 'status', needsJob: true },
  'status-sync': { scope: 'read', methods: ['GET', 'POST'], bucket: 'status', needsJob: true },
  stream: { scope: 'read', methods: ['GET', 'POST'], bucket: 'status', needsJob: true },
  cancel: { scope: 'run', methods: ['POST'], bucket: 'cancel', needsJob: true },
  retry: { scope: 'run', methods: ['POST'], bucket: 'retry', needsJob: true },
  'purge-queue': { scope: 'run', methods: ['POST'], bucket: 'purge-queue', needsJob: false },
  health: { scope: 'read', methods: ['GET'], bucket: 'health', needsJob: false },
  requests: { scope: 'read', methods: ['GET'], bucket: 'requests', needsJob: false },
};

export function isClientOperation(operation: string): boolean {
  return operation in OPERATIONS;
}

const DEFAULT_SYNC_WAIT_MS = 90_000;
const DEFAULT_STREAM_WAIT_MS = 10_000;

function jobNotFound(id: string): AppError {
  return new AppError(404, 'JOB_NOT_FOUND', `Job ${id} not found`, { id });
}

/** Client routes (DESIGN.md §1). Success is always HTTP 200: runpod-sdk treats any other 2xx as an error. */
export async function handleClientRoute(app: App, r: ClientRequest): Promise<void> {
  const op = OPERATIONS[r.operation];
  if (!op) throw new AppError(404, 'NOT_FOUND', `Unknown operation: ${r.operation}`);
  const method = r.req.method ?? 'GET';
  if (!op.methods.includes(method)) {
    throw new AppError(405, 'METHOD_NOT_ALLOWED', `${method} is not allowed on /${r.operation} (use ${op.methods.join(' or ')})`, undefined, { allow: op.methods.join(', ') });
  }
  if (op.needsJob !== (r.jobId !== undefined)) {
    throw new AppError(404, 'NOT_FOUND', op.needsJob ? `/${r.operation} needs a job id: /${r.operation}/{job_id}` : `Unknown route: /${r.operation}/${r.jobId}`);
  }
  const principal = await app.auth.authorize(r.req, op.scope, r.endpointId);
  const endpoint = await app.jobs.getEndpoint(r.endpointId);
  if (!endpoint) throw new AppError(404, 'ENDPOINT_NOT_FOUND', `Endpoint ${r.endpointId} not found`);
  const leave = app.rateLimiter.enter(r.endpointId, op.bucket);
  try {
    const jobId = r.jobId ?? '';
    switch (r.operation) {
      case 'run': {
        const request = parseSubmitBody(await readJsonBody(r.req, 10 * MB), endpoint.executionTimeoutMs);
        checkImageInput(app.config.images, endpoint.id, request.inputJson);
        const job = await app.jobs.submit(endpoint, request, { sync: false, keyId: principal.keyId });
        return sendJsonText(r.res, 200, renderJobRef(job));
      }
      case 'runsync': {
        const wait = queryInteger('wait', r.query.get('wait'), DEFAULT_SYNC_WAIT_MS, 1_000, 300_000, true);
        const request = parseSubmitBody(await readJsonBody(r.req, 20 * MB), endpoint.executionTimeoutMs);
        checkImageInput(app.config.images, endpoint.id, request.inputJson);
        const job = await app.jobs.submit(endpoint, request, { sync: true, keyId: principal.keyId });
        const latest = (await app.jobs.waitTerminal(r.endpointId, job.id, wait, r.signal)) ?? job;
        return sendJobOrRef(r.res, latest);
      }
      case 'status': {
        const ttl = r.query.get('ttl');
        const ttlMs = ttl === null ? null : queryInteger('ttl', ttl, 0, 1, 7 * 86_400_000);
        const job = await app.jobs.status(r.endpointId, jobId, ttlMs);
        if (!job) throw jobNotFound(jobId);
        return sendJsonText(r.res, 200, renderJob(job));
      }
      case 'status-sync': {
        const wait = queryInteger('wait', r.query.get('wait'), DEFAULT_SYNC_WAIT_MS, 1_000, 300_000, true);
        const job = await app.jobs.waitTerminal(r.endpointId, jobId, wait, r.signal);
        if (!job) throw jobNotFound(jobId);
        return sendJsonText(r.res, 200, renderJob(job));
      }
      case 'stream': {
        const wait = queryInteger('wait', r.query.get('wait'), DEFAULT_STREAM_WAIT_MS, 0, 300_000, true);
        const result = await app.jobs.readStream(r.endpointId, jobId, wait, r.signal);
        if (!result) throw jobNotFound(jobId);
        const stream = result.chunks.map((chunk) => `{"output":${chunk}}`).join(',');
        return sendJsonText(r.res, 200, `{"id":${JSON.stringify(jobId)},"status":"${result.job.status}","stream":[${stream}]}`);
      }
      case 'cancel': {
        const result = await app.jobs.cancel(r.endpointId, jobId);
        if (result.ok) return sendJsonText(r.res, 200, renderJobRef(result.job));
        throw refusal(jobId, result, 'cancel');
      }
      case 'retry': {
        const result = await app.jobs.retry(r.endpointId, jobId);
        if (result.ok) return sendJsonText(r.res, 200, renderJobRef(result.job));
        throw refusal(jobId, result, 'retry');
      }
      case 'purge-queue': {
        const removed = await app.jobs.purgeQueue(r.endpointId);
        return sendJson(r.res, 200, { removed, status: 'completed' });
      }
      case 'health': {
        return sendJson(r.res, 200, await app.jobs.health(r.endpointId));
      }
      case 'requests': {
        const limit = queryInteger('limit', r.query.get('limit'), 50, 1, 1000);
        const jobs = await app.jobs.listRequests(r.endpointId, limit);
        return sendJson(r.res, 200, { requests: jobs.map(requestSummary) });
      }
    }
  } finally {
    leave();
  }
}

/** A finished job in full; an unfinished one as `{id, status}` so the client polls (runsync). */
function sendJobOrRef(res: ServerResponse, job: JobRecord): void {
  const done = job.status !== 'IN_QUEUE' && job.status !== 'IN_PROGRESS';
  sendJsonText(res, 200, done ? renderJob(job) : renderJobRef(job));
}

function refusal(id: string, result: Exclude<RetryResult, { ok: true }>, action: 'cancel' | 'retry'): AppError {
  if (result.reason === 'not-found') return jobNotFound(id);
  const status = result.job.status;
  if (result.reason === 'expired') {
    return new AppError(410, 'JOB_EXPIRED', `Job ${id} can no longer be retried: its result has expired`, { id, status });
  }
  const allowed = action === 'cancel' ? 'IN_QUEUE or IN_PROGRESS' : 'FAILED or TIMED_OUT';
  return new AppError(409, 'INVALID_STATE', `Job ${id} is ${status}: only ${allowed} jobs can be ${action === 'cancel' ? 'cancelled' : 'retried'}`, { id, status });
}

function requestSummary(job: JobRecord) {
  return {
    id: job.id,
    status: job.status,
    createdAt: new Date(job.createdAt).toISOString(),
    delayTime: job.startedAt === null ? null : job.startedAt - job.queuedAt,
    executionTime: job.startedAt === null || job.finishedAt === null ? null : job.finishedAt - job.startedAt,
    workerId: job.workerId,
    retries: job.retries,
  };
}
