import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Logger } from 'pino';
import { authorize } from '../http/auth.js';
import { readJsonBody } from '../http/body.js';
import type { RateLimiter } from '../http/rate-limit.js';
import type { EndpointOperationHandler } from '../http/server.js';
import type { EndpointService } from '../jobs/endpoint-service.js';
import type { JobService } from '../jobs/job-service.js';
import { AppError } from '../model/errors.js';
import { isTerminal } from '../model/job-states.js';
import type { JobRecord } from '../model/records.js';
import type { KeyService } from '../security/keys.js';
import { sendOpenAiJson } from './openai-answer.js';
import { GATEWAY_CLOSING, NO_RETRY, sendOpenAiError } from './openai-errors.js';
import { MODELS_ROUTE, OPENAI_BODY_LIMIT, openAiJob, openAiRoute } from './openai-request.js';
import { sendOpenAiStream } from './openai-stream.js';

/** What the OpenAI routes use: the same services, keys and rate limiter as the client routes. */
export interface OpenAiRouteDeps {
  jobs: Pick<JobService, 'submit' | 'getJob' | 'waitTerminal' | 'watchStream' | 'delivered' | 'cancel'>;
  endpoints: Pick<EndpointService, 'get'>;
  keys: Pick<KeyService, 'authorize'>;
  rateLimiter: RateLimiter;
  logger: Logger;
}

type Target = Parameters<EndpointOperationHandler>[2];

/**
 * `/v2/{endpointId}/openai/...` (docs/openai.md): each request becomes a job with input
 * `{"openai_route", "openai_input"}`; the answer is the worker's output, or server-sent events
 * from its stream with `"stream": true`. Errors in OpenAI's shape. The job is cancelled when the
 * client goes away before the answer (its worker is told through job-stop). A gateway shutting
 * down creates no more jobs (503) and waits for those it has until just before its grace ends,
 * then answers 503: a job still queued is cancelled (its client sends the request again), a
 * running one is left to finish (`shutDown`).
 *
 * @example const openai = createOpenAiRoute({ jobs, endpoints, keys, rateLimiter, logger }); routes.addEndpointOperation('openai', openai);
 */
export function createOpenAiRoute(deps: OpenAiRouteDeps): OpenAiRoute {
  const open = new Set<AbortController>();
  let closed = false;
  const handler: EndpointOperationHandler = async (req, res, target) => {
    const served: Served = { jobId: undefined, stop: new AbortController() };
    open.add(served.stop);
    if (closed) served.stop.abort(GATEWAY_CLOSING);
    // The listener's signal also fires when the gateway begins its shutdown: this one only when
    // the client goes away, or with GATEWAY_CLOSING when the shutdown's grace is nearly over.
    res.once('close', () => {
      open.delete(served.stop);
      if (!res.writableFinished) served.stop.abort();
    });
    try {
      await serve(deps, req, res, target, served);
    } catch (err) {
      // Once a job exists no error may make the official clients send the request (a job) again.
      sendOpenAiError(res, err, deps.logger, { method: req.method, url: req.url, jobId: served.jobId }, served.jobId === undefined ? undefined : NO_RETRY);
    } finally {
      open.delete(served.stop);
    }
  };
  return Object.assign(handler, {
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
  });
}

/** The OpenAI route, with the switch a gateway's shutdown flips. */
export type OpenAiRoute = EndpointOperationHandler & {
  /**
   * The gateway closes its connections in `graceMs`: requests still waiting for their jobs
   * ANSWER_MARGIN_MS before then are answered 503 `gateway_closing` with `x-should-retry: true`
   * (an in-stream error and `[DONE]` once a stream has begun), their jobs left to run.
   */
  shutDown(graceMs: number): void;
};

/** What a shutdown keeps of its grace to answer the requests it ends (a store read and a write each). */
const ANSWER_MARGIN_MS = 1_000;

/** How far a request got: the id of its job once created; what ends its wait. */
interface Served {
  jobId: string | undefined;
  /** Aborted when the client goes away, or with GATEWAY_CLOSING near the end of a shutdown's grace. */
  stop: AbortController;
}

async function serve(deps: OpenAiRouteDeps, req: IncomingMessage, res: ServerResponse, target: Target, served: Served): Promise<void> {
  const route = openAiRoute(req.method ?? 'GET', target.rest);
  const principal = await authorize(deps.keys, req, 'run', target.endpointId);
  const endpoint = await deps.endpoints.get(target.endpointId);
  if (!endpoint) throw new AppError('ENDPOINT_NOT_FOUND', `Endpoint ${target.endpointId} not found`);
  // The body first: a slow upload must not hold one of the endpoint's concurrency slots.
  const body = route === MODELS_ROUTE ? null : await readJsonBody(req, OPENAI_BODY_LIMIT);
  // Streams count among the concurrent requests for as long as they are open.
  const leave = deps.rateLimiter.enter(endpoint.id, 'openai', { overrides: endpoint.rateLimitsJson });
  try {
    const { request, stream } = openAiJob(route, body, endpoint.executionTimeoutMs);
    // A gateway that has begun its shutdown (or a client already gone) gets no new job.
    if (target.signal.aborted || served.stop.signal.aborted) throw GATEWAY_CLOSING;
    const job = await deps.jobs.submit(endpoint, request, { sync: true, keyId: principal.keyId });
    served.jobId = job.id;
    // The job id, for /status and /cancel (the official clients show it as the request id).
    res.setHeader('x-request-id', job.id);
    deps.logger.debug({ endpointId: endpoint.id, jobId: job.id, route, stream }, 'openai request');
    const signal = served.stop.signal;
    let last: JobRecord | undefined;
    try {
      last = stream ? await sendOpenAiStream(deps, res, endpoint.id, job, signal) : await sendOpenAiJson(deps.jobs, res, endpoint.id, job, signal);
    } finally {
      // Nobody will read the answer of a job still live here (the client left, or it failed);
      // one that outlived the gateway's shutdown goes on (its client was told to send it again).
      const live = !last || !isTerminal(last.status);
      if (live && signal.reason !== GATEWAY_CLOSING) await cancelQuietly(deps, endpoint.id, job.id, 'openai client went away: job cancelled');
      else if (live) await leaveOrCancel(deps, endpoint.id, job.id);
    }
  } finally {
    leave();
  }
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
