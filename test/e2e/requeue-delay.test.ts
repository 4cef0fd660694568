// delayTime, attempts and retries on every path that puts a job back in the queue (issue 21.3),
// over real HTTP with real worker processes (the runpod-python 1.12 stand-in, by hand and as a
// pool worker), on both stores. The gateway's clock is a manual one: it moves only when the test
// says, so every delayTime below is exact. The rule (docs/states.md, "Requeues"): delayTime is
// the time from the submit (or the last /retry) to the start of the run, whatever happened in
// between; `attempts` counts hand-outs since then, `retries` the client's /retry calls.
import { fileURLToPath } from 'node:url';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { createManualClock } from '../helpers/clock.js';
import { eventually, startTestGantry, type TestGantry } from '../helpers/gantry.js';
import { call, clientFor, uniqueId, workerFor, type Client, type Json } from '../http/http-helpers.js';
import { PyWorker } from '../limits/py-worker.js';

const SCRIPT = fileURLToPath(new URL('./fixtures/runpod_like_worker.py', import.meta.url));
const POOL_SLEEPER = `python3 -u ${JSON.stringify(SCRIPT)} --handler sleep`;

describe.each(['sqlite', 'postgres'] as const)('delayTime and attempts across requeues (%s store)', (backend) => {
  const clock = createManualClock();
  let t: TestGantry;
  let runKey: string;
  let workerKey: string;
  const workers: PyWorker[] = [];

  beforeAll(async () => {
    t = await startTestGantry({ jobTakeWaitMs: 1_000, autoscalerIntervalMs: 100, workerRestartBackoffMs: 1_000 }, { backend, clock });
    runKey = await t.createKey(['run']);
    workerKey = await t.createKey(['worker']);
  });
  afterEach(async () => {
    await Promise.all(workers.splice(0).map((w) => w.kill()));
  });
  afterAll(async () => {
    await t?.close();
  });

  async function endpoint(settings: Json = {}): Promise<{ ep: string; c: Client }> {
    const ep = uniqueId('rq');
    await t.createEndpoint(ep, settings);
    return { ep, c: clientFor(t, ep, runKey) };
  }

  function pyWorker(ep: string, handler: string): PyWorker {
    const worker = new PyWorker(t.workerEnv(ep, uniqueId('py')), ['--handler', handler]);
    workers.push(worker);
    return worker;
  }

  async function statusOf(c: Client, id: string): Promise<Json> {
    return (await c.status(id)).json;
  }

  /** The job once `ready` accepts it (read over /status). */
  function jobWhen(c: Client, id: string, ready: (job: Json) => boolean, what: string): Promise<Json> {
    return eventually(async () => {
      const job = await statusOf(c, id);
      return ready(job) ? job : undefined;
    }, 20_000, what);
  }

  it('a worker lost while running it (killed, then presumed lost by the reaper): the wait counts from the submit', async () => {
    const { ep, c } = await endpoint();
    const id = await c.submit({ input: { seconds: 600 } });
    clock.advance(2_000);
    const first = pyWorker(ep, 'sleep');
    await first.waitFor('taken', id);
    expect(await statusOf(c, id)).toMatchObject({ status: 'IN_PROGRESS', delayTime: 2_000, attempts: 1, retries: 0 });
    await first.kill();
    clock.advance(40_000); // past GANTRY_WORKER_LOST_MS (30 s)
    await t.gantry.gateway.reaper.runOnce();
    const requeued = await statusOf(c, id);
    expect(requeued).toMatchObject({ status: 'IN_QUEUE', attempts: 1, retries: 0 });
    expect(requeued).not.toHaveProperty('delayTime');
    clock.advance(3_000);
    pyWorker(ep, 'echo');
    const done = await jobWhen(c, id, (j) => j.status === 'COMPLETED', 'the second run to complete');
    // 2 s queued + 40 s on the lost worker + 3 s queued again: 45 s of waiting for the run that produced the result.
    expect(done).toMatchObject({ delayTime: 45_000, executionTime: 0, attempts: 2, retries: 0, output: { seconds: 600 } });
    expect((await c.health()).json.jobs).toMatchObject({ completed: 1, retried: 0, reattempted: 1 });
  });

  it('a pool worker that exits holding it (killed): requeued at once, the wait still counts from the submit', async () => {
    const { ep, c } = await endpoint();
    const id = await c.submit({ input: { seconds: 600 } });
    clock.advance(2_000);
    // Workers only now: the first hand-out is 2 s after the submit.
    const patched = await call(t.url, 'PATCH', `/admin/v1/endpoints/${ep}`, { key: t.adminKey, body: { workersMin: 1, workersMax: 1, idleTimeout: 600, worker: { command: POOL_SLEEPER } } });
    expect(patched.status).toBe(200);
    const running = await jobWhen(c, id, (j) => j.status === 'IN_PROGRESS', 'the pool worker to take it');
    expect(running).toMatchObject({ delayTime: 2_000, attempts: 1 });
    const slot = () => t.gantry.gateway.autoscaler.view.workers(ep)?.find((w) => w.id === running.workerId);
    expect(slot()?.pid).toBeGreaterThan(0);
    process.kill(slot()!.pid!, 'SIGKILL');
    await jobWhen(c, id, (j) => j.status === 'IN_QUEUE', 'the pool to requeue it');
    // The pool has set its restart time (1 s backoff on this clock) before the clock moves on.
    await eventually(async () => (slot()?.restarts === 1 ? true : undefined), 10_000, 'the pool to note the crash');
    clock.advance(7_000); // past the restart backoff: the pool starts a worker again, which takes it
    const again = await jobWhen(c, id, (j) => j.status === 'IN_PROGRESS', 'the restarted worker to take it');
    expect(again).toMatchObject({ delayTime: 9_000, attempts: 2, retries: 0 });
    expect((await c.cancel(id)).status).toBe(200);
    await call(t.url, 'PATCH', `/admin/v1/endpoints/${ep}`, { key: t.adminKey, body: { workersMin: 0, workersMax: 0 } });
  });

  it('a worker that forgets it (its ping stops listing it): requeued, counted, the wait from the submit', async () => {
    const { ep, c } = await endpoint();
    const id = await c.submit({ input: {} });
    clock.advance(2_000);
    const forgetful = pyWorker(ep, 'forget');
    await forgetful.waitFor('taken', id);
    clock.advance(20_000); // past the 15 s a taken job may be missing from its worker's pings
    await forgetful.waitFor('taken', id, 2); // its next ping returns the job; its take loop gets it again
    expect(await statusOf(c, id)).toMatchObject({ status: 'IN_PROGRESS', delayTime: 22_000, attempts: 2, retries: 0 });
    await forgetful.kill();
    expect((await c.cancel(id)).status).toBe(200);
  });

  it('a hand-out that never reached its worker (take closed while claiming): uncounted, the wait from the submit', async () => {
    const { ep, c } = await endpoint();
    const w = workerFor(t, ep, workerKey);
    const id = await c.submit({ input: {} });
    clock.advance(2_000);
    expect((await w.takeJob()).id).toBe(id);
    // What the take queue calls when the long-poll that claimed jobs is gone before they are written to it.
    expect(await t.gantry.gateway.transitions.returnUntaken(ep, w.id, [id])).toEqual([id]);
    expect(await statusOf(c, id)).toMatchObject({ status: 'IN_QUEUE', attempts: 0 });
    clock.advance(3_000);
    pyWorker(ep, 'echo');
    expect(await jobWhen(c, id, (j) => j.status === 'COMPLETED', 'the run')).toMatchObject({ delayTime: 5_000, attempts: 1, retries: 0 });
  });

  it('a /retry starts the wait again (the client queued it again): retries 1, attempts from 0', async () => {
    const { ep, c } = await endpoint({ maxAttempts: 3 });
    const w = workerFor(t, ep, workerKey);
    const id = await c.submit({ input: {} });
    clock.advance(2_000);
    expect((await w.takeJob()).id).toBe(id);
    expect((await w.done(id, { error: 'boom' })).status).toBe(200);
    clock.advance(10_000);
    expect((await c.retry(id)).status).toBe(200);
    clock.advance(3_000);
    pyWorker(ep, 'echo');
    expect(await jobWhen(c, id, (j) => j.status === 'COMPLETED', 'the retried run')).toMatchObject({ delayTime: 3_000, attempts: 1, retries: 1 });
    expect((await c.health()).json.jobs).toMatchObject({ retried: 1, reattempted: 0 });
    const listed = ((await c.requests()).json.requests as Json[]).find((r) => r.id === id);
    expect(listed).toMatchObject({ delayTime: 3_000, attempts: 1, retries: 1 });
  });
});
