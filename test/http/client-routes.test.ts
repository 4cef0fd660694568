// The client routes of the v2 job API (RunPod's spec as docs/api.md states it), against a
// real gateway. Workers are simulated by the test speaking the worker protocol over HTTP.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { eventually, parkedJobCalls, startTestGantry, type TestGantry } from '../helpers/gantry.js';
import { call, clientFor, isErrorBody, startReceiver, uniqueId, UUID, workerFor, type Client, type Json, type Worker } from './http-helpers.js';
import { createOffsetClock } from '../helpers/clock.js';

let t: TestGantry;
let runKey: string;
let workerKey: string;
/**
 * `t`'s clock. A test that needs time to pass (a retention, an execution time) moves it ahead
 * for one call instead of sleeping; by less than workerLostMs (30 s), so a background reaper
 * pass that falls inside that call loses no worker.
 */
const mainClock = createOffsetClock();

beforeAll(async () => {
  t = await startTestGantry({ jobTakeWaitMs: 1_000, webhookRetryMs: 50, outboundAllow: ['127.0.0.1'] }, { clock: mainClock });
  runKey = await t.createKey(['run']);
  workerKey = await t.createKey(['worker']);
});

afterAll(async () => {
  await t?.close();
});

/** A fresh endpoint with a client (run key) and a simulated worker. */
async function fresh(settings: Record<string, unknown> = {}, g: TestGantry = t, keys = { run: runKey, worker: workerKey }): Promise<{ ep: string; c: Client; w: Worker }> {
  const ep = uniqueId('cr');
  await g.createEndpoint(ep, settings);
  return { ep, c: clientFor(g, ep, keys.run), w: workerFor(g, ep, keys.worker) };
}

/** Submits a job, has the worker take it and post `result` to job-done; returns the id. */
async function finished(c: Client, w: Worker, result: Json, body: unknown = { input: { n: 1 } }): Promise<string> {
  const id = await c.submit(body);
  const job = await w.takeJob();
  expect(job.id).toBe(id);
  const r = await w.done(id, result);
  expect(r.status).toBe(200);
  return id;
}

function keysOf(json: Json): string[] {
  return Object.keys(json).sort();
}

describe('run and runsync', () => {
  it('run answers {id, status: IN_QUEUE} at once with a UUID id', async () => {
    const { c } = await fresh();
    const r = await c.run({ input: { prompt: 'hi' } });
    expect(r.status).toBe(200);
    expect(keysOf(r.json)).toEqual(['id', 'status']);
    expect(r.json.status).toBe('IN_QUEUE');
    expect(r.json.id).toMatch(UUID);
    const second = await c.run({ input: { prompt: 'hi' } });
    expect(second.json.id).not.toBe(r.json.id);
  });

  it('runsync with a worker answering returns the full job: sync- id, delayTime/executionTime in ms, output', async () => {
    const { c, w } = await fresh();
    const pending = c.runsync({ input: { x: 2 } });
    const job = await w.takeJob();
    expect(job.id).toMatch(/^sync-/);
    expect(job.input).toEqual({ x: 2 });
    // The result arrives 5 s later on the gateway's clock: executionTime must say 5000-odd (ms), not 5 (s).
    expect((await mainClock.ahead(5_000, () => w.done(job.id as string, { output: { doubled: 4 } }))).status).toBe(200);
    const r = await pending;
    expect(r.status).toBe(200);
    expect(r.json.id).toBe(job.id);
    expect(r.json.id).toMatch(/^sync-[0-9a-f-]{36}$/);
    expect(r.json.status).toBe('COMPLETED');
    expect(r.json.output).toEqual({ doubled: 4 });
    expect(typeof r.json.delayTime).toBe('number');
    expect(typeof r.json.executionTime).toBe('number');
    expect(Number.isInteger(r.json.delayTime)).toBe(true);
    expect(r.json.executionTime as number).toBeGreaterThanOrEqual(5_000); // milliseconds, not seconds
    expect(r.json.executionTime as number).toBeLessThan(60_000);
  });

  it('runsync ?wait=1000 with no worker answers {id, status} only, after about 1 s', async () => {
    const { c } = await fresh();
    const r = await c.runsync({ input: { x: 1 } }, '?wait=1000');
    expect(r.status).toBe(200);
    expect(keysOf(r.json)).toEqual(['id', 'status']);
    expect(r.json.status).toBe('IN_QUEUE');
    expect(r.json.id).toMatch(/^sync-/);
    expect(r.ms).toBeGreaterThanOrEqual(950);
    // The job is still there for the client to poll.
    expect((await c.status(r.json.id as string)).json.status).toBe('IN_QUEUE');
  });
});

