// The pure parts of the OpenAI feature: routes, request checks, answers and error shapes.
import { describe, expect, it } from 'vitest';
import { initialJob } from '../../src/jobs/transitions.js';
import { AppError } from '../../src/model/errors.js';
import { textOf } from '../../src/model/json.js';
import type { JobRecord } from '../../src/model/records.js';
import { answerText } from '../../src/openai/openai-answer.js';
import { jobFailure, openAiErrorBody, workerError } from '../../src/openai/openai-errors.js';
import { openAiJob, openAiRoute } from '../../src/openai/openai-request.js';

function caught(fn: () => unknown): AppError {
  try {
    fn();
  } catch (err) {
    if (err instanceof AppError) return err;
    throw err;
  }
  throw new Error('expected an AppError');
}

function ended(status: JobRecord['status'], error: string | null): JobRecord {
  const job = initialJob({ id: 'sync-1', endpointId: 'ep', inputBytes: 2, webhook: null, s3Config: null, executionTimeoutMs: 1, lowPriority: false, ttlMs: 1, retentionMs: 1, maxAttempts: 1, sync: true, keyId: null, now: 0 });
  return { ...job, status, error };
}

describe('openAiRoute', () => {
  it('names the route below /openai and checks its method', () => {
    expect(openAiRoute('POST', ['v1', 'chat', 'completions'])).toBe('/v1/chat/completions');
    expect(openAiRoute('GET', ['v1', 'models'])).toBe('/v1/models');
    expect(openAiRoute('POST', ['v1', 'embeddings'])).toBe('/v1/embeddings');
    expect(caught(() => openAiRoute('POST', ['v1', 'models']))).toMatchObject({ status: 405, headers: { allow: 'GET' } });
    expect(caught(() => openAiRoute('GET', ['v1', 'completions']))).toMatchObject({ status: 405, headers: { allow: 'POST' } });
  });

  it('refuses paths that are not plain, short routes under v1', () => {
    for (const rest of [[], ['v1'], ['v2', 'chat'], ['v1', 'a b'], ['v1', '..%2f'], ['v1', '..', 'admin'], ['v1', 'a', 'b', 'c', 'd', 'e', 'f'], ['v1', 'x'.repeat(65)]]) {
      expect(caught(() => openAiRoute('POST', rest)).status).toBe(404);
    }
  });
});

describe('openAiJob', () => {
  it('wraps the body as RunPod LLM workers read it', () => {
    const body = { model: 'm', messages: [{ role: 'user', content: 'hi' }], stream: true };
    const { request, stream } = openAiJob('/v1/chat/completions', body, 30_000);
    expect(stream).toBe(true);
    expect(JSON.parse(textOf(request.inputJson))).toEqual({ openai_route: '/v1/chat/completions', openai_input: body });
    expect(request).toMatchObject({ executionTimeoutMs: 30_000, webhook: null, s3Config: null, lowPriority: false });
    expect(openAiJob('/v1/models', null, 1).request.inputJson).toBe('{"openai_route":"/v1/models","openai_input":null}');
    expect(openAiJob('/v1/completions', { prompt: 'p' }, 1).stream).toBe(false);
  });

  it('names the field that is wrong', () => {
    const param = (route: string, body: unknown) => caught(() => openAiJob(route, body, 1)).extra?.field;
    expect(param('/v1/chat/completions', { model: 'm' })).toBe('messages');
    expect(param('/v1/chat/completions', { messages: [] })).toBe('messages');
    expect(param('/v1/chat/completions', { messages: ['hi'] })).toBe('messages[0]');
    expect(param('/v1/chat/completions', { messages: [{}], model: 3 })).toBe('model');
    expect(param('/v1/completions', {})).toBe('prompt');
    expect(param('/v1/completions', { prompt: 3 })).toBe('prompt');
    expect(param('/v1/embeddings', { stream: 1 })).toBe('stream');
    expect(caught(() => openAiJob('/v1/embeddings', 'text', 1))).toMatchObject({ status: 400, code: 'INVALID_BODY' });
  });
});

describe('answers and errors', () => {
  it('answers the output, or its one element', () => {
    expect(answerText('{"a":1}')).toBe('{"a":1}');
    expect(answerText('[{"a":1}]')).toBe('{"a":1}');
    expect(answerText('[1,2]')).toBe('[1,2]');
    expect(caught(() => answerText('[]'))).toMatchObject({ status: 502, code: 'EMPTY_OUTPUT' });
    expect(caught(() => answerText(null))).toMatchObject({ status: 502 });
    expect(caught(() => answerText('[{"object":"error","message":"m","type":"T","code":422}]'))).toMatchObject({ status: 422, message: 'm' });
  });

  it('reads vLLM and OpenAI error objects, and nothing else', () => {
    expect(workerError({ object: 'error', message: 'no', type: 'NotFoundError', code: 404 })).toMatchObject({ status: 404, extra: { type: 'NotFoundError' } });
    expect(workerError({ error: { message: 'slow', type: 'x', code: '429' } })).toMatchObject({ status: 429 });
    expect(workerError({ error: { message: 'odd', code: 'model_not_found' } })).toMatchObject({ status: 500 });
    expect(workerError({ error: 'a string' })).toBeUndefined();
    expect(workerError({ choices: [] })).toBeUndefined();
    expect(workerError('error')).toBeUndefined();
  });

  it('says why a finished job has no answer, and asks clients not to retry it', () => {
    expect(jobFailure(ended('FAILED', 'boom'))).toMatchObject({ status: 500, code: 'WORKER_ERROR', message: 'boom', headers: { 'x-should-retry': 'false' } });
    expect(jobFailure(ended('FAILED', '{"object":"error","message":"bad","type":"BadRequestError","code":400}'))).toMatchObject({ status: 400, message: 'bad' });
    expect(jobFailure(ended('TIMED_OUT', null))).toMatchObject({ status: 504, code: 'JOB_TIMED_OUT' });
    expect(jobFailure(ended('CANCELLED', null))).toMatchObject({ status: 409, code: 'JOB_CANCELLED' });
  });

  it('renders any AppError in OpenAI shape', () => {
    expect(openAiErrorBody(new AppError('INVALID_PARAMETER', 'Invalid parameter: n must be 1', { field: 'n' }))).toEqual({
      error: { message: 'Invalid parameter: n must be 1', type: 'invalid_request_error', param: 'n', code: 'invalid_parameter' },
    });
    expect(openAiErrorBody(new AppError('UNAUTHORIZED', 'no key')).error.type).toBe('authentication_error');
    expect(openAiErrorBody(new AppError('QUEUE_FULL', 'full')).error.type).toBe('rate_limit_error');
    expect(openAiErrorBody(new AppError('GATEWAY_CLOSING', 'down')).error.type).toBe('server_error');
  });
});
