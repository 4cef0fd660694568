// End to end: a real Gantry server and real worker processes that speak runpod-python
// 1.12's wire protocol (test/e2e/fixtures/runpod_like_worker.py reproduces it request by
// request: `?&` queries, raw Authorization, form-encoded JSON results with a `charset`
// header, sticky X-Request-ID, job-stop long-polls, progress posts to job-done, ...).
// If these pass, an unmodified `runpod.serverless.start({"handler": ...})` worker works.
import { randomUUID } from 'node:crypto';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { isTerminal, type GantryClient, type Job } from '../../src/sdk/client.js';
import { eventually, startTestGantry } from '../helpers/gantry.js';
import { waitForJob } from '../helpers/jobs.js';
import { PyWorker } from '../limits/py-worker.js';

type Gantry = Awaited<ReturnType<typeof startTestGantry>>;
type Json = Record<string, unknown>;

let gantry: Gantry;
let jobs: GantryClient;
const workers: PyWorker[] = [];

function startWorker(endpointId: string, args: string[]): PyWorker {
  const workerId = `py-${endpointId}-${workers.length}`;
  const worker = new PyWorker(gantry.workerEnv(endpointId, workerId), args);
  workers.push(worker);
  return worker;
}

async function newEndpoint(name: string): Promise<string> {
  const id = `rp-${name}-${Date.now().toString(36)}`;
  await gantry.createEndpoint(id);
  return id;
}

async function submit(endpointId: string, input: unknown): Promise<string> {
  const ref = await jobs.run(endpointId, { input });
  expect(ref.status).toBe('IN_QUEUE');
  return ref.id;
}

const jobStatus = (endpointId: string, jobId: string): Promise<Job> => jobs.status(endpointId, jobId);
const untilTerminal = (endpointId: string, jobId: string): Promise<Job> => waitForJob(jobs, endpointId, jobId, 15_000);

/** Polls `probe` until it returns a value, or fails with `what` at the deadline. */
function until<T>(what: string, probe: () => T | undefined | Promise<T | undefined>, timeoutMs = 15_000): Promise<T> {
  return eventually(async () => probe(), timeoutMs, what);
}

const untilEvent = (worker: PyWorker, what: string, id: string, timeoutMs = 15_000): Promise<void> => worker.waitFor(what, id, 1, timeoutMs);

afterEach(async () => {
  await Promise.all(workers.splice(0).map((w) => w.stop()));
});