describe('runsync and cancel', () => {
  it('a runsync waiting on a job that is cancelled answers the CANCELLED job at once', async () => {
    const { c } = await fresh();
    const pending = c.runsync({ input: {} }, '?wait=20000');
    const id = await eventually(async () => ((await c.requests()).json.requests as Json[])[0]?.id as string | undefined, 3_000, 'the sync job');
    expect((await c.cancel(id)).status).toBe(200);
    const r = await pending;
    expect(r.json).toMatchObject({ id, status: 'CANCELLED' });
    expect(r.ms).toBeLessThan(20_000); // woken by the cancel, not by the end of its wait

  });
});

describe('status', () => {
  it('shows input while queued and running, workerId once taken, output when completed, error when failed', async () => {
    const { c, w } = await fresh();
    const id = await c.submit({ input: { prompt: 'cat' } });

    const queued = (await c.status(id)).json;
    expect(queued).toMatchObject({ id, status: 'IN_QUEUE', input: { prompt: 'cat' } });
    expect(queued).not.toHaveProperty('output');
    expect(queued).not.toHaveProperty('error');
    expect(queued).not.toHaveProperty('workerId');

    await w.takeJob();
    const running = (await c.status(id)).json;
    expect(running).toMatchObject({ id, status: 'IN_PROGRESS', input: { prompt: 'cat' }, workerId: w.id });
    expect(typeof running.delayTime).toBe('number');
    expect(running).not.toHaveProperty('error');

    await w.done(id, { output: { image: 'abc' } });
    const done = (await c.status(id)).json;
    expect(done).toMatchObject({ id, status: 'COMPLETED', output: { image: 'abc' }, workerId: w.id });
    expect(typeof done.delayTime).toBe('number');
    expect(typeof done.executionTime).toBe('number');
    expect(done).not.toHaveProperty('input');
    expect(done).not.toHaveProperty('error');

    const failedId = await finished(c, w, { error: 'boom' });
    const failed = (await c.status(failedId)).json;
    expect(failed).toMatchObject({ id: failedId, status: 'FAILED', error: 'boom', workerId: w.id });
    expect(failed).not.toHaveProperty('output');
    expect(failed).not.toHaveProperty('input');
  });

  it('status?ttl= shortens retention: the job is gone after a reaper pass, others stay', async () => {
    const { c, w } = await fresh();
    const short = await finished(c, w, { output: 1 });
    const kept = await finished(c, w, { output: 2 });
    const r = await c.status(short, '?ttl=10000');
    expect(r.status).toBe(200);
    expect(r.json.status).toBe('COMPLETED');
    // A pass 11 s on: past the 10 s ttl, far inside the default 30 min of the other job.
    await mainClock.ahead(11_000, () => t.gantry.gateway.reaper.runOnce());
    const gone = await c.status(short);
    expect(gone.status).toBe(404);
    expect(gone.json).toMatchObject({ code: 'JOB_NOT_FOUND' });
    expect(isErrorBody(gone)).toBe(true);
    expect((await c.status(kept)).json).toMatchObject({ id: kept, status: 'COMPLETED', output: 2 });
  });

  it('status?ttl= given while queued applies once the job ends', async () => {
    const { c, w } = await fresh();
    const id = await c.submit();
    expect((await c.status(id, '?ttl=10000')).status).toBe(200);
    await w.takeJob();
    await w.done(id, { output: 'x' });
    await t.gantry.gateway.reaper.runOnce(); // at once: the job has just ended, the ttl runs from there
    expect((await c.status(id)).status).toBe(200);
    await mainClock.ahead(11_000, () => t.gantry.gateway.reaper.runOnce());
    expect((await c.status(id)).status).toBe(404);
  });

  it('status-sync long-polls until the job ends', async () => {
    const { c, w } = await fresh();
    const id = await c.submit();
    await w.takeJob();
    const pending = c.statusSync(id, '?wait=20000');
    await parkedJobCalls(t.gantry); // the long-poll is waiting on the running job
    expect((await w.done(id, { output: 'late' })).status).toBe(200);
    const r = await pending;
    expect(r.status).toBe(200);
    expect(r.json).toMatchObject({ id, status: 'COMPLETED', output: 'late' });
    expect(r.ms).toBeLessThan(20_000); // answered when the job ended, not when its wait ran out
  });

  it('status-sync ?wait=1000 on a queued job answers the job after about 1 s', async () => {
    const { c } = await fresh();
    const id = await c.submit();
    const r = await c.statusSync(id, '?wait=1000');
    expect(r.status).toBe(200);
    expect(r.json).toMatchObject({ id, status: 'IN_QUEUE' });
    expect(r.ms).toBeGreaterThanOrEqual(950);
  });
});

