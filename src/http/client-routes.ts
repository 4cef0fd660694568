import type { IncomingMessage } from 'node:http';
import { noteChange, type AuditRouteDeps } from './audit-routes.js';
import type { JobService, RetryResult, StreamRead } from '../jobs/job-service.js';
import { renderJob, renderJobRef, type ShownJob } from '../jobs/job-view.js';
import { parseSubmitBody } from '../jobs/policy.js';
import { AppError, jobNotFound } from '../model/errors.js';
import { isTerminal } from '../model/job-states.js';
import { delayTimeOf, executionTimeOf } from '../model/job-times.js';
import type { JobRecord } from '../model/records.js';
import { traceparentHeader } from '../model/trace-context.js';
import { MB } from './body.js';
import type { FileLinks } from './file-links.js';
import { readIdempotencyKey, REPLAYED, submitWithKey, type KeyedSubmission } from './idempotency.js';
import { queryInteger } from './query.js';
import type { RateLimiter } from './rate-limit.js';
import { responseWritten, sendJson, sendJsonText } from './respond.js';
import type { EndpointCall, EndpointRoute, HttpMethod } from './route-table.js';
import { acceptsEventStream, sendJobEvents } from './sse.js';

/** What the client routes use. */
export interface ClientRouteDeps extends AuditRouteDeps {
  jobs: JobService;
  rateLimiter: RateLimiter;
  /** The gateway's own file links as each client reached it (none: answers as stored). */
  fileLinks?: FileLinks;
}

/** A job's JSON for the client that asked (its input where read: ShownJob): its own file links pointing where it came from. */
function jobFor(deps: ClientRouteDeps, req: IncomingMessage, job: ShownJob): string {
  const text = renderJob(job);
  return deps.fileLinks ? deps.fileLinks.localize(text, req) : text;
}

export const DEFAULT_SYNC_WAIT_MS = 90_000;
/**
 * An empty /stream is held this long by default: well under runpod-python's 10 s read timeout
 * (its `job.stream()` passes no wait), so a held poll never reads as `Read timed out`.
 */
export const DEFAULT_STREAM_WAIT_MS = 8_000;
const RUN_LIMIT = 10 * MB;
const RUNSYNC_LIMIT = 20 * MB;
/** The submit field stored as text: a large one is serialised off the event loop (body.ts). */
const SUBMIT_RAW = ['input'] as const;

/** A client operation of the route table: run with the services and the checked call. */
type Handler = (deps: ClientRouteDeps, call: EndpointCall) => Promise<void>;

/**
 * Client routes (docs/api.md) as entries of the route table: each names its methods, path, scope
 * (on the path's endpoint), rate-limit bucket (the spec's table) and body limit; the dispatcher
 * checks them before the operation runs. Success is always HTTP 200: runpod-sdk treats any other
 * 2xx as an error.
 *
 * @example routes.add(...clientRoutes({ jobs }));
 */
export function clientRoutes(deps: ClientRouteDeps): EndpointRoute[] {
  const route = (method: HttpMethod | HttpMethod[], op: string, spec: Pick<EndpointRoute, 'auth' | 'bucket'> & Partial<EndpointRoute>, handle: Handler): EndpointRoute => ({
    family: 'client',
    method,
    path: spec.path ?? `/v2/{endpoint}/${op}`,
    needsEndpoint: true,
    ...spec,
    handle: (call) => handle(deps, call),
  });
  const GET_OR_POST: HttpMethod[] = ['GET', 'POST'];
  return [
    route('POST', 'run', { auth: 'run', bucket: 'run', bodyLimit: RUN_LIMIT, rawFields: SUBMIT_RAW }, run),
    route('POST', 'runsync', { auth: 'run', bucket: 'runsync', bodyLimit: RUNSYNC_LIMIT, rawFields: SUBMIT_RAW, waits: true }, runsync),
    route(GET_OR_POST, 'status', { auth: 'read', bucket: 'status', path: '/v2/{endpoint}/status/{job}' }, status),
    route(GET_OR_POST, 'status-sync', { auth: 'read', bucket: 'status', path: '/v2/{endpoint}/status-sync/{job}', waits: true, windowOnly: true }, statusSync),
    route(GET_OR_POST, 'stream', { auth: 'read', bucket: 'status', path: '/v2/{endpoint}/stream/{job}', waits: true, windowOnly: true }, stream),
    route('POST', 'cancel', { auth: 'run', bucket: 'cancel', path: '/v2/{endpoint}/cancel/{job}' }, cancel),
    route('POST', 'retry', { auth: 'run', bucket: 'retry', path: '/v2/{endpoint}/retry/{job}' }, retry),
    route('POST', 'purge-queue', { auth: 'run', bucket: 'purge-queue' }, purgeQueue),
    route('GET', 'health', { auth: 'read', bucket: 'health' }, health),
    route('GET', 'requests', { auth: 'read', bucket: 'requests' }, requests),
  ];
}

