// The worker routes (runpod-python's protocol, docs/worker-protocol.md) against a real gateway: the test
// itself is the worker, sending exactly what runpod-python 1.12 sends.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { eventually, startTestGantry, type TestGantry } from '../helpers/gantry.js';
import { call, clientFor, isErrorBody, uniqueId, workerFor, type Client, type Json, type Worker } from './http-helpers.js';

let t: TestGantry;
let runKey: string;
let workerKey: string;

beforeAll(async () => {
  t = await startTestGantry({ jobTakeWaitMs: 200 });
  runKey = await t.createKey(['run']);
  workerKey = await t.createKey(['worker']);
});

afterAll(async () => {
  await t?.close();
});

async function fresh(settings: Record<string, unknown> = {}, g: TestGantry = t, keys = { run: runKey, worker: workerKey }): Promise<{ ep: string; c: Client; w: Worker }> {
  const ep = uniqueId('wr');
  await g.createEndpoint(ep, settings);
  return { ep, c: clientFor(g, ep, keys.run), w: workerFor(g, ep, keys.worker) };
}

/** Submits and has `w` take the job; returns its id. */
async function running(c: Client, w: Worker, body: unknown = { input: { n: 1 } }): Promise<string> {
  const id = await c.submit(body);
  const job = await w.takeJob();
  expect(job.id).toBe(id);
  return id;
}

function is2xx(status: number): boolean {
  return status >= 200 && status < 300;
}

describe('job-take', () => {
  it('answers 200 with one job {id, input, policy}, and 204 after the long-poll when the queue is empty', async () => {
    const { c, w } = await fresh();
    const id = await c.submit({ input: { prompt: 'x' } });
    const r = await w.take();
    expect(r.status).toBe(200);
    expect(r.json).toMatchObject({ id, input: { prompt: 'x' } });
    expect(r.json.policy).toMatchObject({ executionTimeout: 600_000, lowPriority: false, ttl: 86_400_000 });
    expect(r.json).not.toHaveProperty('s3Config');

    const empty = await w.take();
    expect(empty.status).toBe(204);
    expect(empty.text).toBe('');
    expect(empty.ms).toBeGreaterThanOrEqual(180); // held for the long-poll (200 ms here) first
  });

  it('delivers a job submitted while a take is waiting at once', async () => {
    const slow = await startTestGantry({ jobTakeWaitMs: 20_000 });
    try {
      const { ep, c, w } = await fresh({}, slow, { run: await slow.createKey(['run']), worker: await slow.createKey(['worker']) });
      const pending = w.take();
      await eventually(
        async () => (slow.gantry.gateway.takeQueue.waitingWorkers().some((x) => x.workerId === w.id && x.endpointId === ep) ? true : undefined),
        3_000,
        'the take to wait',
      );
      const id = await c.submit({ input: { late: true } });
      const r = await pending;
      // The parked poll is woken by the submit: without the wake-up it would end 204 after 20 s.
      expect(r.status).toBe(200);
      expect(r.json).toMatchObject({ id, input: { late: true } });
      expect(r.ms).toBeLessThan(20_000);
      expect((await c.status(id)).json).toMatchObject({ status: 'IN_PROGRESS', workerId: w.id });
    } finally {
      await slow.close();
    }
  });

  it('job-take-batch?batch_size=N hands out up to N jobs in queue order, then 204', async () => {
    const { c, w } = await fresh();
    const ids: string[] = [];
    for (let i = 0; i < 5; i++) ids.push(await c.submit({ input: { i } }));
    const first = await w.takeBatch(3);
    expect(first.status).toBe(200);
    expect(Array.isArray(first.json)).toBe(true);
    expect((first.json as unknown as Json[]).map((j) => j.id)).toEqual(ids.slice(0, 3));
    expect((first.json as unknown as Json[]).map((j) => j.input)).toEqual([{ i: 0 }, { i: 1 }, { i: 2 }]);
    const second = await w.takeBatch(3);
    expect((second.json as unknown as Json[]).map((j) => j.id)).toEqual(ids.slice(3));
    expect((await w.takeBatch(3)).status).toBe(204);
    for (const id of ids) expect((await c.status(id)).json).toMatchObject({ status: 'IN_PROGRESS', workerId: w.id });
  });

  it('parses the literal "?&" query form of runpod-python', async () => {
    const { c, w } = await fresh();
    await c.submit();
    await c.submit();
    await c.submit();
    const one = await w.call('GET', `job-take/${w.id}?&job_in_progress=0`);
    expect(one.status).toBe(200);
    expect(typeof one.json.id).toBe('string');
    const batch = await w.call('GET', `job-take-batch/${w.id}?&batch_size=2&job_in_progress=1`);
    expect(batch.status).toBe(200);
    expect((batch.json as unknown as Json[]).length).toBe(2);
    const done = await w.call('POST', `job-done/${w.id}/${one.json.id as string}?&isStream=false`, { body: { output: 'ok' }, contentType: 'application/json' });
    expect(done.status).toBe(200);
    expect((await c.status(one.json.id as string)).json).toMatchObject({ status: 'COMPLETED', output: 'ok' });
    // job-stop with no query at all; GETs with Content-Type: application/json and no body.
    const stop = await w.call('GET', `job-stop/${w.id}`, { contentType: 'application/json' });
    expect(stop.status).toBe(204);
  });
});