describe('stream', () => {
  it('drains chunks posted through job-stream; an empty poll is held for ?wait; a finished job answers at once', async () => {
    const { c, w } = await fresh();
    const id = await c.submit();
    await w.takeJob();
    expect((await w.streamChunk(id, 'a')).status).toBe(200);
    expect((await w.streamChunk(id, { token: 'b' })).status).toBe(200);

    const first = await c.stream(id);
    expect(first.status).toBe(200);
    expect(first.json.status).toBe('IN_PROGRESS');
    expect(first.json.stream).toEqual([{ output: 'a' }, { output: { token: 'b' } }]);

    const empty = await c.stream(id, '?wait=200');
    expect(empty.status).toBe(200);
    expect(empty.json.stream).toEqual([]);
    expect(empty.json.status).toBe('IN_PROGRESS');
    expect(empty.ms).toBeGreaterThanOrEqual(180);

    // A poll waiting when a chunk arrives returns with it.
    const waiting = c.stream(id, '?wait=20000');
    await parkedJobCalls(t.gantry);
    await w.streamChunk(id, 'c');
    const woke = await waiting;
    expect(woke.json.stream).toEqual([{ output: 'c' }]);
    expect(woke.ms).toBeLessThan(20_000); // woken by the chunk, not by the end of its wait

    await w.streamChunk(id, 'd');
    await w.done(id, { output: 'final' });
    const last = await c.stream(id, '?wait=5000');
    expect(last.json.status).toBe('COMPLETED');
    expect(last.json.stream).toEqual([{ output: 'd' }]);
    const after = await c.stream(id); // default wait is 10 s: a finished job must not be held
    expect(after.json).toMatchObject({ status: 'COMPLETED', stream: [] });
    expect(after.ms).toBeLessThan(10_000);
  });

  it('splits a 2.5 MB string chunk into pieces of at most 1 MB that concatenate to the original', async () => {
    const { c, w } = await fresh();
    const id = await c.submit();
    await w.takeJob();
    const unit = 'abcdefghij0123456789€😀"\\\n';
    const big = unit.repeat(Math.ceil(2_500_000 / Buffer.byteLength(unit)));
    expect(Buffer.byteLength(big)).toBeGreaterThanOrEqual(2_500_000);
    expect((await w.streamChunk(id, big)).status).toBe(200);
    await w.done(id, { output: 'end' });
    const pieces: unknown[] = [];
    for (let i = 0; i < 10; i++) {
      const r = await c.stream(id);
      expect(r.status).toBe(200);
      for (const item of r.json.stream as { output: unknown }[]) pieces.push(item.output);
      if ((r.json.stream as unknown[]).length === 0) break;
    }
    expect(pieces.length).toBeGreaterThan(2);
    for (const piece of pieces) {
      expect(typeof piece).toBe('string');
      expect(Buffer.byteLength(piece as string)).toBeLessThanOrEqual(1_000_000);
      expect(Buffer.byteLength(JSON.stringify(piece))).toBeLessThanOrEqual(1_000_000);
    }
    expect((pieces as string[]).join('')).toBe(big);
  });
});

