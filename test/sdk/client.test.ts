// The typed client (`gantry/client`, src/sdk/client.ts) against a real gateway with real
// worker processes: every method, the errors it throws, and its retries of 429.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createClient, GantryApiError, type GantryClient } from '../../src/sdk/client.js';
import type { Clock } from '../../src/util/clock.js';
import { startTestGantry, type TestGantry } from '../helpers/gantry.js';
import { uniqueId } from '../http/http-helpers.js';
import { startWorkerProcess, type WorkerProcess } from './worker-process.js';

/** The gateway's clock: real time plus an offset the test moves (the rate-limit windows follow it). */
let offset = 0;
const clock: Clock = {
  now: () => Date.now() + offset,
  after(ms, fn) {
    const timer = setTimeout(fn, ms);
    timer.unref();
    return () => clearTimeout(timer);
  },
};

let t: TestGantry;
let client: GantryClient;
let runKey: string;
const echo = uniqueId('c-echo');
const words = uniqueId('c-words');
const workers: WorkerProcess[] = [];

beforeAll(async () => {
  t = await startTestGantry({ rateLimits: true, jobTakeWaitMs: 500 }, { clock });
  await t.createEndpoint(echo);
  await t.createEndpoint(words);
  runKey = await t.createKey(['run']);
  client = createClient({ url: t.url, apiKey: runKey });
  workers.push(startWorkerProcess('echo-worker', t.workerEnv(echo)), startWorkerProcess('stream-worker', t.workerEnv(words)));
});

afterAll(async () => {
  await Promise.all(workers.map((w) => w.stop()));
  await t?.close();
});

