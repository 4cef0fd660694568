import type { IncomingMessage, ServerResponse } from 'node:http';
import type { EndpointService } from '../jobs/endpoint-service.js';
import type { JobService, RetryResult } from '../jobs/job-service.js';
import { renderJob, renderJobRef } from '../jobs/job-view.js';
import { parseSubmitBody } from '../jobs/policy.js';
import { AppError } from '../model/errors.js';
import { isTerminal } from '../model/job-states.js';
import { delayTimeOf, executionTimeOf } from '../model/job-times.js';
import type { EndpointRecord, JobRecord } from '../model/records.js';
import type { KeyService, Principal } from '../security/keys.js';
import { authorize } from './auth.js';
import { MB, readJsonBody } from './body.js';
import { queryInteger } from './query.js';
import type { RateLimiter } from './rate-limit.js';
import { sendJson, sendJsonText } from './respond.js';
import { acceptsEventStream, sendJobEvents } from './sse.js';

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

/** What the client routes use. */
export interface ClientRouteDeps {
  jobs: JobService;
  endpoints: Pick<EndpointService, 'get'>;
  keys: Pick<KeyService, 'authorize'>;
  rateLimiter: RateLimiter;
}

/** One operation, authorised and rate-limited, with its endpoint found. */
interface Call {
  deps: ClientRouteDeps;
  r: ClientRequest;
  endpoint: EndpointRecord;
  principal: Principal;
  jobId: string;
  /** The parsed body of operations that take one (read before the rate limiter's slot). */
  body: unknown;
}

interface Operation {
  scope: 'run' | 'read';
  methods: string[];
  /** Rate-limit bucket (the spec's table). */
  bucket: string;
  needsJob: boolean;
  /** Long-polls: their concurrency counts only while they hold, against the endpoint's `long-poll` cap (see held). */
  longPoll?: boolean;
  /** Operations with a body: its size limit. The body is read before a concurrency slot is taken. */
  bodyLimit?: number;
  handle(call: Call): Promise<void>;
}

export const DEFAULT_SYNC_WAIT_MS = 90_000;
/**
 * An empty /stream is held this long by default: well under runpod-python's 10 s read timeout
 * (its `job.stream()` passes no wait), so a held poll never reads as `Read timed out`.
 */
export const DEFAULT_STREAM_WAIT_MS = 8_000;
const RUN_LIMIT = 10 * MB;
const RUNSYNC_LIMIT = 20 * MB;

const OPERATIONS: Record<string, Operation> = {
  run: { scope: 'run', methods: ['POST'], bucket: 'run', needsJob: false, bodyLimit: RUN_LIMIT, handle: run },
  runsync: { scope: 'run', methods: ['POST'], bucket: 'runsync', needsJob: false, bodyLimit: RUNSYNC_LIMIT, handle: runsync },
  status: { scope: 'read', methods: ['GET', 'POST'], bucket: 'status', needsJob: true, handle: status },
  'status-sync': { scope: 'read', methods: ['GET', 'POST'], bucket: 'status', needsJob: true, longPoll: true, handle: statusSync },
  stream: { scope: 'read', methods: ['GET', 'POST'], bucket: 'status', needsJob: true, longPoll: true, handle: stream },
  cancel: { scope: 'run', methods: ['POST'], bucket: 'cancel', needsJob: true, handle: cancel },
  retry: { scope: 'run', methods: ['POST'], bucket: 'retry', needsJob: true, handle: retry },
  'purge-queue': { scope: 'run', methods: ['POST'], bucket: 'purge-queue', needsJob: false, handle: purgeQueue },
  health: { scope: 'read', methods: ['GET'], bucket: 'health', needsJob: false, handle: health },
  requests: { scope: 'read', methods: ['GET'], bucket: 'requests', needsJob: false, handle: requests },
};

/** True for the operations of the client API (the rest of /v2/{endpoint}/… is the worker protocol). */
export function isClientOperation(operation: string): boolean {
  return operation in OPERATIONS;
}