describe('cancel', () => {
  it('cancels a queued job: CANCELLED, never handed to a worker', async () => {
    const { c, w } = await fresh();
    const id = await c.submit();
    const r = await c.cancel(id);
    expect(r.status).toBe(200);
    expect(r.json).toEqual({ id, status: 'CANCELLED' });
    expect((await c.status(id)).json).toMatchObject({ id, status: 'CANCELLED' });
    expect((await w.take()).status).toBe(204);
  });

  it('cancels a running job: the worker is told through job-stop, a late job-done is 2xx and changes nothing', async () => {
    const { c, w } = await fresh();
    const id = await c.submit();
    await w.takeJob();
    const stopPoll = w.stop();
    const r = await c.cancel(id);
    expect(r.status).toBe(200);
    expect(r.json).toEqual({ id, status: 'CANCELLED' });
    let stop = await stopPoll;
    if (stop.status === 204) stop = await w.stop(); // the long-poll ended before the cancel
    expect(stop.status).toBe(200);
    expect(stop.json).toEqual({ jobsToStop: [id] });

    const late = await w.done(id, { output: 'too late' });
    expect(late.status).toBeGreaterThanOrEqual(200);
    expect(late.status).toBeLessThan(300);
    const s = (await c.status(id)).json;
    expect(s.status).toBe('CANCELLED');
    expect(s).not.toHaveProperty('output');
  });

  it('cancel of a completed job is 409 JSON and leaves it COMPLETED', async () => {
    const { c, w } = await fresh();
    const id = await finished(c, w, { output: 'ok' });
    const r = await c.cancel(id);
    expect(r.status).toBe(409);
    expect(r.json).toMatchObject({ code: 'INVALID_STATE' });
    expect(isErrorBody(r)).toBe(true);
    expect((await c.status(id)).json).toMatchObject({ status: 'COMPLETED', output: 'ok' });
  });
});

describe('retry', () => {
  it('requeues a FAILED job with the same id and input; old error and output are gone', async () => {
    const { c, w } = await fresh();
    const id = await finished(c, w, { error: 'first try failed' }, { input: { v: 7 } });
    const r = await c.retry(id);
    expect(r.status).toBe(200);
    expect(r.json).toEqual({ id, status: 'IN_QUEUE' });
    const s = (await c.status(id)).json;
    expect(s).toMatchObject({ id, status: 'IN_QUEUE', input: { v: 7 } });
    expect(s).not.toHaveProperty('error');
    expect(s).not.toHaveProperty('output');
    const again = await w.takeJob();
    expect(again).toMatchObject({ id, input: { v: 7 } });
    await w.done(id, { output: 'second try' });
    expect((await c.status(id)).json).toMatchObject({ id, status: 'COMPLETED', output: 'second try' });
  });

  it('refuses COMPLETED, IN_PROGRESS and IN_QUEUE jobs with 409', async () => {
    const { c, w } = await fresh();
    const completed = await finished(c, w, { output: 1 });
    const r1 = await c.retry(completed);
    expect(r1.status).toBe(409);
    expect(r1.json).toMatchObject({ code: 'INVALID_STATE' });
    expect(isErrorBody(r1)).toBe(true);
    const running = await c.submit();
    await w.takeJob();
    const r2 = await c.retry(running);
    expect(r2.status).toBe(409);
    expect(r2.json).toMatchObject({ code: 'INVALID_STATE' });
    expect(isErrorBody(r2)).toBe(true);
    expect((await c.status(running)).json.status).toBe('IN_PROGRESS');
    const queued = await c.submit();
    expect((await c.retry(queued)).status).toBe(409);
  });

  it('refuses a job whose result has expired: 410 JOB_EXPIRED before the reaper, 404 JOB_NOT_FOUND after', async () => {
    const { c, w } = await fresh();
    const expiredNotReaped = await finished(c, w, { error: 'x' });
    const reaped = await finished(c, w, { error: 'y' });
    await c.status(expiredNotReaped, '?ttl=10000');
    await c.status(reaped, '?ttl=10000');
    // 11 s on, both are past their retention; only the reaper pass below deletes one. The
    // gateway's own reaper waits meanwhile: a pass of it inside the first call would delete both.
    await t.gantry.gateway.reaper.stop();
    try {
      const r1 = await mainClock.ahead(11_000, () => c.retry(expiredNotReaped));
      expect(r1.status).toBe(410);
      expect(r1.json).toMatchObject({ code: 'JOB_EXPIRED' });
      expect(isErrorBody(r1)).toBe(true);
      await mainClock.ahead(11_000, () => t.gantry.gateway.reaper.runOnce());
    } finally {
      t.gantry.gateway.reaper.start();
    }
    const r2 = await c.retry(reaped);
    expect(r2.status).toBe(404);
    expect(r2.json).toMatchObject({ code: 'JOB_NOT_FOUND' });
    expect(isErrorBody(r2)).toBe(true);
  });
});

