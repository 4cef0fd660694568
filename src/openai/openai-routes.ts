import type { Logger } from 'pino';
import type { EndpointCall, Route, RouteErrorSender } from '../http/route-table.js';
import { readIdempotencyKey, REPLAYED_HEADER, submitWithKey, type KeyedSubmission } from '../http/idempotency.js';
import type { JobService } from '../jobs/job-service.js';
import { isTerminal } from '../model/job-states.js';
import type { SubmitRequest } from '../jobs/policy.js';
import { AppError, routeNotFound } from '../model/errors.js';
import type { JobRecord } from '../model/records.js';
import { traceparentHeader } from '../model/trace-context.js';
import { sendOpenAiJson } from './openai-answer.js';
import { GATEWAY_CLOSING, NO_RETRY, sendOpenAiError } from './openai-errors.js';
import { MODELS_ROUTE, OPENAI_BODY_LIMIT, openAiJob, openAiRoute } from './openai-request.js';
import { sendOpenAiStream } from './openai-stream.js';

/** What the OpenAI routes use: the job service (the dispatcher checks keys, endpoints and the rate limit). */
export interface OpenAiRouteDeps {
  jobs: Pick<JobService, 'submit' | 'submitOnce' | 'getJob' | 'waitTerminal' | 'watchStream' | 'delivered' | 'cancel'>;
  logger: Logger;
}

/**
 * `/v2/{endpointId}/openai/...` (docs/openai.md) as entries of the route table: `GET
 * /openai/v1/models` and `POST /openai/v1/...` (any route: the worker decides what it serves),
 * with a run key on the endpoint, its `openai` rate bucket, and errors in OpenAI's shape. Each
 * request becomes a job with input `{"openai_route", "openai_input"}`; the answer is the
 * worker's output, or server-sent events from its stream with `"stream": true`. The job is
 * cancelled when the client goes away before the answer (its worker is told through job-stop),
 * unless the request carried an Idempotency-Key: its job is kept for the client's retry.
 * A gateway shutting down creates no more jobs (503) and waits for those it has until just
 * before its grace ends, then answers 503: a job still queued is cancelled (its client sends the
 * request again), a running one is left to finish (`shutDown`).
 *
 * @example const openai = createOpenAiRoutes({ jobs, logger }); routes.add(...openai.routes);
 */
export function createOpenAiRoutes(deps: OpenAiRouteDeps): OpenAiRoutes {
  const open = new Set<AbortController>();
  let closed = false;
  const handle = async (call: EndpointCall): Promise<void> => {
    const { req, res } = call;
    const served: Served = { jobId: undefined, stop: new AbortController() };
    open.add(served.stop);
    if (closed) served.stop.abort(GATEWAY_CLOSING);
    // The dispatcher's signal also fires when the gateway begins its shutdown: this one only when
    // the client goes away, or with GATEWAY_CLOSING when the shutdown's grace is nearly over.
    res.once('close', () => {
      open.delete(served.stop);
      if (!res.writableFinished) served.stop.abort();
    });
    try {
      await serve(deps, call, served);
    } catch (err) {
      // Once a job exists no error may make the official clients send the request (a job) again.
      sendOpenAiError(res, err, deps.logger, { method: req.method, route: OPENAI_PATH, jobId: served.jobId }, served.jobId === undefined ? undefined : NO_RETRY);
    } finally {
      open.delete(served.stop);
    }
  };
  const sendError: RouteErrorSender = (res, err, logger, context) => sendOpenAiError(res, err, logger, context);
  const base = { family: 'openai', auth: 'run', needsEndpoint: true, bucket: 'openai', waits: true, sendError, handle } as const;
  const routes: Route[] = [
    { ...base, method: 'GET', path: `/v2/{endpoint}/openai${MODELS_ROUTE}` },
    { ...base, method: 'POST', path: OPENAI_PATH, bodyLimit: OPENAI_BODY_LIMIT },
    // Any other path under /openai: a 404 in OpenAI's shape, naming the routes there are.
    { family: 'openai', method: ['GET', 'POST'], path: '/v2/{endpoint}/openai/{*rest}', auth: 'public', sendError, handle: async ({ req, params }) => {
        openAiRoute(req.method ?? 'GET', params.rest!);
        throw routeNotFound();
      },
    },
  ];
  return {
    routes,
    shutDown(graceMs: number) {
      const timer = setTimeout(
        () => {
          closed = true;
          for (const stop of [...open]) stop.abort(GATEWAY_CLOSING);
        },
        Math.max(0, graceMs - ANSWER_MARGIN_MS),
      );
      timer.unref();
    },
  };
}

/** The pattern of the OpenAI POST routes (their label in metrics). */
const OPENAI_PATH = '/v2/{endpoint}/openai/v1/{*rest}';

/** The OpenAI routes, with the switch a gateway's shutdown flips. */
export interface OpenAiRoutes {
  routes: Route[];
  /**
   * The gateway closes its connections in `graceMs`: requests still waiting for their jobs
   * ANSWER_MARGIN_MS before then are answered 503 `gateway_closing` with `x-should-retry: true`
   * (an in-stream error and `[DONE]` once a stream has begun), their jobs left to run.
   */
  shutDown(graceMs: number): void;
}

