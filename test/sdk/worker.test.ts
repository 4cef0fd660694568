/**
 * End to end: real `gantry worker` processes (built examples in dist/) against a real
 * gateway, driven through the client routes. Needs `npm run build` first.
 */
import type { ChildProcess } from 'node:child_process';
import { spawnOwned } from '../helpers/processes.js';
import { existsSync } from 'node:fs';
import { createInterface } from 'node:readline';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { isTerminal, type GantryClient, type Job } from '../../src/sdk/client.js';
import { eventually, parkedTake, startTestGantry, type TestGantry } from '../helpers/gantry.js';

const MAIN = 'dist/src/cli/main.js';
const ECHO = 'dist/examples/echo-worker.js';
const STREAM = 'dist/examples/stream-worker.js';

interface LogLine {
  msg?: string;
  jobId?: string;
  [field: string]: unknown;
}

interface WorkerProcess {
  workerId: string;
  child: ChildProcess;
  logs: LogLine[];
  /** Resolves with the exit code (or the signal's name). */
  exited: Promise<number | string>;
  waitForLog(match: (line: LogLine) => boolean, what: string, timeoutMs?: number): Promise<LogLine>;
}

let gantry: TestGantry;
let jobs: GantryClient;
let endpointCount = 0;
const workers: WorkerProcess[] = [];

beforeAll(async () => {
  if (!existsSync(MAIN) || !existsSync(ECHO)) throw new Error('run `npm run build` first: the tests spawn dist/src/cli/main.js');
  gantry = await startTestGantry();
  jobs = gantry.client(await gantry.createKey(['run']));
});

afterEach(async () => {
  for (const w of workers.splice(0)) {
    if (w.child.exitCode === null && w.child.signalCode === null) w.child.kill('SIGKILL');
    await w.exited;
  }
});

afterAll(async () => {
  await gantry?.close();
});

async function newEndpoint(): Promise<string> {
  const id = `sdk-${process.pid}-${++endpointCount}`;
  await gantry.createEndpoint(id);
  return id;
}