describe('purge-queue, health, requests', () => {
  it('purge-queue cancels only queued jobs; a running one is untouched', async () => {
    const { c, w } = await fresh();
    const running = await c.submit();
    await w.takeJob();
    const q1 = await c.submit();
    const q2 = await c.submit();
    const r = await c.purge();
    expect(r.status).toBe(200);
    expect(r.json).toEqual({ removed: 2, status: 'completed' });
    expect((await c.status(q1)).json.status).toBe('CANCELLED');
    expect((await c.status(q2)).json.status).toBe('CANCELLED');
    expect((await c.status(running)).json.status).toBe('IN_PROGRESS');
    await w.done(running, { output: 'fine' });
    expect((await c.status(running)).json).toMatchObject({ status: 'COMPLETED', output: 'fine' });
    expect((await c.purge()).json).toEqual({ removed: 0, status: 'completed' });
  });

  it('health counts jobs by state and workers by activity', async () => {
    const { ep, c, w } = await fresh();
    await finished(c, w, { output: 'a' });
    await finished(c, w, { error: 'b' });
    const retried = await finished(c, w, { error: 'c' });
    expect((await c.retry(retried)).status).toBe(200);
    expect((await w.takeJob()).id).toBe(retried); // now running, held by w
    await c.submit();
    await c.submit();
    const idle = workerFor(t, ep, workerKey);
    expect((await idle.ping('?job_id=&runpod_version=1.12.0')).status).toBe(200);
    const sick = workerFor(t, ep, workerKey);
    expect((await sick.ping('?status=unhealthy&check=gpu&reason=oom')).status).toBe(200);

    const r = await c.health();
    expect(r.status).toBe(200);
    const jobs = r.json.jobs as Json;
    expect(jobs).toMatchObject({ completed: 1, failed: 1, inProgress: 1, inQueue: 2, retried: 1 });
    expect(keysOf(r.json.workers as Json)).toEqual(['idle', 'initializing', 'ready', 'running', 'throttled', 'unhealthy']);
    expect(r.json.workers).toMatchObject({ idle: 1, running: 1, unhealthy: 1, initializing: 0, throttled: 0 });
  });

  it('requests lists the endpoint\'s jobs newest first', async () => {
    const { c } = await fresh();
    const ids = [await c.submit(), await c.submit(), await c.submit()];
    const r = await c.requests();
    expect(r.status).toBe(200);
    const list = r.json.requests as Json[];
    expect(list.map((j) => j.id)).toEqual([...ids].reverse());
    expect(list[0]).toMatchObject({ id: ids[2], status: 'IN_QUEUE' });
  });
});