async function run(deps: ClientRouteDeps, { req, res, endpoint, principal, body }: EndpointCall): Promise<void> {
  const request = parseSubmitBody(body, endpoint.executionTimeoutMs);
  // With an Idempotency-Key (docs/api.md): the job an earlier try made, or a new one. Without: nothing more is read.
  const key = readIdempotencyKey(req);
  if (key !== undefined) {
    const { job, replayed } = await submitWithKey(deps.jobs, endpoint, request, { key, keyId: principal.keyId, sync: false, operation: 'run', traceparent: traceparentHeader(req.headers) });
    sendJsonText(res, 200, renderJobRef(job), replayed ? REPLAYED : undefined);
    return;
  }
  const job = await deps.jobs.submit(endpoint, request, { sync: false, keyId: principal.keyId, traceparent: traceparentHeader(req.headers) });
  sendJsonText(res, 200, renderJobRef(job));
}

async function runsync(deps: ClientRouteDeps, call: EndpointCall): Promise<void> {
  const wait = queryInteger('wait', call.query.get('wait'), DEFAULT_SYNC_WAIT_MS, 1_000, 300_000, true);
  const { job, replayed } = await submitSync(deps, call);
  // A retry under its Idempotency-Key waits on the job the first try made, as that try would have.
  const latest = (await deps.jobs.waitTerminal(call.endpointId, job.id, wait, call.signal)) ?? job;
  // A finished job in full; an unfinished one as `{id, status}` so the client polls.
  sendJsonText(call.res, 200, isTerminal(latest.status) ? jobFor(deps, call.req, latest) : renderJobRef(latest), replayed ? REPLAYED : undefined);
}

/** Submits a runsync job in a scope of its own, the body dropped from the call: the parsed input is not kept alive while the call waits. */
async function submitSync(deps: ClientRouteDeps, call: EndpointCall): Promise<KeyedSubmission> {
  const request = parseSubmitBody(call.body, call.endpoint.executionTimeoutMs);
  call.body = undefined;
  const keyId = call.principal.keyId;
  const key = readIdempotencyKey(call.req);
  const traceparent = traceparentHeader(call.req.headers);
  if (key !== undefined) return submitWithKey(deps.jobs, call.endpoint, request, { key, keyId, sync: true, operation: 'runsync', traceparent });
  return { job: await deps.jobs.submit(call.endpoint, request, { sync: true, keyId, traceparent }), replayed: false };
}

async function status(deps: ClientRouteDeps, { req, res, endpointId, params, query }: EndpointCall): Promise<void> {
  const ttl = query.get('ttl');
  const ttlMs = ttl === null ? null : queryInteger('ttl', ttl, 0, 1, 7 * 86_400_000);
  const jobId = params.job!;
  const job = await deps.jobs.status(endpointId, jobId, ttlMs);
  if (!job) throw jobNotFound(jobId);
  sendJsonText(res, 200, jobFor(deps, req, job));
}

/**
 * Runs a wait under the endpoint's long-poll cap: a call that holds counts there, not against
 * the plain reads' concurrency, so many held calls never lock /status out.
 */
async function held<T>(deps: ClientRouteDeps, { endpointId, endpoint, principal }: EndpointCall, wait: () => Promise<T>): Promise<T> {
  const leave = deps.rateLimiter.enter(endpointId, 'long-poll', { overrides: endpoint.rateLimitsJson, keyId: principal.keyId });
  try {
    return await wait();
  } finally {
    leave();
  }
}

async function statusSync(deps: ClientRouteDeps, call: EndpointCall): Promise<void> {
  const { endpointId, signal } = call;
  const jobId = call.params.job!;
  const wait = queryInteger('wait', call.query.get('wait'), DEFAULT_SYNC_WAIT_MS, 1_000, 300_000, true);
  let job: ShownJob | undefined = await deps.jobs.waitTerminal(endpointId, jobId, 0, signal);
  if (job && !isTerminal(job.status)) job = await held(deps, call, () => deps.jobs.waitTerminal(endpointId, jobId, wait, signal));
  // Still live after the wait: read again with its input, which a live job's answer shows.
  if (job && !isTerminal(job.status)) job = await deps.jobs.status(endpointId, jobId, null);
  if (!job) throw jobNotFound(jobId);
  sendJsonText(call.res, 200, jobFor(deps, call.req, job));
}