describe('job-done', () => {
  it('reads JSON from an application/x-www-form-urlencoded body and uses the ids of the path, not X-Request-ID', async () => {
    const { c, w } = await fresh();
    const a = await running(c, w);
    const b = await running(c, w);
    const r = await w.call('POST', `job-done/${w.id}/${b}?&isStream=false`, {
      body: JSON.stringify({ output: { for: 'b' } }),
      contentType: 'application/x-www-form-urlencoded',
      headers: { charset: 'utf-8', 'x-request-id': a },
    });
    expect(r.status).toBe(200);
    expect((await c.status(b)).json).toMatchObject({ status: 'COMPLETED', output: { for: 'b' } });
    expect((await c.status(a)).json.status).toBe('IN_PROGRESS');
  });

  it('output → COMPLETED; error string → FAILED; error object → FAILED with its JSON text', async () => {
    const { c, w } = await fresh();
    const ok = await running(c, w);
    expect((await w.done(ok, { output: [{ image: 'aGVsbG8=', seed: 1 }] })).status).toBe(200);
    expect((await c.status(ok)).json).toMatchObject({ status: 'COMPLETED', output: [{ image: 'aGVsbG8=', seed: 1 }] });

    const str = await running(c, w);
    expect((await w.done(str, { error: 'handler: boom \ntraceback: ...' })).status).toBe(200);
    const s1 = (await c.status(str)).json;
    expect(s1).toMatchObject({ status: 'FAILED', error: 'handler: boom \ntraceback: ...' });
    expect(s1).not.toHaveProperty('output');

    const obj = await running(c, w);
    const error = { error_type: 'ValueError', error_message: 'bad', error_traceback: 'tb' };
    expect((await w.done(obj, { error })).status).toBe(200);
    const s2 = (await c.status(obj)).json;
    expect(s2.status).toBe('FAILED');
    expect(typeof s2.error).toBe('string');
    expect(JSON.parse(s2.error as string)).toEqual(error);

    const nullOutput = await running(c, w);
    expect((await w.done(nullOutput, {})).status).toBe(200);
    expect((await c.status(nullOutput)).json.status).toBe('COMPLETED');
  });

  it('a progress update keeps IN_PROGRESS and shows its output; one arriving after the final result changes nothing', async () => {
    const { c, w } = await fresh();
    const id = await running(c, w);
    const p = await w.done(id, { status: 'IN_PROGRESS', output: { pct: 50 } }, '?&isStream=false');
    expect(p.status).toBe(200);
    expect((await c.status(id)).json).toMatchObject({ status: 'IN_PROGRESS', output: { pct: 50 }, input: { n: 1 } });
    expect((await w.done(id, { output: { result: 'final' } })).status).toBe(200);
    const late = await w.done(id, { status: 'IN_PROGRESS', output: { pct: 99 } });
    expect(is2xx(late.status)).toBe(true);
    const s = (await c.status(id)).json;
    expect(s).toMatchObject({ status: 'COMPLETED', output: { result: 'final' } });
  });

  it('a duplicate job-done is answered 2xx and changes nothing', async () => {
    const { c, w } = await fresh();
    const id = await running(c, w);
    expect((await w.done(id, { output: 'first' })).status).toBe(200);
    const before = (await c.status(id)).json;
    const dup = await w.done(id, { output: 'first' });
    expect(is2xx(dup.status)).toBe(true);
    const different = await w.done(id, { error: 'second' });
    expect(is2xx(different.status)).toBe(true);
    expect((await c.status(id)).json).toEqual(before);

    const failed = await running(c, w);
    await w.done(failed, { error: 'e1' });
    expect(is2xx((await w.done(failed, { error: 'e1' })).status)).toBe(true);
    expect((await c.status(failed)).json).toMatchObject({ status: 'FAILED', error: 'e1' });
  });

  it('refuses a result from a worker that does not hold the job (409), and an unknown job (404)', async () => {
    const { ep, c, w } = await fresh();
    const id = await running(c, w);
    const other = workerFor(t, ep, workerKey);
    const r = await other.done(id, { output: 'not mine' });
    expect(r.status).toBe(409);
    expect(isErrorBody(r)).toBe(true);
    expect((await c.status(id)).json).toMatchObject({ status: 'IN_PROGRESS', workerId: w.id });
    expect((await other.streamChunk(id, 'x')).status).toBe(409);

    const queued = await c.submit();
    const q = await w.done(queued, { output: 'never taken' });
    expect(q.status).toBe(409);
    expect((await c.status(queued)).json.status).toBe('IN_QUEUE');

    const unknown = await w.done('00000000-0000-4000-8000-000000000000', { output: 1 });
    expect(unknown.status).toBe(404);
    expect(isErrorBody(unknown)).toBe(true);
    expect((await w.streamChunk('no-such-job', 'x')).status).toBe(404);
  });
});

