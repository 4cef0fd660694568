// End to end with the unmodified npm `runpod-sdk` client (docs/api.md, "Clients": existing clients work
// unchanged when pointed at Gantry). The worker is simulated in the test over HTTP, speaking
// runpod-python's worker protocol.
import runpodSdk from 'runpod-sdk';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { startTestGantry, type TestGantry } from '../helpers/gantry.js';
import { clientFor, uniqueId, workerFor, type Json, type Worker } from '../http/http-helpers.js';

let t: TestGantry;
let runKey: string;
let workerKey: string;
const loops: { stop(): Promise<void> }[] = [];

afterEach(async () => {
  await Promise.all(loops.splice(0).map((l) => l.stop()));
});

type Handler = (job: Json, w: Worker) => Promise<unknown>;

/** A worker loop: take, run the handler, post its result (or its error) to job-done. */
function serve(w: Worker, handler: Handler): void {
  let stopped = false;
  const loop = (async () => {
    while (!stopped) {
      const r = await w.take();
      if (r.status !== 200) continue;
      const job = r.json;
      try {
        await w.done(job.id as string, { output: await handler(job, w) });
      } catch (err) {
        await w.done(job.id as string, { error: (err as Error).message });
      }
    }
  })();
  loops.push({
    async stop() {
      stopped = true;
      await loop;
    },
  });
}

async function setup() {
  const id = uniqueId('sdk');
  await t.createEndpoint(id);
  const sdk = runpodSdk(runKey, { baseUrl: `${t.url}/v2` });
  const endpoint = sdk.endpoint(id);
  if (!endpoint) throw new Error('no endpoint');
  return { id, endpoint, w: workerFor(t, id, workerKey), c: clientFor(t, id, runKey) };
}

const echo: Handler = async (job) => ({ echoed: job.input });

// The same tests on both store backends (PostgreSQL: a schema of its own, see test/helpers/postgres.ts).
describe.each(['sqlite', 'postgres'] as const)('runpod-sdk against Gantry (%s store)', (backend) => {
  beforeAll(async () => {
    t = await startTestGantry({ jobTakeWaitMs: 300 }, { backend });
    runKey = await t.createKey(['run']);
    workerKey = await t.createKey(['worker']);
  });

  afterAll(async () => {
    await t?.close();
  });

  it('run and status', async () => {
    const { endpoint } = await setup();
    const run = (await endpoint.run({ input: { prompt: 'hello' } })) as Json;
    expect(run).toEqual({ id: expect.any(String), status: 'IN_QUEUE' });
    const status = (await endpoint.status(run.id as string)) as Json;
    expect(status).toMatchObject({ id: run.id, status: 'IN_QUEUE', input: { prompt: 'hello' }, started: true, completed: false, succeeded: false });
  });

  it('runSync returns the finished job', async () => {
    const { endpoint, w } = await setup();
    serve(w, echo);
    const result = (await endpoint.runSync({ input: { n: 3 } }, 10_000)) as Json;
    expect(result).toMatchObject({ status: 'COMPLETED', output: { echoed: { n: 3 } }, started: true, completed: true, succeeded: true });
    expect(result.id).toMatch(/^sync-/);
    expect(typeof result.delayTime).toBe('number');
    expect(typeof result.executionTime).toBe('number');
  });

  it('runSync reports a failed job', async () => {
    const { endpoint, w } = await setup();
    serve(w, async () => {
      throw new Error('handler exploded');
    });
    const result = (await endpoint.runSync({ input: {} }, 10_000)) as Json;
    expect(result).toMatchObject({ status: 'FAILED', error: 'handler exploded', completed: true, succeeded: false });
  });

  it('runSync keeps polling through status-sync when runsync answers before the job ends', async () => {
    const { endpoint, w } = await setup();
    // runsync?wait=1000 answers IN_QUEUE; the worker starts later; the SDK's status-sync sees the end.
    const timer = setTimeout(() => serve(w, echo), 1_200);
    try {
      const result = (await endpoint.runSync({ input: { late: 1 } }, 1_000)) as Json;
      expect(result).toMatchObject({ status: 'COMPLETED', output: { echoed: { late: 1 } }, completed: true, succeeded: true });
    } finally {
      clearTimeout(timer);
    }
  });

  it('statusSync waits for the job to end', async () => {
    const { endpoint, w } = await setup();
    const run = (await endpoint.run({ input: { s: 1 } })) as Json;
    serve(w, async (job) => {
      await new Promise((r) => setTimeout(r, 100));
      return { done: job.id };
    });
    const result = (await endpoint.statusSync(run.id as string, 10_000)) as Json;
    expect(result).toMatchObject({ id: run.id, status: 'COMPLETED', output: { done: run.id }, completed: true, succeeded: true });
  });

  it('stream yields the chunks a worker posts, then ends with the job', async () => {
    const { endpoint, w } = await setup();
    const run = (await endpoint.run({ input: { words: ['a', 'b', 'c'] } })) as Json;
    serve(w, async (job, worker) => {
      for (const word of (job.input as { words: string[] }).words) {
        await worker.streamChunk(job.id as string, word);
        await new Promise((r) => setTimeout(r, 20));
      }
      return 'abc';
    });
    const parts: unknown[] = [];
    for await (const part of endpoint.stream(run.id as string, 15_000)) parts.push(part);
    expect(parts).toEqual([{ output: 'a' }, { output: 'b' }, { output: 'c' }]);
    expect((await endpoint.status(run.id as string)) as Json).toMatchObject({ status: 'COMPLETED', output: 'abc' });
  });

  it('cancel, purgeQueue and health', async () => {
    const { endpoint } = await setup();
    const a = (await endpoint.run({ input: { a: 1 } })) as Json;
    const b = (await endpoint.run({ input: { b: 1 } })) as Json;
    const cRun = (await endpoint.run({ input: { c: 1 } })) as Json;
    const cancelled = (await endpoint.cancel(a.id as string)) as Json;
    expect(cancelled).toEqual({ id: a.id, status: 'CANCELLED' });
    const health = (await endpoint.health()) as Json;
    expect(health.jobs).toMatchObject({ inQueue: 2, inProgress: 0 });
    expect(health.workers).toMatchObject({ idle: 0, running: 0 });
    const purged = (await endpoint.purgeQueue()) as Json;
    expect(purged).toEqual({ removed: 2, status: 'completed' });
    for (const id of [b.id, cRun.id]) expect(((await endpoint.status(id as string)) as Json).status).toBe('CANCELLED');
    expect(((await endpoint.health()) as Json).jobs).toMatchObject({ inQueue: 0 });
  });

  it('a wrong key is refused with 401 (the SDK\'s HTTP client rejects)', async () => {
    const { id } = await setup();
    const bad = runpodSdk('gk_wrong', { baseUrl: `${t.url}/v2` }).endpoint(id)!;
    await expect(bad.run({ input: {} })).rejects.toThrow(/401/);
    await expect(bad.health()).rejects.toThrow(/401/);
  });
});