describe('request handling', () => {
  it('status, status-sync and stream answer both GET and POST', async () => {
    const { c, w } = await fresh();
    const id = await finished(c, w, { output: { v: 1 } });
    for (const op of ['status', 'status-sync', 'stream']) {
      for (const method of ['GET', 'POST']) {
        const r = await c.call(method, `${op}/${id}`);
        expect(r.status, `${method} ${op}`).toBe(200);
        expect(r.json.status, `${method} ${op}`).toBe('COMPLETED');
      }
    }
  });

  it('accepts POSTs with Content-Type application/json and an empty body (cancel, purge-queue, status)', async () => {
    const { c } = await fresh();
    const id = await c.submit();
    const opts = { body: '', contentType: 'application/json' };
    const s = await c.call('POST', `status/${id}`, opts);
    expect(s.status).toBe(200);
    expect(s.json.status).toBe('IN_QUEUE');
    const cancel = await c.call('POST', `cancel/${id}`, opts);
    expect(cancel.status).toBe(200);
    expect(cancel.json.status).toBe('CANCELLED');
    await c.submit();
    const purge = await c.call('POST', 'purge-queue', opts);
    expect(purge.status).toBe(200);
    expect(purge.json).toEqual({ removed: 1, status: 'completed' });
    // No body and no Content-Type at all works too.
    expect((await c.call('POST', 'purge-queue', { contentType: null })).status).toBe(200);
  });

  it('accepts both "Bearer KEY" and a raw "KEY"', async () => {
    const { ep } = await fresh();
    const bearer = await call(t.url, 'POST', `/v2/${ep}/run`, { key: runKey, body: { input: {} } });
    expect(bearer.status).toBe(200);
    const raw = await call(t.url, 'POST', `/v2/${ep}/run`, { key: runKey, rawAuth: true, body: { input: {} } });
    expect(raw.status).toBe(200);
    expect(raw.json.status).toBe('IN_QUEUE');
    const none = await call(t.url, 'POST', `/v2/${ep}/run`, { key: null, body: { input: {} } });
    expect(none.status).toBe(401);
    expect(isErrorBody(none)).toBe(true);
  });
});

describe('policy', () => {
  it('executionTimeout must be greater than 5000', async () => {
    const { c } = await fresh();
    const bad = await c.run({ input: {}, policy: { executionTimeout: 5000 } });
    expect(bad.status).toBe(400);
    expect(isErrorBody(bad)).toBe(true);
    expect(bad.json.error).toContain('executionTimeout');
    expect((await c.run({ input: {}, policy: { executionTimeout: 5001 } })).status).toBe(200);
  });

  it('ttl must be from 10000 to 604800000', async () => {
    const { c } = await fresh();
    for (const ttl of [9999, 604_800_001]) {
      const r = await c.run({ input: {}, policy: { ttl } });
      expect(r.status, `ttl ${ttl}`).toBe(400);
      expect(r.json.error).toContain('ttl');
    }
    for (const ttl of [10_000, 604_800_000]) expect((await c.run({ input: {}, policy: { ttl } })).status, `ttl ${ttl}`).toBe(200);
  });

  it('lowPriority must be a boolean; the policy reaches the worker', async () => {
    const { c, w } = await fresh();
    const bad = await c.run({ input: {}, policy: { lowPriority: 'yes' } });
    expect(bad.status).toBe(400);
    expect(bad.json.error).toContain('lowPriority');
    const id = await c.submit({ input: {}, policy: { lowPriority: true, executionTimeout: 5001, ttl: 20_000 } });
    const job = await w.takeJob();
    expect(job.id).toBe(id);
    expect(job.policy).toMatchObject({ lowPriority: true, executionTimeout: 5001, ttl: 20_000 });
  });
});