/** What a shutdown keeps of its grace to answer the requests it ends (a store read and a write each). */
const ANSWER_MARGIN_MS = 1_000;

/** How far a request got: the id of its job once created; what ends its wait. */
interface Served {
  jobId: string | undefined;
  /** Sent with an Idempotency-Key: its job outlives the request, for the client's retry. */
  keyed?: boolean;
  /** Aborted when the client goes away, or with GATEWAY_CLOSING near the end of a shutdown's grace. */
  stop: AbortController;
}

async function serve(deps: OpenAiRouteDeps, call: EndpointCall, served: Served): Promise<void> {
  const { res, endpoint } = call;
  const route = call.params.rest === undefined ? MODELS_ROUTE : openAiRoute('POST', ['v1', ...call.params.rest]);
  const { request, stream } = openAiJob(route, call.body, endpoint.executionTimeoutMs);
  call.body = undefined;
  // A gateway that has begun its shutdown (or a client already gone) gets no new job.
  if (call.signal.aborted || served.stop.signal.aborted) throw GATEWAY_CLOSING;
  const { job, replayed } = await submitOpenAi(deps, call, request, served);
  // The job id, for /status and /cancel (the official clients show it as the request id).
  res.setHeader('x-request-id', job.id);
  deps.logger.debug({ endpointId: endpoint.id, jobId: job.id, route, stream, replayed }, 'openai request');
  const signal = served.stop.signal;
  let last: JobRecord | undefined;
  try {
    if (replayed) res.setHeader(REPLAYED_HEADER, 'true');
    // A stream's chunks are delivered once, to the request that made its job.
    if (replayed && stream) throw streamNotReplayable(endpoint.id, job.id);
    last = stream ? await sendOpenAiStream(deps, res, endpoint.id, job, signal) : await sendOpenAiJson(deps.jobs, res, endpoint.id, job, signal);
  } finally {
    // Nobody will read the answer of a job still live here (the client left, or it failed),
    // unless its client said it would retry (an Idempotency-Key); one that outlived the
    // gateway's shutdown goes on (its client was told to send it again).
    const live = !last || !isTerminal(last.status);
    if (live && served.keyed === true) deps.logger.info({ endpointId: endpoint.id, jobId: job.id }, 'openai request ended before its job: the job is kept for a retry with its Idempotency-Key');
    else if (live && signal.reason !== GATEWAY_CLOSING) await cancelQuietly(deps, endpoint.id, job.id, 'openai client went away: job cancelled');
    else if (live) await leaveOrCancel(deps, endpoint.id, job.id);
  }
}

/** Submits the request's job: under its Idempotency-Key when it has one (docs/api.md), the job an earlier try made. */
async function submitOpenAi(deps: OpenAiRouteDeps, call: EndpointCall, request: SubmitRequest, served: Served): Promise<KeyedSubmission> {
  const { endpoint } = call;
  const keyId = call.principal.keyId;
  const key = readIdempotencyKey(call.req);
  // A client's W3C `traceparent` is continued by the job's trace, as on /run (docs/observability.md).
  const traceparent = traceparentHeader(call.req.headers);
  const submitted =
    key === undefined
      ? { job: await deps.jobs.submit(endpoint, request, { sync: true, keyId, traceparent }), replayed: false }
      : await submitWithKey(deps.jobs, endpoint, request, { key, keyId, sync: true, operation: 'openai', traceparent });
  served.jobId = submitted.job.id;
  served.keyed = key !== undefined;
  return submitted;
}

/** 409 for a streaming request retried under its Idempotency-Key: the stream went to the first try. */
function streamNotReplayable(endpointId: string, jobId: string): AppError {
  return new AppError(
    'STREAM_NOT_REPLAYABLE',
    `Job ${jobId} of this Idempotency-Key streams to the request that made it, and a stream is delivered once: read its result at /v2/${endpointId}/status/${jobId}`,
    { id: jobId },
  );
}

/**
 * At the end of a shutdown's grace: a job no worker has taken yet is cancelled, since its client
 * was told to send the request again and nobody would read its answer; a running one goes on
 * (stopping it would throw away work its worker has done).
 */
async function leaveOrCancel(deps: OpenAiRouteDeps, endpointId: string, jobId: string): Promise<void> {
  const job = await deps.jobs.getJob(endpointId, jobId).catch(() => undefined);
  if (job?.status === 'IN_QUEUE') await cancelQuietly(deps, endpointId, jobId, 'gateway shutting down: openai request answered 503, its queued job cancelled');
  else deps.logger.info({ endpointId, jobId }, 'gateway shutting down: openai request answered 503, its running job left to finish');
}

async function cancelQuietly(deps: OpenAiRouteDeps, endpointId: string, jobId: string, done: string): Promise<void> {
  try {
    const result = await deps.jobs.cancel(endpointId, jobId);
    if (result.ok) deps.logger.info({ endpointId, jobId }, done);
  } catch (err) {
    deps.logger.warn({ err, endpointId, jobId }, 'cancelling the job of a departed openai client failed');
  }
}