function spawnWorker(file: string, endpointId: string, args: string[] = [], env: Record<string, string> = {}): WorkerProcess {
  const workerEnv = gantry.workerEnv(endpointId);
  const child = spawnOwned(process.execPath, [MAIN, 'worker', file, ...args], {
    env: { ...process.env, ...workerEnv, LOG_LEVEL: 'debug', ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const logs: LogLine[] = [];
  const listeners = new Set<() => void>();
  const lines = createInterface({ input: child.stdout! });
  lines.on('line', (line) => {
    try {
      logs.push(JSON.parse(line) as LogLine);
    } catch {
      logs.push({ msg: line });
    }
    for (const notify of [...listeners]) notify();
  });
  let stderr = '';
  child.stderr!.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
  const exited = new Promise<number | string>((resolve) => {
    child.on('exit', (code, signal) => {
      if (stderr.trim()) console.error(`worker stderr: ${stderr}`);
      resolve(code ?? signal ?? 'unknown');
      for (const notify of [...listeners]) notify();
    });
  });
  const waitForLog = (match: (line: LogLine) => boolean, what: string, timeoutMs = 10_000): Promise<LogLine> =>
    new Promise((resolve, reject) => {
      const check = (): void => {
        const found = logs.find(match);
        if (found) finish(() => resolve(found));
        else if (child.exitCode !== null || child.signalCode !== null) finish(() => reject(new Error(`worker exited before: ${what}`)));
      };
      const timer = setTimeout(() => finish(() => reject(new Error(`timed out waiting for log: ${what}`))), timeoutMs);
      const finish = (then: () => void): void => {
        clearTimeout(timer);
        listeners.delete(check);
        then();
      };
      listeners.add(check);
      check();
    });
  const worker = { workerId: workerEnv.RUNPOD_POD_ID ?? '', child, logs, exited, waitForLog };
  workers.push(worker);
  return worker;
}

const submit = async (endpointId: string, input: unknown): Promise<string> => (await jobs.run(endpointId, { input })).id;
const status = (endpointId: string, id: string): Promise<Job> => jobs.status(endpointId, id);

/** Polls status until `match` holds. */
function statusWhen(endpointId: string, id: string, match: (job: Job) => boolean, what: string, timeoutMs = 10_000): Promise<Job> {
  return eventually(async () => {
    const job = await status(endpointId, id);
    return match(job) ? job : undefined;
  }, timeoutMs, what);
}

const finished = (job: Job): boolean => isTerminal(job.status);

describe('gantry worker (real processes against a real gateway)', () => {
  it('echoes the input as the job output', async () => {
    const ep = await newEndpoint();
    const worker = spawnWorker(ECHO, ep);
    const id = await submit(ep, { hello: 'world', n: [1, 2] });
    const job = await statusWhen(ep, id, finished, 'job end');
    expect(job).toMatchObject({ status: 'COMPLETED', output: { hello: 'world', n: [1, 2] }, workerId: worker.workerId });
  });

  it('takes its connection from --url --endpoint --key --worker-id as well', async () => {
    const ep = await newEndpoint();
    const key = gantry.workerEnv(ep).RUNPOD_AI_API_KEY ?? '';
    const blank = Object.fromEntries(Object.keys(gantry.workerEnv(ep)).map((name) => [name, '']));
    spawnWorker(ECHO, ep, ['--url', gantry.url, '--endpoint', ep, '--key', key, '--worker-id', 'flag-worker'], blank);
    const id = await submit(ep, { via: 'flags' });
    expect(await statusWhen(ep, id, finished, 'job end')).toMatchObject({ status: 'COMPLETED', output: { via: 'flags' }, workerId: 'flag-worker' });
  });

  it('fails a job with the thrown error message', async () => {
    const ep = await newEndpoint();
    spawnWorker(ECHO, ep);
    const id = await submit(ep, { fail: 'kaboom: bad input' });
    const job = await statusWhen(ep, id, finished, 'job end');
    expect(job).toMatchObject({ status: 'FAILED', error: 'kaboom: bad input' });
    expect(job.output).toBeUndefined();
  });

  it('shows progress updates in status while the job runs', async () => {
    const ep = await newEndpoint();
    spawnWorker(ECHO, ep);
    const input = { progress: [{ percent: 50 }], delayMs: 3000 };
    const id = await submit(ep, input);
    const running = await statusWhen(ep, id, (j) => j.status === 'IN_PROGRESS' && j.output !== undefined, 'progress');
    expect(running.output).toEqual({ percent: 50 });
    const done = await statusWhen(ep, id, finished, 'job end');
    expect(done).toMatchObject({ status: 'COMPLETED', output: input });
  });

  it('streams generator chunks through /stream and aggregates them in the output', async () => {
    const ep = await newEndpoint();
    spawnWorker(STREAM, ep);
    const id = await submit(ep, { text: 'the quick brown fox', delayMs: 150 });
    const chunks: unknown[] = [];
    for await (const chunk of jobs.stream(ep, id)) chunks.push(chunk);
    expect(chunks).toEqual(['the', 'quick', 'brown', 'fox']);
    expect(await status(ep, id)).toMatchObject({ status: 'COMPLETED', output: ['the', 'quick', 'brown', 'fox'] });
  });

  it('with --concurrency 3 takes a batch and runs the jobs at once', async () => {
    const ep = await newEndpoint();
    const ids = await Promise.all([1, 2, 3].map((n) => submit(ep, { n, delayMs: 1500 })));
    const worker = spawnWorker(ECHO, ep, ['--concurrency', '3']);
    await eventually(async () => {
      const all = await Promise.all(ids.map((id) => status(ep, id)));
      return all.every((j) => j.status === 'IN_PROGRESS') ? all : undefined;
    }, 10_000, 'three jobs running together');
    const take = await worker.waitForLog((l) => l.msg === 'jobs taken', 'a take');
    expect(take).toMatchObject({ batch: true, asked: 3, count: 3 });
    for (const [i, id] of ids.entries()) {
      expect(await statusWhen(ep, id, finished, 'job end')).toMatchObject({ status: 'COMPLETED', output: { n: i + 1 } });
    }
  });

  it('cancel aborts the handler signal, posts no result, and frees the slot', async () => {
    const ep = await newEndpoint();
    const worker = spawnWorker(ECHO, ep);
    const slow = await submit(ep, { delayMs: 60_000 });
    await statusWhen(ep, slow, (j) => j.status === 'IN_PROGRESS', 'slow job taken');
    await jobs.cancel(ep, slow);
    await worker.waitForLog((l) => l.jobId === slow && l.msg === 'job stopped by the server; no result posted', 'stop');
    // The one slot is free again: a second job runs while the first handler would still sleep.
    const next = await submit(ep, { after: 'cancel' });
    expect(await statusWhen(ep, next, finished, 'next job end')).toMatchObject({ status: 'COMPLETED', output: { after: 'cancel' } });
    expect(await status(ep, slow)).toMatchObject({ status: 'CANCELLED' });
    expect(worker.logs.some((l) => l.jobId === slow && l.msg === 'job finished')).toBe(false);
  });

  it('SIGTERM lets the running job finish and post before the worker exits 0', async () => {
    const ep = await newEndpoint();
    const worker = spawnWorker(ECHO, ep);
    const id = await submit(ep, { delayMs: 1500, drained: true });
    await statusWhen(ep, id, (j) => j.status === 'IN_PROGRESS', 'job taken');
    worker.child.kill('SIGTERM');
    expect(await worker.exited).toBe(0);
    expect(await status(ep, id)).toMatchObject({ status: 'COMPLETED', output: { delayMs: 1500, drained: true } });
  });

  it('SIGTERM on an idle worker ends its long-polls and exits 0 at once', async () => {
    const ep = await newEndpoint();
    const worker = spawnWorker(ECHO, ep);
    // Its job-take long-poll (held 30 s by the gateway) is parked when the signal comes.
    await parkedTake(gantry.gantry, worker.workerId);
    const t0 = Date.now();
    worker.child.kill('SIGTERM');
    expect(await worker.exited).toBe(0);
    // It did not sit out the 30 s long-poll: it ended it.
    expect(Date.now() - t0).toBeLessThan(25_000);
  });

  it('a second signal while draining exits at once with 130, leaving the running job', async () => {
    const ep = await newEndpoint();
    const worker = spawnWorker(ECHO, ep);
    const id = await submit(ep, { delayMs: 60_000 });
    await statusWhen(ep, id, (j) => j.status === 'IN_PROGRESS', 'job taken');
    worker.child.kill('SIGTERM');
    await worker.waitForLog((l) => l.msg === 'worker stopping: finishing in-flight jobs', 'the first signal handled');
    worker.child.kill('SIGINT');
    expect(await worker.exited).toBe(130);
    // It did not wait for the job: the job is still running as far as the gateway knows.
    expect(await status(ep, id)).toMatchObject({ status: 'IN_PROGRESS' });
  });

  it('refresh posts stopPod and the worker stops by itself', async () => {
    const ep = await newEndpoint();
    const worker = spawnWorker(ECHO, ep);
    const id = await submit(ep, { refresh: true });
    expect(await statusWhen(ep, id, finished, 'job end')).toMatchObject({ status: 'COMPLETED', output: { refresh: true } });
    expect(await worker.exited).toBe(0);
    expect(worker.logs.some((l) => l.jobId === id && l.msg === 'refresh requested: worker stops after its in-flight jobs')).toBe(true);
  });
});