describe('timeouts (reaper)', () => {
  const clock = createOffsetClock();
  let g: TestGantry;
  let gRun: string;
  let gWorker: string;
  beforeAll(async () => {
    g = await startTestGantry({ jobTakeWaitMs: 1_000 }, { clock });
    gRun = await g.createKey(['run']);
    gWorker = await g.createKey(['worker']);
  });
  afterAll(async () => {
    await g?.close();
  });
  /** A reaper pass with the clock moved forward. */
  const reapAt = (aheadMs: number) => clock.ahead(aheadMs, () => g.gantry.gateway.reaper.runOnce());

  it('a running job past its executionTimeout ends TIMED_OUT; the worker is told; a late job-done changes nothing; it can be retried', async () => {
    const { c, w } = await fresh({}, g, { run: gRun, worker: gWorker });
    const id = await c.submit({ input: { slow: true }, policy: { executionTimeout: 5001 } });
    const other = await c.submit({ input: { slow: false } }); // default timeout: untouched
    await w.takeJob();
    const stopPoll = w.stop();
    await reapAt(6_000);
    let stop = await stopPoll;
    if (stop.status === 204) stop = await w.stop();
    expect(stop.json).toEqual({ jobsToStop: [id] });
    const s = (await c.status(id)).json;
    expect(s.status).toBe('TIMED_OUT');
    expect(s).not.toHaveProperty('output');
    const late = await w.done(id, { output: 'late' });
    expect(late.status).toBeGreaterThanOrEqual(200);
    expect(late.status).toBeLessThan(300);
    expect((await c.status(id)).json.status).toBe('TIMED_OUT');
    expect((await c.status(other)).json.status).toBe('IN_QUEUE');

    const retried = await c.retry(id);
    expect(retried.json).toEqual({ id, status: 'IN_QUEUE' });
  });

  it('a queued job past its policy ttl ends TIMED_OUT with error "ttl expired in queue"', async () => {
    const { c } = await fresh({}, g, { run: gRun, worker: gWorker });
    const id = await c.submit({ input: {}, policy: { ttl: 10_000 } });
    const other = await c.submit({ input: {} });
    await reapAt(10_500);
    expect((await c.status(id)).json).toMatchObject({ id, status: 'TIMED_OUT', error: 'ttl expired in queue' });
    expect((await c.status(other)).json.status).toBe('IN_QUEUE');
  });

  it('the background reaper times out a running job on the real clock (executionTimeout 5001)', async () => {
    const fast = await startTestGantry({ reaperIntervalMs: 50, jobTakeWaitMs: 500 });
    try {
      const keys = { run: await fast.createKey(['run']), worker: await fast.createKey(['worker']) };
      const { c, w } = await fresh({}, fast, keys);
      const id = await c.submit({ input: {}, policy: { executionTimeout: 5001 } });
      await w.takeJob();
      const started = Date.now();
      const s = await eventually(
        async () => {
          const r = (await c.status(id)).json;
          return r.status === 'IN_PROGRESS' ? undefined : r;
        },
        9_000,
        'TIMED_OUT',
      );
      expect(s.status).toBe('TIMED_OUT');
      expect(Date.now() - started).toBeGreaterThanOrEqual(4_500);
    } finally {
      await fast.close();
    }
  }, 15_000);

  // Moves the clock past every retention: a server of its own, so no other test's jobs are reaped.
  it('retention: a sync result is deleted 60 s after it ends, an async one after 30 min, one with a short policy.ttl too', async () => {
    const ownClock = createOffsetClock();
    const own = await startTestGantry({ jobTakeWaitMs: 1_000 }, { clock: ownClock });
    try {
      await retention(own, ownClock);
    } finally {
      await own.close();
    }
  });
});

async function retention(g: TestGantry, clock: ReturnType<typeof createOffsetClock>): Promise<void> {
  const reapAt = (aheadMs: number) => clock.ahead(aheadMs, () => g.gantry.gateway.reaper.runOnce());
  {
    const { c, w } = await fresh({}, g, { run: await g.createKey(['run']), worker: await g.createKey(['worker']) });
    const pending = c.runsync({ input: { s: 1 } });
    const syncJob = await w.takeJob();
    await w.done(syncJob.id as string, { output: 'sync' });
    expect((await pending).json.status).toBe('COMPLETED');
    const asyncId = await c.submit();
    await w.takeJob();
    await w.done(asyncId, { output: 'async' });
    const shortId = await c.submit({ input: {}, policy: { ttl: 10_000 } });
    await w.takeJob();
    await w.done(shortId, { output: 'short' });

    // policy.ttl bounds the wait in the queue, not the result's retention (docs/states.md).
    await reapAt(11_000);
    expect((await c.status(syncJob.id as string)).json.status).toBe('COMPLETED');
    expect((await c.status(shortId)).json).toMatchObject({ status: 'COMPLETED', output: 'short' });
    await reapAt(61_000);
    expect((await c.status(syncJob.id as string)).status).toBe(404);
    expect((await c.status(asyncId)).json).toMatchObject({ status: 'COMPLETED', output: 'async' });
    await reapAt(29 * 60_000);
    expect((await c.status(asyncId)).status).toBe(200);
    expect((await c.status(shortId)).status).toBe(200);
    await reapAt(30 * 60_000 + 1_000);
    expect((await c.status(asyncId)).status).toBe(404);
    expect((await c.status(shortId)).status).toBe(404);
  }
}

