import { MB } from '../http/body.js';
import { POLICY_LIMITS, type SubmitRequest } from '../jobs/policy.js';
import { AppError, invalidParameter } from '../model/errors.js';
import { isObject } from '../model/json.js';

/** Request bodies of the OpenAI routes, as for /runsync. */
export const OPENAI_BODY_LIMIT = 20 * MB;

/** The route whose answer is the worker's model list; the only one read with GET. */
export const MODELS_ROUTE = '/v1/models';

/** Route paths stay short and plain: they are stored in the job's input and read by the worker. */
const SEGMENT = /^(?!\.{1,2}$)[A-Za-z0-9._~-]{1,64}$/;
const MAX_SEGMENTS = 6;

/**
 * The OpenAI route a request names below `/v2/{endpoint}/openai/` (e.g. `/v1/chat/completions`),
 * checked against its method. Any POST route under `/v1/` passes through to the worker (the
 * worker decides what it serves); `GET /v1/models` is the one GET.
 *
 * @example openAiRoute('POST', ['v1', 'chat', 'completions']) === '/v1/chat/completions'
 */
export function openAiRoute(method: string, rest: string[]): string {
  if (rest[0] !== 'v1' || rest.length < 2 || rest.length > MAX_SEGMENTS || !rest.every((s) => SEGMENT.test(s))) {
    throw new AppError('NOT_FOUND', `Unknown OpenAI route: /openai/${rest.join('/')} (use /openai/v1/chat/completions, /openai/v1/completions or /openai/v1/models)`);
  }
  const route = `/${rest.join('/')}`;
  const allowed = route === MODELS_ROUTE ? 'GET' : 'POST';
  if (method !== allowed) {
    throw new AppError('METHOD_NOT_ALLOWED', `${method} is not allowed on /openai${route} (use ${allowed})`, undefined, { allow: allowed });
  }
  return route;
}

/** An OpenAI request as a job: the submit request and whether the client asked for a stream. */
export interface OpenAiJob {
  request: SubmitRequest;
  stream: boolean;
}

/**
 * Checks what Gantry relies on in an OpenAI request body (400 naming the field; the rest is the
 * worker's to judge) and builds the job: input `{"openai_route", "openai_input"}`, the
 * convention RunPod's LLM workers read, with the endpoint's execution timeout.
 *
 * @example openAiJob('/v1/completions', { model: 'm', prompt: 'Hi' }, 600000).request.input.openai_route === '/v1/completions'
 */
export function openAiJob(route: string, body: unknown, executionTimeoutMs: number): OpenAiJob {
  if (route !== MODELS_ROUTE) checkBody(route, body);
  const input = { openai_route: route, openai_input: route === MODELS_ROUTE ? null : body };
  const request: SubmitRequest = {
    input,
    inputJson: JSON.stringify(input),
    webhook: null,
    s3Config: null,
    executionTimeoutMs,
    lowPriority: false,
    ttlMs: POLICY_LIMITS.defaultTtlMs,
  };
  return { request, stream: isObject(body) && body.stream === true };
}

function checkBody(route: string, body: unknown): asserts body is Record<string, unknown> {
  if (!isObject(body)) throw new AppError('INVALID_BODY', 'Invalid request body: expected a JSON object');
  if (body.stream !== undefined && body.stream !== null && typeof body.stream !== 'boolean') throw invalidParameter('stream', 'must be a boolean');
  if (body.model !== undefined && typeof body.model !== 'string') throw invalidParameter('model', 'must be a string');
  if (route === '/v1/chat/completions') {
    if (body.messages === undefined) throw invalidParameter('messages', 'is required');
    if (!Array.isArray(body.messages) || body.messages.length === 0) throw invalidParameter('messages', 'must be a non-empty array');
    body.messages.forEach((message, i) => {
      if (!isObject(message)) throw invalidParameter(`messages[${i}]`, 'must be an object');
    });
  }
  if (route === '/v1/completions') {
    if (body.prompt === undefined) throw invalidParameter('prompt', 'is required');
    if (typeof body.prompt !== 'string' && !Array.isArray(body.prompt)) throw invalidParameter('prompt', 'must be a string or an array');
  }
}