describe('endpoint isolation', () => {
  it('job-done, progress and job-stream through another endpoint\'s path do not touch the job (409: the worker id is b\'s)', async () => {
    const { ep: a } = await fresh();
    const { ep: b, c: cb } = await fresh();
    const sharedWorkerId = uniqueId('pod');
    const onB = workerFor(t, b, workerKey, sharedWorkerId);
    const id = await running(cb, onB);
    // Same worker id, same job id, but the path names endpoint a, whose key may not touch b.
    const aOnly = await t.createKey(['worker'], [a]);
    const viaA = workerFor(t, a, aOnly, sharedWorkerId);
    const stream = (await viaA.streamChunk(id, 'injected')).status;
    const progress = (await viaA.done(id, { status: 'IN_PROGRESS', output: 'injected progress' })).status;
    const done = (await viaA.done(id, { output: 'injected' })).status;
    const s = (await cb.status(id)).json;
    const chunks = (await cb.stream(id, '?wait=0')).json.stream;
    expect({ stream, progress, done, status: s.status, output: s.output, chunks }).toEqual({
      stream: 409,
      progress: 409,
      done: 409,
      status: 'IN_PROGRESS',
      output: undefined,
      chunks: [],
    });
  });
});

describe('ping and health', () => {
  it('a ping with job_id=a%2Cb&runpod_version=1.12.0 is accepted; status=unhealthy shows in health', async () => {
    const { ep, c, w } = await fresh();
    const a = await running(c, w);
    const b = await running(c, w);
    const ping = await w.ping(`?job_id=${encodeURIComponent(`${a},${b}`)}&runpod_version=1.12.0`);
    expect(ping.status).toBe(200);
    // Holding jobs it still runs: nothing to stop.
    expect((await w.stop()).status).toBe(204);
    const h1 = (await c.health()).json;
    expect(h1.workers).toMatchObject({ running: 1, unhealthy: 0 });

    const sick = workerFor(t, ep, workerKey);
    expect((await sick.ping('?job_id=&runpod_version=1.12.0&status=unhealthy&check=cuda&reason=no%20device')).status).toBe(200);
    const h2 = (await c.health()).json;
    expect(h2.workers).toMatchObject({ running: 1, unhealthy: 1 });
    // A later healthy ping heals it.
    expect((await sick.ping('?job_id=&runpod_version=1.12.0')).status).toBe(200);
    expect((await c.health()).json.workers).toMatchObject({ idle: 1, running: 1, unhealthy: 0 });
  });

  it('a ping listing a job the worker must no longer run puts it on the job-stop list', async () => {
    const { c, w } = await fresh();
    const id = await running(c, w);
    await c.cancel(id);
    await w.stop(); // the cancel's own signal
    expect((await w.ping(`?job_id=${id}&runpod_version=1.12.0`)).status).toBe(200);
    const stop = await w.stop();
    expect(stop.status).toBe(200);
    expect(stop.json).toEqual({ jobsToStop: [id] });
  });
});