async function stream(deps: ClientRouteDeps, call: EndpointCall): Promise<void> {
  const { req, res, endpointId, signal } = call;
  const jobId = call.params.job!;
  // Server-sent events on request; the drained JSON answer stays the default (RunPod clients).
  if (acceptsEventStream(req)) {
    if (!(await held(deps, call, () => sendJobEvents(deps.jobs, req, res, endpointId, jobId, signal)))) throw jobNotFound(jobId);
    return;
  }
  const wait = queryInteger('wait', call.query.get('wait'), DEFAULT_STREAM_WAIT_MS, 0, 300_000, true);
  // Answered at once when there is something to say; only an empty stream of a live job is held.
  let page = await deps.jobs.readStream(endpointId, jobId, 0, signal);
  if (page && wait > 0 && page.through === 0 && !isTerminal(page.job.status)) {
    page = await held(deps, call, () => deps.jobs.readStream(endpointId, jobId, wait, signal));
  }
  if (!page) throw jobNotFound(jobId);
  sendJsonText(res, 200, renderStreamPage(page));
  // The page's chunks leave the buffer only once the answer is out: a client gone before keeps them.
  if (page.through > 0 && (await responseWritten(res))) await deps.jobs.delivered(jobId, page.through);
}

/**
 * The JSON /stream answer: `{id, status, stream: [{output}, …]}` (RunPod's shape, which
 * runpod-python's and runpod-sdk's readers parse), with `attempt`, the run the chunks belong to,
 * when it has any (a page never holds two runs: a reader that sees it grow knows the job ran
 * again from its start), and `truncated: true` after the last chunk of a run whose stream the
 * byte cap cut. While a finished job still has pages to give, `status` says IN_PROGRESS: the
 * stream is not over, and readers that stop at a final status (runpod-sdk's `stream()`) read on.
 */
function renderStreamPage(page: StreamRead): string {
  const status = page.more && isTerminal(page.job.status) ? 'IN_PROGRESS' : page.job.status;
  const run = page.through > 0 ? `"attempt":${page.attempt},` : '';
  let text = `{"id":${JSON.stringify(page.job.id)},"status":"${status}",${run}"stream":[`;
  for (let i = 0; i < page.chunks.length; i++) text += `${i === 0 ? '' : ','}{"output":${page.chunks[i]!}}`;
  return text + (page.truncated ? '],"truncated":true}' : ']}');
}

async function cancel(deps: ClientRouteDeps, call: EndpointCall): Promise<void> {
  const jobId = call.params.job!;
  const result = await deps.jobs.cancel(call.endpointId, jobId);
  if (!result.ok) throw refusal(jobId, result, 'cancel');
  await noteJobChange(deps, call, 'job.cancel', jobId);
  sendJsonText(call.res, 200, renderJobRef(result.job));
}

async function retry(deps: ClientRouteDeps, call: EndpointCall): Promise<void> {
  const jobId = call.params.job!;
  const result = await deps.jobs.retry(call.endpointId, jobId);
  if (!result.ok) throw refusal(jobId, result, 'retry');
  await noteJobChange(deps, call, 'job.retry', jobId);
  sendJsonText(call.res, 200, renderJobRef(result.job));
}

/** A cancel or retry by an admin key (the console's buttons included) is an admin change, audited as a purge is; a run key's is its own client's business. */
async function noteJobChange(deps: ClientRouteDeps, call: EndpointCall, action: 'job.cancel' | 'job.retry', jobId: string): Promise<void> {
  if (call.principal.scopes.includes('admin')) await noteChange(deps, call, action, { kind: 'job', id: jobId }, { endpoint: call.endpointId });
}

async function purgeQueue(deps: ClientRouteDeps, call: EndpointCall): Promise<void> {
  const { res, endpointId, principal } = call;
  const removed = await deps.jobs.purgeQueue(endpointId);
  // An admin's purge is an admin change (the audit log); a run key's is its own client's business.
  if (principal.scopes.includes('admin')) await noteChange(deps, call, 'queue.purge', { kind: 'endpoint', id: endpointId }, { removed });
  sendJson(res, 200, { removed, status: 'completed' });
}

async function health(deps: ClientRouteDeps, { res, endpointId }: EndpointCall): Promise<void> {
  sendJson(res, 200, await deps.jobs.health(endpointId));
}

async function requests(deps: ClientRouteDeps, { res, endpointId, query }: EndpointCall): Promise<void> {
  const limit = queryInteger('limit', query.get('limit'), 50, 1, 1000);
  const jobs = await deps.jobs.listRequests(endpointId, limit);
  sendJson(res, 200, { requests: jobs.map(requestSummary) });
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