// The same tests on both store backends (PostgreSQL: a schema of its own, see test/helpers/postgres.ts).
describe.each(['sqlite', 'postgres'] as const)('runpod-python 1.12 worker protocol (%s store)', (backend) => {
  beforeAll(async () => {
    gantry = await startTestGantry({}, { backend });
    jobs = gantry.client(await gantry.createKey(['run']));
  });

  afterAll(async () => {
    await gantry?.close();
  });

  it('runs a plain handler: output, times and worker id', async () => {
    const ep = await newEndpoint('echo');
    const worker = startWorker(ep, ['--handler', 'echo']);
    const input = { prompt: 'grüße, 世界', n: [1, 2, 3], nested: { ok: true } };
    const id = await submit(ep, input);
    const job = await untilTerminal(ep, id);
    expect(job).toMatchObject({ id, status: 'COMPLETED', output: input, workerId: worker.workerId });
    expect(job.delayTime).toEqual(expect.any(Number));
    expect(job.executionTime).toEqual(expect.any(Number));
    expect(job.delayTime as number).toBeGreaterThanOrEqual(0);
    expect(job.executionTime as number).toBeGreaterThanOrEqual(0);
    expect(job.error).toBeUndefined();
    expect(worker.errors()).toEqual([]);
  });

  it('a dict output with an `error` key fails the job (runpod pops it into the result)', async () => {
    const ep = await newEndpoint('echoerr');
    const worker = startWorker(ep, ['--handler', 'echo']);
    const id = await submit(ep, { error: 'bad prompt', detail: 1 });
    const job = await untilTerminal(ep, id);
    expect(job).toMatchObject({ status: 'FAILED', error: 'bad prompt' });
    expect(worker.errors()).toEqual([]);
  });

  it('a raising plain handler ends FAILED with the JSON-encoded error string', async () => {
    const ep = await newEndpoint('fail');
    const worker = startWorker(ep, ['--handler', 'fail']);
    const id = await submit(ep, { message: 'kaboom' });
    const job = await untilTerminal(ep, id);
    expect(job.status).toBe('FAILED');
    expect(typeof job.error).toBe('string');
    const info = JSON.parse(job.error as string) as Json;
    expect(info).toMatchObject({ error_type: "<class 'RuntimeError'>", error_message: 'kaboom', runpod_version: '1.12.0' });
    expect(info.error_traceback).toContain('RuntimeError: kaboom');
    expect(worker.errors()).toEqual([]);
  });

  it('a raising generator ends FAILED with the "handler: ... traceback" text', async () => {
    const ep = await newEndpoint('streamfail');
    const worker = startWorker(ep, ['--handler', 'stream_fail']);
    const id = await submit(ep, { chunks: ['one'], message: 'generator broke' });
    const job = await untilTerminal(ep, id);
    expect(job.status).toBe('FAILED');
    expect(job.error).toEqual(expect.stringMatching(/^handler: generator broke \ntraceback: Traceback/));
    expect(job.error).toContain('ValueError: generator broke');
    expect(worker.errors()).toEqual([]);
  });

  it('shows progress updates while IN_PROGRESS; a late progress post never reopens the job', async () => {
    const ep = await newEndpoint('progress');
    const worker = startWorker(ep, ['--handler', 'progress']);
    const steps = 4;
    const id = await submit(ep, { steps, step_seconds: 0.5, late_progress: true, late_delay: 0.6 });
    const seen = await until('a progress update in /status', async () => {
      const job = await jobStatus(ep, id);
      expect(isTerminal(job.status)).toBe(false);
      return job.status === 'IN_PROGRESS' && job.output !== undefined ? job : undefined;
    });
    expect(seen.output).toMatchObject({ of: steps, step: expect.any(Number) });
    const done = await untilTerminal(ep, id);
    expect(done).toMatchObject({ status: 'COMPLETED', output: { steps } });
    // The worker posts `steps` updates plus the late one, which lands after job-done.
    await until('the late progress post', () => (worker.count('progress-sent', id) === steps + 1 ? true : undefined));
    await untilEvent(worker, 'done', id);
    expect(worker.events.findIndex((e) => e.what === 'done' && e.id === id))
      .toBeLessThan(worker.events.findLastIndex((e) => e.what === 'progress-sent' && e.id === id));
    expect(await jobStatus(ep, id)).toMatchObject({ status: 'COMPLETED', output: { steps } });
    expect(worker.errors()).toEqual([]);
  });

  it('streams generator chunks through GET /stream and aggregates them (return_aggregate_stream)', async () => {
    const ep = await newEndpoint('stream');
    const worker = startWorker(ep, ['--handler', 'stream', '--aggregate']);
    const chunks = ['alpha', { beta: 2 }, 'γάμμα', [4]];
    const id = await submit(ep, { chunks, chunk_seconds: 0.2 });
    const received: unknown[] = [];
    for await (const chunk of jobs.stream(ep, id)) received.push(chunk);
    expect(received).toEqual(chunks);
    expect(await jobStatus(ep, id)).toMatchObject({ status: 'COMPLETED', output: chunks });
    expect(worker.errors()).toEqual([]);
  });

  it('cancel reaches the running worker through job-stop, and the job stays CANCELLED', async () => {
    const ep = await newEndpoint('cancel');
    const worker = startWorker(ep, ['--handler', 'sleep']);
    const id = await submit(ep, { seconds: 60 });
    await untilEvent(worker, 'taken', id);
    expect((await jobStatus(ep, id)).status).toBe('IN_PROGRESS');
    expect(await jobs.cancel(ep, id)).toMatchObject({ id, status: 'CANCELLED' });
    await untilEvent(worker, 'stop', id, 10_000);
    await untilEvent(worker, 'stopped', id);
    expect((await jobStatus(ep, id)).status).toBe('CANCELLED');
    // The worker is free again and takes the next job; the cancelled one stays cancelled.
    const next = await submit(ep, { seconds: 0.1 });
    expect(await untilTerminal(ep, next)).toMatchObject({ status: 'COMPLETED', output: { slept: 0.1 } });
    expect(await jobStatus(ep, id)).toMatchObject({ status: 'CANCELLED' });
    expect(worker.has('done', id)).toBe(false);
    expect(worker.errors()).toEqual([]);
  });

  it('takes jobs in batches with concurrency 2 and runs them side by side', async () => {
    const ep = await newEndpoint('batch');
    const ids = [await submit(ep, { seconds: 2 }), await submit(ep, { seconds: 2 })];
    const worker = startWorker(ep, ['--handler', 'sleep', '--concurrency', '2']);
    const jobs = await Promise.all(ids.map((id) => untilTerminal(ep, id)));
    for (const job of jobs) expect(job).toMatchObject({ status: 'COMPLETED', output: { slept: 2 }, workerId: worker.workerId });
    // The worker prints `done` once its result post has been answered, which can be after /status says COMPLETED.
    for (const id of ids) await untilEvent(worker, 'done', id);
    expect(worker.stderr).toMatch(/GET \/v2\/[^/]+\/job-take-batch\/[^?]+\?&batch_size=2&job_in_progress=0 -> 200/);
    // While both run, the heartbeat lists them: ping/W?job_id=a%2Cb&runpod_version=1.12.0.
    const pings = [...worker.stderr.matchAll(/GET \/v2\/[^/]+\/ping\/[^?]+\?job_id=([^&]+)&runpod_version=1\.12\.0 -> 200/g)];
    expect(pings.map((m) => decodeURIComponent(m[1]!).split(',').sort())).toContainEqual([...ids].sort());
    const firstDone = worker.events.findIndex((e) => e.what === 'done');
    for (const id of ids) expect(worker.events.findIndex((e) => e.what === 'taken' && e.id === id)).toBeLessThan(firstDone);
    expect(worker.errors()).toEqual([]);
  });

  it('refresh_worker: the result carries stopPod, the job completes and the worker exits', async () => {
    const ep = await newEndpoint('refresh');
    const worker = startWorker(ep, ['--handler', 'echo', '--refresh-worker']);
    const id = await submit(ep, { hello: 'refresh' });
    expect(await untilTerminal(ep, id)).toMatchObject({ status: 'COMPLETED', output: { hello: 'refresh' } });
    await until('the worker to exit', () => (worker.exitCode === undefined ? undefined : worker.exitCode));
    expect(worker.exitCode).toBe(0);
    expect(worker.errors()).toEqual([]);

    // A handler returning `refresh_worker: true` also sends stopPod; the key leaves the output.
    const worker2 = startWorker(ep, ['--handler', 'refresh']);
    const id2 = await submit(ep, { hello: 'again' });
    expect(await untilTerminal(ep, id2)).toMatchObject({ status: 'COMPLETED', output: { hello: 'again' } });
    expect((await jobStatus(ep, id2)).output).not.toHaveProperty('refresh_worker');
    expect(worker2.errors()).toEqual([]);
  });

  it('a resent job-done is answered 2xx and changes nothing; nor does a late progress post', async () => {
    const ep = await newEndpoint('dup');
    const worker = startWorker(ep, ['--handler', 'echo']);
    const id = await submit(ep, { v: 1 });
    const done = await untilTerminal(ep, id);
    expect(done).toMatchObject({ status: 'COMPLETED', output: { v: 1 } });
    await untilEvent(worker, 'done', id);

    // What the worker's retry would send again; its sticky X-Request-ID may name another job.
    const env = gantry.workerEnv(ep, worker.workerId);
    const url = env.RUNPOD_WEBHOOK_POST_OUTPUT!.replace('$RUNPOD_POD_ID', worker.workerId).replace('$ID', id);
    const post = (body: unknown) => fetch(`${url}&isStream=false`, {
      method: 'POST',
      headers: {
        Authorization: env.RUNPOD_AI_API_KEY!,
        'Content-Type': 'application/x-www-form-urlencoded',
        charset: 'utf-8',
        'X-Request-ID': randomUUID(),
      },
      body: JSON.stringify(body),
    });
    const dup = await post({ output: { v: 1 } });
    expect(dup.status).toBeGreaterThanOrEqual(200);
    expect(dup.status).toBeLessThan(300);
    const late = await post({ status: 'IN_PROGRESS', output: 'late progress' });
    // A progress update after the result is acknowledged and not applied: the job is not reopened.
    expect(late.status).toBe(200);
    expect(await late.json()).toMatchObject({ id, applied: false });
    const after = await jobStatus(ep, id);
    expect(after).toMatchObject({ status: 'COMPLETED', output: { v: 1 } });
    expect(after.executionTime).toBe(done.executionTime);
    expect(worker.errors()).toEqual([]);
  });
});
