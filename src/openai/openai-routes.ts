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
import { NO_RETRY, sendOpenAiError } from './openai-errors.js';
import { MODELS_ROUTE, OPENAI_BODY_LIMIT, openAiJob, openAiRoute } from './openai-request.js';
import { sendOpenAiStream } from './openai-stream.js';

/** What the OpenAI routes use: the same services, keys and rate limiter as the client routes. */
export interface OpenAiRouteDeps {
  jobs: Pick<JobService, 'submit' | 'waitTerminal' | 'watchStream' | 'cancel'>;
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
 * client goes away before the answer (its worker is told through job-stop).
 *
 * @example routes.addEndpointOperation('openai', createOpenAiRoute({ jobs, endpoints, keys, rateLimiter, logger }));
 */
export function createOpenAiRoute(deps: OpenAiRouteDeps): EndpointOperationHandler {
  return async (req, res, target) => {
    const served: Served = { jobId: undefined };
    try {
      await serve(deps, req, res, target, served);
    } catch (err) {
      // Once a job exists no error may make the official clients send the request (a job) again.
      sendOpenAiError(res, err, deps.logger, { method: req.method, url: req.url, jobId: served.jobId }, served.jobId === undefined ? undefined : NO_RETRY);
    }
  };
}

/** How far a request got: the id of its job once created. */
interface Served {
  jobId: string | undefined;
}

async function serve(deps: OpenAiRouteDeps, req: IncomingMessage, res: ServerResponse, target: Target, served: Served): Promise<void> {
  const route = openAiRoute(req.method ?? 'GET', target.rest);
  const principal = await authorize(deps.keys, req, 'run', target.endpointId);
  const endpoint = await deps.endpoints.get(target.endpointId);
  if (!endpoint) throw new AppError(404, 'ENDPOINT_NOT_FOUND', `Endpoint ${target.endpointId} not found`);
  // The body first: a slow upload must not hold one of the endpoint's concurrency slots.
  const body = route === MODELS_ROUTE ? null : await readJsonBody(req, OPENAI_BODY_LIMIT);
  // Streams count among the concurrent requests for as long as they are open.
  const leave = deps.rateLimiter.enter(endpoint.id, 'openai', { overrides: endpoint.rateLimitsJson });
  try {
    const { request, stream } = openAiJob(route, body, endpoint.executionTimeoutMs);
    const job = await deps.jobs.submit(endpoint, request, { sync: true, keyId: principal.keyId });
    served.jobId = job.id;
    // The job id, for /status and /cancel (the official clients show it as the request id).
    res.setHeader('x-request-id', job.id);
    deps.logger.debug({ endpointId: endpoint.id, jobId: job.id, route, stream }, 'openai request');
    let last: JobRecord | undefined;
    try {
      last = stream
        ? await sendOpenAiStream(deps, res, endpoint.id, job, target.signal)
        : await sendOpenAiJson(deps.jobs, res, endpoint.id, job, target.signal);
    } finally {
      // Nobody will read the answer of a job still live here (the client left, or it failed).
      if (!last || !isTerminal(last.status)) await cancelQuietly(deps, endpoint.id, job.id);
    }
  } finally {
    leave();
  }
}

async function cancelQuietly(deps: OpenAiRouteDeps, endpointId: string, jobId: string): Promise<void> {
  try {
    const result = await deps.jobs.cancel(endpointId, jobId);
    if (result.ok) deps.logger.info({ endpointId, jobId }, 'openai client went away: job cancelled');
  } catch (err) {
    deps.logger.warn({ err, endpointId, jobId }, 'cancelling the job of a departed openai client failed');
  }
}