/**
 * Client routes (docs/api.md): checks the method and path shape, authorises the key for the
 * endpoint, finds the endpoint, applies its rate limit, then runs the operation. Success is
 * always HTTP 200: runpod-sdk treats any other 2xx as an error.
 */
export async function handleClientRoute(deps: ClientRouteDeps, r: ClientRequest): Promise<void> {
  const op = OPERATIONS[r.operation];
  if (!op) throw new AppError('NOT_FOUND', `Unknown operation: ${r.operation}`);
  const method = r.req.method ?? 'GET';
  if (!op.methods.includes(method)) {
    throw new AppError('METHOD_NOT_ALLOWED', `${method} is not allowed on /${r.operation} (use ${op.methods.join(' or ')})`, undefined, { allow: op.methods.join(', ') });
  }
  if (op.needsJob !== (r.jobId !== undefined)) {
    throw new AppError('NOT_FOUND', op.needsJob ? `/${r.operation} needs a job id: /${r.operation}/{job_id}` : `Unknown route: /${r.operation}/${r.jobId}`);
  }
  const principal = await authorize(deps.keys, r.req, op.scope, r.endpointId);
  const endpoint = await deps.endpoints.get(r.endpointId);
  if (!endpoint) throw new AppError('ENDPOINT_NOT_FOUND', `Endpoint ${r.endpointId} not found`);
  // The body first: a slow upload must not hold one of the endpoint's concurrency slots.
  const body = op.bodyLimit === undefined ? undefined : await readJsonBody(r.req, op.bodyLimit);
  const leave = deps.rateLimiter.enter(r.endpointId, op.bucket, { concurrent: op.longPoll !== true, overrides: endpoint.rateLimitsJson });
  try {
    await op.handle({ deps, r, endpoint, principal, jobId: r.jobId ?? '', body });
  } finally {
    leave();
  }
}

async function run({ deps, r, endpoint, principal, body }: Call): Promise<void> {
  const request = parseSubmitBody(body, endpoint.executionTimeoutMs);
  const job = await deps.jobs.submit(endpoint, request, { sync: false, keyId: principal.keyId });
  sendJsonText(r.res, 200, renderJobRef(job));
}

async function runsync(call: Call): Promise<void> {
  const { deps, r } = call;
  const wait = queryInteger('wait', r.query.get('wait'), DEFAULT_SYNC_WAIT_MS, 1_000, 300_000, true);
  const job = await submitSync(call);
  const latest = (await deps.jobs.waitTerminal(r.endpointId, job.id, wait, r.signal)) ?? job;
  // A finished job in full; an unfinished one as `{id, status}` so the client polls.
  sendJsonText(r.res, 200, isTerminal(latest.status) ? renderJob(latest) : renderJobRef(latest));
}

/** Submits a runsync job in a scope of its own: the parsed input is not kept alive while the call waits. */
async function submitSync({ deps, endpoint, principal, body }: Call): Promise<JobRecord> {
  const request = parseSubmitBody(body, endpoint.executionTimeoutMs);
  return deps.jobs.submit(endpoint, request, { sync: true, keyId: principal.keyId });
}

async function status({ deps, r, jobId }: Call): Promise<void> {
  const ttl = r.query.get('ttl');
  const ttlMs = ttl === null ? null : queryInteger('ttl', ttl, 0, 1, 7 * 86_400_000);
  const job = await deps.jobs.status(r.endpointId, jobId, ttlMs);
  if (!job) throw jobNotFound(jobId);
  sendJsonText(r.res, 200, renderJob(job));
}

/**
 * Runs a wait under the endpoint's long-poll cap: a call that holds counts there, not against
 * the plain reads' concurrency, so many held calls never lock /status out.
 */
async function held<T>({ deps, r, endpoint }: Call, wait: () => Promise<T>): Promise<T> {
  const leave = deps.rateLimiter.enter(r.endpointId, 'long-poll', { overrides: endpoint.rateLimitsJson });
  try {
    return await wait();
  } finally {
    leave();
  }
}

