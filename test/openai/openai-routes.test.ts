/**
 * The OpenAI routes on the wire, against a real gateway, with the worker simulated over HTTP
 * (runpod-python's requests) so each test decides exactly what the worker sends: the job input
 * a worker sees, vLLM's chunk shapes (raw SSE text, lists, error objects), and the answers for
 * every way a job can end.
 */
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { createOffsetClock } from '../helpers/clock.js';
import { startTestGantry, type TestGantry } from '../helpers/gantry.js';
import { call, uniqueId, workerFor, type Json, type Worker } from '../http/http-helpers.js';

let t: TestGantry;
let runKey: string;
let workerKey: string;
const clock = createOffsetClock();

beforeAll(async () => {
  t = await startTestGantry({ jobTakeWaitMs: 300 }, { clock });
  runKey = await t.createKey(['run']);
  workerKey = await t.createKey(['worker']);
});
afterAll(async () => {
  await t?.close();
});

async function setup(settings: Record<string, unknown> = {}): Promise<{ id: string; w: Worker }> {
  const id = uniqueId('oai');
  await t.createEndpoint(id, settings);
  return { id, w: workerFor(t, id, workerKey) };
}

/** Sends an OpenAI request without waiting for the answer (the worker side runs meanwhile). */
function post(endpointId: string, route: string, body: unknown): Promise<Response> {
  return fetch(`${t.url}/v2/${endpointId}/openai/v1/${route}`, {
    method: 'POST',
    headers: { authorization: `Bearer ${runKey}`, 'content-type': 'application/json' },
    body: JSON.stringify(body),
  });
}

const chat = { model: 'm', messages: [{ role: 'user', content: 'hi' }] };

