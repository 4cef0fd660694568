/**
 * The official `openai` npm client pointed at a real gateway (baseURL
 * `${url}/v2/${endpoint}/openai/v1`), answered by a real worker process: the toy LLM worker
 * (examples/llm-toy-worker.ts, built in dist/). Needs `npm run build` first.
 */
import { rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import OpenAI from 'openai';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { startTestGantry, type TestGantry } from '../helpers/gantry.js';
import { systemClock, type Clock } from '../../src/util/clock.js';
import { call, uniqueId } from '../http/http-helpers.js';
import { spawnWorker, TOY_WORKER, type WorkerProcess } from './worker-process.js';

const MODEL = 'gantry-toy-llm';
const messages = [{ role: 'user' as const, content: 'Tell me about the gantry' }];

let t: TestGantry;
let runKey: string;
let endpointId: string;
let worker: WorkerProcess;
/** While this file exists the toy worker holds before every word after the first. */
const holdFile = join(tmpdir(), `llm-toy-hold-${process.pid}`);

beforeAll(async () => {
  t = await startTestGantry();
  runKey = await t.createKey(['run']);
  endpointId = uniqueId('llm');
  await t.createEndpoint(endpointId);
  worker = spawnWorker(TOY_WORKER, { ...t.workerEnv(endpointId), LLM_TOY_HOLD_FILE: holdFile });
});

afterEach(() => rmSync(holdFile, { force: true }));

afterAll(async () => {
  await worker?.stop();
  await t?.close();
});

function client(options: { maxRetries?: number } = {}): OpenAI {
  return new OpenAI({ apiKey: runKey, baseURL: `${t.url}/v2/${endpointId}/openai/v1`, maxRetries: options.maxRetries ?? 0 });
}

async function jobStatus(id: string): Promise<{ status: string; output?: unknown }> {
  const r = await call(t.url, 'GET', `/v2/${endpointId}/status/${id}`, { key: runKey });
  return r.json as { status: string; output?: unknown };
}

describe('the official openai client against Gantry', () => {
  it('lists the models the worker serves', async () => {
    const models = await client().models.list();
    expect(models.data.map((m) => m.id)).toEqual([MODEL]);
  });

  it('answers a chat completion with the worker output, usage included', async () => {
    const completion = await client().chat.completions.create({ model: MODEL, messages, max_tokens: 12 });
    expect(completion.object).toBe('chat.completion');
    const content = completion.choices[0]!.message.content!;
    expect(content.length).toBeGreaterThan(0);
    expect(completion.usage).toEqual({ prompt_tokens: 5, completion_tokens: content.split(' ').length, total_tokens: 5 + content.split(' ').length });
    // The request id is the job's: it reads back COMPLETED with the same output.
    expect(completion._request_id).toMatch(/^sync-/);
    expect(await jobStatus(completion._request_id!)).toMatchObject({ status: 'COMPLETED', output: { id: completion.id } });
  });

  it('streams a chat completion token by token, the first token before the job ends', async () => {
    const expected = (await client().chat.completions.create({ model: MODEL, messages, max_tokens: 12 })).choices[0]!.message.content!;
    writeFileSync(holdFile, '');
    const { data: stream, request_id: jobId } = await client()
      .chat.completions.create({ model: MODEL, messages, max_tokens: 12, stream: true, stream_options: { include_usage: true } })
      .withResponse();
    const order: string[] = [];
    const tokens: string[] = [];
    let usage: OpenAI.CompletionUsage | undefined;
    for await (const chunk of stream) {
      const token = chunk.choices[0]?.delta.content;
      if (token) tokens.push(token);
      if (chunk.usage) usage = chunk.usage;
      if (tokens.length === 1 && token) {
        // The worker holds before the second word: the job is still running when the first arrives.
        order.push('first token', (await jobStatus(jobId!)).status);
        rmSync(holdFile);
      }
    }
    order.push('stream ended', (await jobStatus(jobId!)).status);
    expect(order).toEqual(['first token', 'IN_PROGRESS', 'stream ended', 'COMPLETED']);
    expect(tokens.join('')).toBe(expected);
    expect(tokens.length).toBeGreaterThan(1);
    expect(usage).toEqual({ prompt_tokens: 5, completion_tokens: tokens.length, total_tokens: 5 + tokens.length });
  });

  it('answers a completion, plain and streamed (object chunks; the gateway adds [DONE])', async () => {
    const plain = await client().completions.create({ model: MODEL, prompt: 'Once upon a time', max_tokens: 8 });
    expect(plain.object).toBe('text_completion');
    const text = plain.choices[0]!.text;
    expect(plain.usage?.completion_tokens).toBe(text.split(' ').length);
    let streamed = '';
    for await (const chunk of await client().completions.create({ model: MODEL, prompt: 'Once upon a time', max_tokens: 8, stream: true })) {
      streamed += chunk.choices[0]?.text ?? '';
    }
    expect(streamed).toBe(text);
  });

  it('relays an error from the worker in OpenAI error shape, with its status', async () => {
    const notFound = await client().chat.completions.create({ model: 'no-such-model', messages }).catch((e: unknown) => e);
    expect(notFound).toBeInstanceOf(OpenAI.NotFoundError);
    expect((notFound as InstanceType<typeof OpenAI.NotFoundError>).error).toMatchObject({ message: 'The model `no-such-model` does not exist.', type: 'NotFoundError' });

    // A handler that throws: 500 with its message; x-should-retry: false keeps the client from running it again.
    const failing = [{ role: 'user' as const, content: 'please [toy:fail] now' }];
    const failed = await client({ maxRetries: 2 }).chat.completions.create({ model: MODEL, messages: failing }).catch((e: unknown) => e);
    expect(failed).toBeInstanceOf(OpenAI.InternalServerError);
    const error = failed as InstanceType<typeof OpenAI.InternalServerError>;
    expect(error.error).toMatchObject({ type: 'server_error', code: 'worker_error', message: expect.stringContaining('asked to fail') });
    expect(await jobStatus(error.requestID!)).toMatchObject({ status: 'FAILED' });
    const jobs = (await call(t.url, 'GET', `/v2/${endpointId}/requests`, { key: runKey })).json.requests as { status: string }[];
    expect(jobs.filter((j) => j.status === 'FAILED')).toHaveLength(1);

    // The same failure with stream: true, before any token: still an HTTP error.
    const streamFailed = await client().chat.completions.create({ model: MODEL, messages: failing, stream: true }).catch((e: unknown) => e);
    expect(streamFailed).toBeInstanceOf(OpenAI.InternalServerError);
  });

  it('refuses bad input before any job exists, in OpenAI error shape', async () => {
    const r = await call(t.url, 'POST', `/v2/${endpointId}/openai/v1/chat/completions`, { key: runKey, body: { model: MODEL, messages: 'hello' } });
    expect(r.status).toBe(400);
    expect(r.json).toEqual({ error: { message: 'Invalid parameter: messages must be a non-empty array', type: 'invalid_request_error', param: 'messages', code: 'invalid_parameter' } });
    const unauthorized = await call(t.url, 'GET', `/v2/${endpointId}/openai/v1/models`, { key: 'not-a-key' });
    expect(unauthorized.status).toBe(401);
    expect(unauthorized.json).toMatchObject({ error: { type: 'authentication_error', code: 'unauthorized' } });
    const wrongMethod = await call(t.url, 'GET', `/v2/${endpointId}/openai/v1/chat/completions`, { key: runKey });
    expect(wrongMethod.status).toBe(405);
    expect(wrongMethod.headers.get('allow')).toBe('POST');
  });

  it('cancels the job when the client aborts mid-stream, and the worker is told through job-stop', async () => {
    writeFileSync(holdFile, '');
    const { data: stream, request_id: jobId } = await client().chat.completions.create({ model: MODEL, messages, max_tokens: 64, stream: true }).withResponse();
    for await (const chunk of stream) {
      if (chunk.choices[0]?.delta.content) break; // leaving the loop aborts the request
    }
    await worker.waitForLog((line) => line.jobId === jobId && line.msg === 'server stopped the job (cancelled or timed out)', 'the job-stop of the aborted job');
    expect(await jobStatus(jobId!)).toMatchObject({ status: 'CANCELLED' });
    expect(worker.logs.some((line) => line.jobId === jobId && line.msg === 'job finished')).toBe(false);
  });
});

describe('OpenAI routes under the rate limits (2000 per 10 s, 400 concurrent)', () => {
  let limited: TestGantry;
  let limitedWorker: WorkerProcess;
  let ep: string;
  // Stopped while a test spends a rate-limit window, so the window cannot roll over under it.
  let frozenAt: number | null = null;
  const clock: Clock = { now: () => frozenAt ?? Date.now(), after: systemClock.after };
  beforeAll(async () => {
    limited = await startTestGantry({ rateLimits: true }, { clock });
    ep = uniqueId('llm-limited');
    await limited.createEndpoint(ep);
    limitedWorker = spawnWorker(TOY_WORKER, { ...limited.workerEnv(ep), LLM_TOY_HOLD_FILE: holdFile });
    runKey = await limited.admin.createKey({ name: 'openai limits', scopes: ['run', 'read'] });
  });
  afterAll(async () => {
    await limitedWorker?.stop();
    await limited?.close();
  });

  // One key holds every slot the tests fill: limits are shared between keys (keyShare), so the
  // slots taken below are that key's, as its own requests' are.
  let runKey: { id: string; key: string };
  const limitedClient = (): OpenAI => new OpenAI({ apiKey: runKey.key, baseURL: `${limited.url}/v2/${ep}/openai/v1`, maxRetries: 0 });

  it('counts open streams among the concurrent requests and answers 429 in OpenAI error shape', async () => {
    const limiter = limited.gantry.gateway.http.rateLimiter;
    // 399 requests of this endpoint in flight elsewhere; an open stream takes the last slot.
    const others = Array.from({ length: 399 }, () => limiter.enter(ep, 'openai', { keyId: runKey.id }));
    writeFileSync(holdFile, '');
    const stream = await limitedClient().chat.completions.create({ model: MODEL, messages, stream: true });
    const iterator = stream[Symbol.asyncIterator]();
    await iterator.next();
    const refused = await limitedClient().models.list().catch((e: unknown) => e);
    expect(refused).toBeInstanceOf(OpenAI.RateLimitError);
    const error = refused as InstanceType<typeof OpenAI.RateLimitError>;
    expect(error.error).toMatchObject({ type: 'rate_limit_error', code: 'too_many_concurrent' });
    expect(error.headers.get('retry-after')).toBe('1');
    // The stream ends: its slot is free again.
    rmSync(holdFile);
    while (!(await iterator.next()).done);
    for (const leave of others) leave();
    expect((await limitedClient().models.list()).data).toHaveLength(1);
  });

  it('answers 429 once the window of 2000 requests is spent', async () => {
    const limiter = limited.gantry.gateway.http.rateLimiter;
    frozenAt = Date.now() + 20_000; // a window of its own, which cannot end during the test
    try {
      let spent = 0;
      while (spent < 2000) {
        limiter.enter(ep, 'openai', { keyId: runKey.id })();
        spent++;
      }
      const refused = await limitedClient().chat.completions.create({ model: MODEL, messages }).catch((e: unknown) => e);
      expect(refused).toBeInstanceOf(OpenAI.RateLimitError);
      const error = refused as InstanceType<typeof OpenAI.RateLimitError>;
      expect(error.error).toMatchObject({ type: 'rate_limit_error', code: 'rate_limited', message: expect.stringContaining('2000 openai requests per 10 s') });
      expect(Number(error.headers.get('retry-after'))).toBeGreaterThan(0);
    } finally {
      frozenAt = null;
    }
  });
});