describe('lost workers', () => {
  let g: TestGantry;
  let keys: { run: string; worker: string };
  beforeAll(async () => {
    g = await startTestGantry({ workerLostMs: 1_000, reaperIntervalMs: 100, jobTakeWaitMs: 200 });
    keys = { run: await g.createKey(['run']), worker: await g.createKey(['worker']) };
  });
  afterAll(async () => {
    await g?.close();
  });

  it('a worker that stops pinging loses its job: it is requeued and taken by another worker', async () => {
    const { ep, c, w } = await fresh({}, g, keys);
    const id = await running(c, w, { input: { keep: 'me' } });
    // w goes silent. Another worker keeps polling and gets the job once w is presumed lost.
    const w2 = workerFor(g, ep, keys.worker);
    const started = Date.now();
    const job = await w2.takeJob(6_000);
    expect(job).toMatchObject({ id, input: { keep: 'me' } });
    expect(Date.now() - started).toBeGreaterThanOrEqual(700);
    expect((await c.status(id)).json).toMatchObject({ status: 'IN_PROGRESS', workerId: w2.id });
    expect((await w2.done(id, { output: 'by w2' })).status).toBe(200);
    // The lost worker's late result changes nothing.
    expect(is2xx((await w.done(id, { output: 'by w' })).status)).toBe(true);
    expect((await c.status(id)).json).toMatchObject({ status: 'COMPLETED', output: 'by w2', workerId: w2.id });
    // Handed out twice, never retried by a client: /health counts it apart from retries.
    expect((await c.health()).json.jobs).toMatchObject({ retried: 0, reattempted: 1 });
    expect((await c.status(id)).json).toMatchObject({ retries: 0, attempts: 2 });
  });

  it('a requeued job does not show the lost attempt\'s progress output', async () => {
    const { ep, c, w } = await fresh({}, g, keys);
    const id = await running(c, w);
    await w.done(id, { status: 'IN_PROGRESS', output: { pct: 10 } });
    await eventually(async () => ((await c.status(id)).json.status === 'IN_QUEUE' ? true : undefined), 5_000, 'requeue');
    const s = (await c.status(id)).json;
    expect(s).not.toHaveProperty('workerId');
    expect(s).not.toHaveProperty('output');
    const w2 = workerFor(g, ep, keys.worker);
    await w2.takeJob();
    expect((await c.status(id)).json).not.toHaveProperty('output');
  });

  it('after maxAttempts losses the job ends FAILED "worker lost"', async () => {
    const { ep, c, w } = await fresh({ maxAttempts: 2 }, g, keys);
    const id = await running(c, w);
    const w2 = workerFor(g, ep, keys.worker);
    expect((await w2.takeJob(6_000)).id).toBe(id); // second attempt; then w2 goes silent too
    const s = await eventually(
      async () => {
        const r = (await c.status(id)).json;
        return r.status === 'IN_PROGRESS' ? undefined : r;
      },
      6_000,
      'FAILED',
    );
    expect(s).toMatchObject({ id, status: 'FAILED', error: 'worker lost' });
  });
});

describe('keys on worker routes', () => {
  it('worker routes refuse run, read and admin keys (401); client routes refuse a worker key (401)', async () => {
    const { ep, c } = await fresh();
    const id = await c.submit();
    const readKey = await t.createKey(['read']);
    for (const key of [runKey, readKey, t.adminKey]) {
      const w = workerFor(t, ep, key);
      const take = await w.take();
      expect(take.status).toBe(401);
      expect(isErrorBody(take)).toBe(true);
      expect((await w.ping()).status).toBe(401);
      expect((await w.done(id, { output: 1 })).status).toBe(401);
    }
    expect((await c.status(id)).json.status).toBe('IN_QUEUE');
    for (const [method, path] of [
      ['POST', 'run'],
      ['POST', 'runsync?wait=1000'],
      ['GET', `status/${id}`],
      ['GET', `stream/${id}`],
      ['POST', `cancel/${id}`],
      ['GET', 'health'],
      ['POST', 'purge-queue'],
    ] as const) {
      const r = await call(t.url, method, `/v2/${ep}/${path}`, { key: workerKey, rawAuth: true, body: method === 'POST' ? { input: {} } : undefined });
      expect(r.status, `${method} ${path}`).toBe(401);
      expect(isErrorBody(r)).toBe(true);
    }
    expect((await c.status(id)).json.status).toBe('IN_QUEUE');
  });

  it('a worker key restricted to one endpoint is refused on another', async () => {
    const { ep: a } = await fresh();
    const { ep: b, c: cb } = await fresh();
    const only = await t.createKey(['worker'], [a]);
    const id = await cb.submit();
    expect((await workerFor(t, b, only).take()).status).toBe(401);
    expect((await workerFor(t, a, only).take()).status).toBe(204);
    expect((await cb.status(id)).json.status).toBe('IN_QUEUE');
  });
});