describe('gantry/client', () => {
  it('runSync returns the finished job with its output', async () => {
    const job = await client.runSync<{ hello: string }>(echo, { input: { hello: 'world' } }, { timeoutMs: 20_000 });
    expect(job).toMatchObject({ status: 'COMPLETED', output: { hello: 'world' }, retries: 0 });
    expect(job.id).toMatch(/^sync-/);
    expect(typeof job.executionTime).toBe('number');
  });

  it('run, then status and wait until it ends', async () => {
    const ref = await client.run(echo, { input: { n: 1, delayMs: 200 } });
    expect(ref.status).toBe('IN_QUEUE');
    expect((await client.status(echo, ref.id)).id).toBe(ref.id);
    const done = await client.wait(echo, ref.id, { timeoutMs: 20_000 });
    expect(done).toMatchObject({ id: ref.id, status: 'COMPLETED', output: { n: 1, delayMs: 200 } });
  });

  it('runSync keeps waiting past one server wait (status-sync) until the job ends', async () => {
    // Each call asks the server to hold it 1 s; the job takes longer, so runsync answers IN_PROGRESS
    // (or IN_QUEUE) and the client follows with status-sync calls.
    const calls: string[] = [];
    const watched: typeof fetch = (input, init) => {
      calls.push(new URL(String(input)).pathname.split('/')[3] ?? '');
      return fetch(input, init);
    };
    const patient = createClient({ url: t.url, apiKey: runKey, longPollMs: 1_000, fetch: watched });
    const job = await patient.runSync(echo, { input: { delayMs: 1_500 } }, { timeoutMs: 20_000 });
    expect(job.status).toBe('COMPLETED');
    expect(calls[0]).toBe('runsync');
    expect(calls.slice(1).length).toBeGreaterThanOrEqual(1);
    expect(new Set(calls.slice(1))).toEqual(new Set(['status-sync']));
  });

  it('sends a traceparent with each submit only (the call\'s own first, then the hook\'s), and none when the hook throws', async () => {
    const sent: [string, string | null][] = [];
    const watched: typeof fetch = (input, init) => {
      sent.push([new URL(String(input)).pathname.split('/')[3] ?? '', new Headers(init?.headers).get('traceparent')]);
      return fetch(input, init);
    };
    const hooked = `00-${'1'.repeat(32)}-${'2'.repeat(16)}-01`;
    const own = `00-${'3'.repeat(32)}-${'4'.repeat(16)}-01`;
    const traced = createClient({ url: t.url, apiKey: runKey, fetch: watched, traceparent: () => hooked });
    const ref = await traced.run(echo, { input: { n: 7 } });
    await traced.status(echo, ref.id);
    await traced.runSync(echo, { input: { n: 8 } }, { timeoutMs: 20_000, traceparent: own });
    expect(sent).toEqual([['run', hooked], ['status', null], ['runsync', own]]);
    const failing = createClient({ url: t.url, apiKey: runKey, fetch: watched, traceparent: () => { throw new Error('no active span'); } });
    sent.length = 0;
    expect((await failing.run(echo, { input: { n: 9 } })).status).toBe('IN_QUEUE');
    expect(sent).toEqual([['run', null]]);
  });

  it('stream yields each chunk as the worker streams it, and ends with the job', async () => {
    const ref = await client.run(words, { input: { text: 'one two three four', delayMs: 50 } });
    const chunks: string[] = [];
    for await (const chunk of client.stream<string>(words, ref.id)) chunks.push(chunk);
    expect(chunks).toEqual(['one', 'two', 'three', 'four']);
    expect((await client.status(words, ref.id)).status).toBe('COMPLETED');
  });

  it('cancel and retry', async () => {
    const long = await client.run(echo, { input: { delayMs: 60_000 } });
    expect(await client.cancel(echo, long.id)).toEqual({ id: long.id, status: 'CANCELLED' });
    const failed = await client.runSync(echo, { input: { fail: 'boom' } }, { timeoutMs: 20_000 });
    expect(failed).toMatchObject({ status: 'FAILED', error: expect.stringContaining('boom') as string });
    expect(await client.retry(echo, failed.id)).toEqual({ id: failed.id, status: 'IN_QUEUE' });
    expect((await client.wait(echo, failed.id, { timeoutMs: 20_000 })).retries).toBe(1);
  });

  it('purgeQueue and health', async () => {
    const idle = uniqueId('c-idle');
    await t.createEndpoint(idle);
    await client.run(idle, { input: {} });
    await client.run(idle, { input: {} });
    expect((await client.health(idle)).jobs.inQueue).toBe(2);
    expect(await client.purgeQueue(idle)).toEqual({ removed: 2 });
    const health = await client.health(idle);
    expect(health.jobs).toMatchObject({ inQueue: 0, cancelled: 2 });
    expect(health.workers).toMatchObject({ idle: 0, running: 0 });
  });

  it('throws GantryApiError with the code and field the server names, never the key', async () => {
    const error = await client.run(echo, { input: {}, policy: { ttl: 5 } }).catch((err: unknown) => err);
    expect(error).toBeInstanceOf(GantryApiError);
    expect(error).toMatchObject({ status: 400, code: 'INVALID_PARAMETER', field: 'policy.ttl' });
    const missing = await client.status(echo, 'no-such-job').catch((err: unknown) => err);
    expect(missing).toMatchObject({ status: 404, code: 'JOB_NOT_FOUND' });
    const wrongKey = await createClient({ url: t.url, apiKey: 'not-a-key' }).health(echo).catch((err: unknown) => err);
    expect(wrongKey).toMatchObject({ status: 401, code: 'UNAUTHORIZED' });
    expect(String((wrongKey as Error).message)).not.toContain('not-a-key');
    const unreachable = await createClient({ url: 'http://127.0.0.1:9', apiKey: runKey }).health(echo).catch((err: unknown) => err);
    expect(unreachable).toMatchObject({ status: 0, code: 'UNREACHABLE' });
    expect(String((unreachable as Error).message)).not.toContain(runKey);
  });

  it('sends a 429 again after the Retry-After the server gave', async () => {
    const limited = uniqueId('c-limited');
    await t.createEndpoint(limited);
    // purge-queue allows 2 calls per 10 s window.
    const noRetry = createClient({ url: t.url, apiKey: runKey, maxRetries: 0 });
    await noRetry.purgeQueue(limited);
    await noRetry.purgeQueue(limited);
    const refused = await noRetry.purgeQueue(limited).catch((err: unknown) => err);
    expect(refused).toMatchObject({ status: 429, code: 'RATE_LIMITED' });
    const retryAfter = (refused as GantryApiError).retryAfter ?? 0;
    expect(retryAfter).toBeGreaterThanOrEqual(1);

    // The retrying client: when the gateway answers 429, its clock is moved past the window, so the
    // repeat is admitted. The client must have waited what Retry-After said (capped at 1 s here).
    const attempts: { at: number; status: number }[] = [];
    const watched: typeof fetch = async (input, init) => {
      const response = await fetch(input, init);
      attempts.push({ at: performance.now(), status: response.status });
      if (response.status === 429) offset += 10_000;
      return response;
    };
    const retrying = createClient({ url: t.url, apiKey: runKey, fetch: watched, maxRetryDelayMs: 1_000 });
    expect(await retrying.purgeQueue(limited)).toEqual({ removed: 0 });
    expect(attempts.map((a) => a.status)).toEqual([429, 200]);
    expect(attempts[1]!.at - attempts[0]!.at).toBeGreaterThanOrEqual(Math.min(1_000, retryAfter * 1000) - 5);
  });

  it('an AbortSignal cancels a waiting call', async () => {
    const long = await client.run(echo, { input: { delayMs: 60_000 } });
    const controller = new AbortController();
    const waiting = client.wait(echo, long.id, { timeoutMs: 60_000, signal: controller.signal }).catch((err: unknown) => err);
    controller.abort(new Error('no longer needed'));
    expect(await waiting).toMatchObject({ message: 'no longer needed' });
    await client.cancel(echo, long.id);
  });
});