async function statusSync(call: Call): Promise<void> {
  const { deps, r, jobId } = call;
  const wait = queryInteger('wait', r.query.get('wait'), DEFAULT_SYNC_WAIT_MS, 1_000, 300_000, true);
  let job = await deps.jobs.waitTerminal(r.endpointId, jobId, 0, r.signal);
  if (job && !isTerminal(job.status)) job = await held(call, () => deps.jobs.waitTerminal(r.endpointId, jobId, wait, r.signal));
  if (!job) throw jobNotFound(jobId);
  sendJsonText(r.res, 200, renderJob(job));
}

async function stream(call: Call): Promise<void> {
  const { deps, r, jobId } = call;
  // Server-sent events on request; the drained JSON answer stays the default (RunPod clients).
  if (acceptsEventStream(r.req)) {
    if (!(await held(call, () => sendJobEvents(deps.jobs, r.req, r.res, r.endpointId, jobId, r.signal)))) throw jobNotFound(jobId);
    return;
  }
  const wait = queryInteger('wait', r.query.get('wait'), DEFAULT_STREAM_WAIT_MS, 0, 300_000, true);
  // Drained at once when there is something to say; only an empty stream of a live job is held.
  let result = await deps.jobs.readStream(r.endpointId, jobId, 0, r.signal);
  if (result && wait > 0 && result.chunks.length === 0 && !isTerminal(result.job.status)) {
    result = await held(call, () => deps.jobs.readStream(r.endpointId, jobId, wait, r.signal));
  }
  if (!result) throw jobNotFound(jobId);
  const chunks = result.chunks.map((chunk) => `{"output":${chunk}}`).join(',');
  sendJsonText(r.res, 200, `{"id":${JSON.stringify(jobId)},"status":"${result.job.status}","stream":[${chunks}]}`);
}

async function cancel({ deps, r, jobId }: Call): Promise<void> {
  const result = await deps.jobs.cancel(r.endpointId, jobId);
  if (!result.ok) throw refusal(jobId, result, 'cancel');
  sendJsonText(r.res, 200, renderJobRef(result.job));
}

async function retry({ deps, r, jobId }: Call): Promise<void> {
  const result = await deps.jobs.retry(r.endpointId, jobId);
  if (!result.ok) throw refusal(jobId, result, 'retry');
  sendJsonText(r.res, 200, renderJobRef(result.job));
}

async function purgeQueue({ deps, r }: Call): Promise<void> {
  const removed = await deps.jobs.purgeQueue(r.endpointId);
  sendJson(r.res, 200, { removed, status: 'completed' });
}

async function health({ deps, r }: Call): Promise<void> {
  sendJson(r.res, 200, await deps.jobs.health(r.endpointId));
}

async function requests({ deps, r }: Call): Promise<void> {
  const limit = queryInteger('limit', r.query.get('limit'), 50, 1, 1000);
  const jobs = await deps.jobs.listRequests(r.endpointId, limit);
  sendJson(r.res, 200, { requests: jobs.map(requestSummary) });
}

function jobNotFound(id: string): AppError {
  return new AppError('JOB_NOT_FOUND', `Job ${id} not found`, { id });
}

function refusal(id: string, result: Exclude<RetryResult, { ok: true }>, action: 'cancel' | 'retry'): AppError {
  if (result.reason === 'not-found') return jobNotFound(id);
  const status = result.job.status;
  if (result.reason === 'expired') {
    return new AppError('JOB_EXPIRED', `Job ${id} can no longer be retried: its result has expired`, { id, status });
  }
  const allowed = action === 'cancel' ? 'IN_QUEUE or IN_PROGRESS' : 'FAILED or TIMED_OUT';
  return new AppError('INVALID_STATE', `Job ${id} is ${status}: only ${allowed} jobs can be ${action === 'cancel' ? 'cancelled' : 'retried'}`, { id, status });
}

function requestSummary(job: JobRecord) {
  return {
    id: job.id,
    status: job.status,
    createdAt: new Date(job.createdAt).toISOString(),
    delayTime: delayTimeOf(job),
    executionTime: executionTimeOf(job),
    workerId: job.workerId,
    retries: job.retries,
    attempts: job.attempts,
  };
}