describe('webhooks and s3Config', () => {
  it('POSTs the status JSON to the webhook when the job ends', async () => {
    const hook = await startReceiver();
    try {
      const { c, w } = await fresh();
      const id = await finished(c, w, { output: { answer: 42 } }, { input: { q: 1 }, webhook: hook.url });
      await eventually(async () => (hook.calls.length > 0 ? true : undefined), 5_000, 'webhook call');
      const status = (await c.status(id)).json;
      expect(hook.calls[0]!.body).toEqual(status);
      expect(hook.calls[0]!.body).toMatchObject({ id, status: 'COMPLETED', output: { answer: 42 } });
      expect(hook.calls[0]!.headers['content-type']).toContain('application/json');
    } finally {
      await hook.close();
    }
  });

  it('retries a failing receiver: 2 failures then success is 3 calls; always failing stops at 3', async () => {
    const flaky = await startReceiver([500, 503]);
    const broken = await startReceiver(Array(10).fill(500) as number[]);
    try {
      const { ep, c, w } = await fresh();
      const a = await finished(c, w, { output: 'a' }, { input: {}, webhook: flaky.url });
      const b = await finished(c, w, { error: 'b' }, { input: {}, webhook: broken.url });
      // The delivery state on the job row: no next attempt is scheduled once it succeeded or gave up.
      const settled = async (id: string) => {
        const job = await t.gantry.gateway.jobs.getJob(ep, id);
        return job && job.webhookNextAt === null && job.webhookAttempts > 0 ? job.webhookAttempts : undefined;
      };
      expect(await eventually(() => settled(a), 15_000, 'the flaky delivery to end')).toBe(3);
      expect(await eventually(() => settled(b), 15_000, 'the broken delivery to give up')).toBe(3);
      expect(flaky.calls.map((x) => x.body.id)).toEqual([a, a, a]);
      expect(broken.calls.map((x) => x.body.id)).toEqual([b, b, b]);
      expect(broken.calls[0]!.body).toMatchObject({ id: b, status: 'FAILED', error: 'b' });
    } finally {
      await flaky.close();
      await broken.close();
    }
  });

  it('hands s3Config to the worker in job-take and never shows it in status, runsync or webhook bodies', async () => {
    const hook = await startReceiver();
    try {
      const { c, w } = await fresh();
      const s3Config = { accessId: 'AKIA-TEST-ID', accessSecret: 'very-secret-value-xyz', bucketName: 'bkt-test', endpointUrl: 'https://s3.example.test' };
      const pending = c.runsync({ input: { p: 1 }, s3Config, webhook: hook.url });
      const job = await w.takeJob();
      expect(job.s3Config).toEqual(s3Config);
      const whileRunning = await c.status(job.id as string);
      await w.done(job.id as string, { output: { ok: true } });
      const r = await pending;
      expect(r.json.status).toBe('COMPLETED');
      await eventually(async () => (hook.calls.length > 0 ? true : undefined), 5_000, 'webhook call');
      const after = await c.status(job.id as string);
      const requests = await c.requests();
      for (const [what, text] of [
        ['runsync', r.text],
        ['status while running', whileRunning.text],
        ['status', after.text],
        ['requests', requests.text],
        ['webhook', JSON.stringify(hook.calls[0]!.body)],
      ] as const) {
        expect(text, what).not.toContain('very-secret-value-xyz');
        expect(text, what).not.toContain('AKIA-TEST-ID');
        expect(text, what).not.toContain('s3Config');
      }
    } finally {
      await hook.close();
    }
  });
});