describe('OpenAI routes', () => {
  it('hands the worker {openai_route, openai_input} and answers with the one element of a one-element output', async () => {
    const { id, w } = await setup();
    const answer = post(id, 'chat/completions', { ...chat, temperature: 0.5 });
    const job = await w.takeJob();
    expect(job.input).toEqual({ openai_route: '/v1/chat/completions', openai_input: { ...chat, temperature: 0.5 } });
    expect(job.id).toMatch(/^sync-/);
    await w.done(job.id as string, { output: [{ object: 'chat.completion', choices: [] }] });
    const res = await answer;
    expect(res.status).toBe(200);
    expect(res.headers.get('x-request-id')).toBe(job.id);
    expect(await res.json()).toEqual({ object: 'chat.completion', choices: [] });
  });

  it('passes other POST routes through, and reads the model list with GET', async () => {
    const { id, w } = await setup();
    const embeddings = post(id, 'embeddings', { model: 'm', input: 'x' });
    const job = await w.takeJob();
    expect(job.input).toEqual({ openai_route: '/v1/embeddings', openai_input: { model: 'm', input: 'x' } });
    await w.done(job.id as string, { output: { object: 'list', data: [{ embedding: [0.5] }] } });
    expect(await (await embeddings).json()).toEqual({ object: 'list', data: [{ embedding: [0.5] }] });
    const models = call(t.url, 'GET', `/v2/${id}/openai/v1/models`, { key: runKey });
    const modelsJob = await w.takeJob();
    expect(modelsJob.input).toEqual({ openai_route: '/v1/models', openai_input: null });
    await w.done(modelsJob.id as string, { output: { object: 'list', data: [] } });
    expect((await models).json).toEqual({ object: 'list', data: [] });
  });

  it('streams vLLM raw SSE text as it is, object and list chunks as events, and ends with one [DONE]', async () => {
    const { id, w } = await setup();
    const res = post(id, 'chat/completions', { ...chat, stream: true });
    const job = await w.takeJob();
    await w.streamChunk(job.id as string, 'data: {"n":1}\n\ndata: {"n":2}\n\n');
    await w.streamChunk(job.id as string, { n: 3 });
    await w.streamChunk(job.id as string, [{ n: 4 }, 'data: {"n":5}\n\n']);
    await w.done(job.id as string, { output: [] });
    const answer = await res;
    expect(answer.headers.get('content-type')).toBe('text/event-stream; charset=utf-8');
    expect(await answer.text()).toBe('data: {"n":1}\n\ndata: {"n":2}\n\ndata: {"n":3}\n\ndata: {"n":4}\n\ndata: {"n":5}\n\ndata: [DONE]\n\n');

    // A worker that sends [DONE] itself gets no second one.
    const again = post(id, 'completions', { model: 'm', prompt: 'p', stream: true });
    const second = await w.takeJob();
    await w.streamChunk(second.id as string, 'data: {"n":1}\n\ndata: [DONE]\n\n');
    await w.done(second.id as string, { output: [] });
    expect(await (await again).text()).toBe('data: {"n":1}\n\ndata: [DONE]\n\n');
  });

  it('turns a worker error into an HTTP error before the first byte, and into an error event after it', async () => {
    const { id, w } = await setup();
    const early = post(id, 'chat/completions', { ...chat, stream: true });
    const job = await w.takeJob();
    await w.streamChunk(job.id as string, { object: 'error', message: 'bad sampling params', type: 'BadRequestError', param: 'top_p', code: 400 });
    const res = await early;
    expect(res.status).toBe(400);
    expect(await res.json()).toEqual({ error: { message: 'bad sampling params', type: 'BadRequestError', param: 'top_p', code: 'worker_error' } });
    // The answer is given: the job is cancelled and its worker told.
    expect((await w.stop()).json).toEqual({ jobsToStop: [job.id] });

    const late = post(id, 'chat/completions', { ...chat, stream: true });
    const second = await w.takeJob();
    await w.streamChunk(second.id as string, { n: 1 });
    await w.done(second.id as string, { error: 'CUDA out of memory' });
    expect(await (await late).text()).toBe(
      'data: {"n":1}\n\ndata: {"error":{"message":"CUDA out of memory","type":"server_error","param":null,"code":"worker_error"}}\n\ndata: [DONE]\n\n',
    );
  });

  it('answers a streamed request of a worker that does not stream with its output', async () => {
    const { id, w } = await setup();
    const res = post(id, 'chat/completions', { ...chat, stream: true });
    const job = await w.takeJob();
    await w.done(job.id as string, { output: ['data: {"n":1}\n\n', { n: 2 }] });
    expect(await (await res).text()).toBe('data: {"n":1}\n\ndata: {"n":2}\n\ndata: [DONE]\n\n');
  });

  it('says why a finished job has no answer: empty output, timeout, cancellation', async () => {
    const { id, w } = await setup();
    const empty = post(id, 'completions', { model: 'm', prompt: 'p' });
    await w.done((await w.takeJob()).id as string, { output: [] });
    const emptyRes = await empty;
    expect(emptyRes.status).toBe(502);
    // The job ran: the official clients (which retry 5xx by themselves) must not run it again.
    expect(emptyRes.headers.get('x-should-retry')).toBe('false');
    expect(await emptyRes.json()).toMatchObject({ error: { type: 'server_error', code: 'empty_output' } });

    const cancelled = post(id, 'completions', { model: 'm', prompt: 'p' });
    const job = await w.takeJob();
    expect((await call(t.url, 'POST', `/v2/${id}/cancel/${job.id as string}`, { key: runKey })).status).toBe(200);
    const cancelledRes = await cancelled;
    expect(cancelledRes.status).toBe(409);
    expect(cancelledRes.headers.get('x-should-retry')).toBe('false');
    expect(await cancelledRes.json()).toMatchObject({ error: { code: 'job_cancelled' } });
  });

  it('tells the clients not to retry every 5xx answered once a job exists: a wait past the limits, a fault', async () => {
    const { id, w } = await setup();
    const jobs = t.gantry.gateway.jobs;
    // The wait reaching the job's limits (ttl + executionTimeout + margin) with the job still live.
    const wait = vi.spyOn(jobs, 'waitTerminal').mockImplementationOnce(async (endpointId, jobId) => (await jobs.status(endpointId, jobId, null))!);
    try {
      const unfinished = await post(id, 'completions', { model: 'm', prompt: 'p' });
      expect(unfinished.status).toBe(504);
      expect(unfinished.headers.get('x-should-retry')).toBe('false');
      expect(await unfinished.json()).toMatchObject({ error: { type: 'server_error', code: 'job_not_finished' } });
      // A fault after the job was created: 500 INTERNAL, no internals shown.
      wait.mockRejectedValueOnce(new Error('store connection lost'));
      const fault = await post(id, 'completions', { model: 'm', prompt: 'p' });
      expect(fault.status).toBe(500);
      expect(fault.headers.get('x-should-retry')).toBe('false');
      expect(await fault.json()).toEqual({ error: { message: 'Internal server error', type: 'server_error', param: null, code: 'internal' } });
    } finally {
      wait.mockRestore();
    }
    // Both jobs were cancelled (nobody reads their answers): the worker finds none.
    expect((await w.take()).status).toBe(204);
  });

  it('refuses what is not an OpenAI route or not a JSON object', async () => {
    const { id } = await setup();
    const notFound = await call(t.url, 'POST', `/v2/${id}/openai/v2/chat`, { key: runKey, body: chat });
    expect(notFound.status).toBe(404);
    expect(notFound.json).toMatchObject({ error: { type: 'invalid_request_error', code: 'not_found' } });
    const notObject = await call(t.url, 'POST', `/v2/${id}/openai/v1/completions`, { key: runKey, body: [1, 2] });
    expect(notObject.status).toBe(400);
    expect(notObject.json).toMatchObject({ error: { code: 'invalid_body' } });
    const badStream = await call(t.url, 'POST', `/v2/${id}/openai/v1/completions`, { key: runKey, body: { prompt: 'p', stream: 'yes' } });
    expect(badStream.json).toMatchObject({ error: { param: 'stream', code: 'invalid_parameter' } });
    const noEndpoint = await call(t.url, 'GET', `/v2/no-such-endpoint/openai/v1/models`, { key: t.adminKey });
    expect(noEndpoint.status).toBe(404);
    expect(noEndpoint.json).toMatchObject({ error: { code: 'endpoint_not_found' } });
    const readOnly = await t.createKey(['read']);
    const scope = await call(t.url, 'GET', `/v2/${id}/openai/v1/models`, { key: readOnly });
    expect(scope.status).toBe(401);
  });

  it('ends a job past its execution timeout with 504', async () => {
    const { id, w } = await setup({ executionTimeoutMs: 6_000 });
    const res = post(id, 'completions', { model: 'm', prompt: 'p' });
    const job = await w.takeJob();
    // What the reaper does once the timeout has passed, with the clock moved instead of waiting.
    const timedOut = await clock.ahead(10_000, () => t.gantry.gateway.transitions.timeOutRunning(100));
    expect(timedOut.map((j) => j.id)).toContain(job.id);
    const answer = await res;
    expect(answer.status).toBe(504);
    expect(await answer.json()).toMatchObject({ error: { code: 'job_timed_out', type: 'server_error' } });
    expect((job.input as Json).openai_route).toBe('/v1/completions');
  });
});
