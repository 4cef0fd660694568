// End to end: the autoscaler starting and stopping REAL worker processes against a real
// gateway — the Gantry SDK echo worker (`gantry worker dist/examples/echo-worker.js`, drains on
// SIGTERM) and the runpod-python 1.12 stand-in (test/e2e/fixtures/runpod_like_worker.py).
// Needs `npm run build` (the workers run the compiled CLI). Short settings: pass every 50 ms,
// idleTimeout 1 s, crash backoff from 300 ms.
import { execFile } from 'node:child_process';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { PoolWorkerInfo } from '../../src/jobs/pool-view.js';
import type { EndpointWorker } from '../../src/sdk/admin-client.js';
import { isTerminal, type EndpointHealth, type Job, type JobPolicy } from '../../src/sdk/client.js';
import { createSqliteStore } from '../../src/store/sqlite/sqlite-store.js';
import type { Clock } from '../../src/util/clock.js';
import { createOffsetClock } from '../helpers/clock.js';
import { eventually, startTestGantry, type TestGantry } from '../helpers/gantry.js';
import { waitForJobs } from '../helpers/jobs.js';

const ROOT = fileURLToPath(new URL('../..', import.meta.url));
const CLI = join(ROOT, 'dist/src/cli/main.js');
const ECHO = `node ${JSON.stringify(CLI)} worker ${JSON.stringify(join(ROOT, 'dist/examples/echo-worker.js'))}`;
const PYTHON = `python3 -u ${JSON.stringify(join(ROOT, 'test/e2e/fixtures/runpod_like_worker.py'))} --handler echo`;
const CRASH = `node -e "console.error('boom: missing model'); process.exit(3)"`;
const SETTINGS = { autoscalerIntervalMs: 50, workerStopGraceMs: 10_000, workerRestartBackoffMs: 300 };

let t: TestGantry;
/** `t`'s clock: moved ahead to let an idleTimeout pass without waiting for it. */
const offsetClock = createOffsetClock();
/** How often the autoscaler's pass timer has fired on `t` (see autoscalerPasses). */
let passTimers = 0;
/**
 * The same clock, counting the autoscaler's pass timer: the gateway's only timer of
 * autoscalerIntervalMs (the reaper's, the webhook sender's and the PostgreSQL poller's are 1 s or more).
 */
const clock: Clock = {
  now: offsetClock.now,
  after: (ms, fn) => offsetClock.after(ms, ms === SETTINGS.autoscalerIntervalMs ? () => (passTimers++, fn()) : fn),
};

/**
 * Waits until `n` whole autoscaler passes have started and ended after this call, checking
 * `each` meanwhile. The pass timer is set only when a pass ends and nothing else runs, and its
 * firing starts a pass at once: so n + 1 firings after the call hold n whole passes.
 */
async function autoscalerPasses(n: number, each: () => void = () => {}): Promise<void> {
  const from = passTimers;
  await eventually(async () => {
    each();
    return passTimers >= from + n + 1 ? true : undefined;
  }, 15_000, `${n} autoscaler passes`);
  each();
}

const submit = async (ep: string, input: unknown, policy?: JobPolicy): Promise<string> => (await t.client().run(ep, { input, ...(policy ? { policy } : {}) })).id;
const status = (ep: string, id: string): Promise<Job> => t.client().status(ep, id);
const health = async (ep: string): Promise<EndpointHealth['workers']> => (await t.client().health(ep)).workers;
const poolWorkers = (ep: string): Promise<EndpointWorker[]> => t.admin.listWorkers(ep);
/** In-process view of the pool (cheaper than HTTP when sampling often). */
const pool = (ep: string): PoolWorkerInfo[] => t.gantry.gateway.autoscaler.view.workers(ep) ?? [];
/** `gantry <args>` against the test gateway; its stdout. */
const cli = async (...args: string[]): Promise<string> =>
  (await promisify(execFile)('node', [CLI, ...args, '--url', t.url, '--admin-key', t.adminKey])).stdout;

const allTerminal = (ep: string, ids: string[]): Promise<Job[]> => waitForJobs(t.client(), ep, ids, 20_000);

beforeAll(async () => {
  if (!existsSync(CLI)) throw new Error('run `npm run build` first: the pool workers run dist/src/cli/main.js');
  t = await startTestGantry(SETTINGS, { clock });
});

afterAll(async () => {
  await t.close();
});

describe('autoscaler with real worker processes', () => {
  it('from 0 workers, a burst starts up to workersMax workers, all jobs complete, idle workers stop after idleTimeout', async () => {
    await t.createEndpoint('burst', { workersMax: 3, idleTimeout: 1, scalerType: 'REQUEST_COUNT', scalerValue: 1, worker: { command: ECHO } });
    expect(await poolWorkers('burst')).toEqual([]);
    const ids = await Promise.all(Array.from({ length: 8 }, (_, i) => submit('burst', { n: i, delayMs: 300 })));
    let most = 0;
    let throttled = 0;
    const jobs = await eventually(async () => {
      most = Math.max(most, pool('burst').length);
      throttled = Math.max(throttled, (await health('burst')).throttled ?? 0);
      const all = await Promise.all(ids.map((id) => status('burst', id)));
      return all.every((j) => isTerminal(j.status)) ? all : undefined;
    }, 30_000, 'the burst to finish');
    expect(jobs.map((j) => j.status)).toEqual(ids.map(() => 'COMPLETED'));
    expect(most).toBe(3);
    expect(new Set(jobs.map((j) => j.workerId)).size).toBeLessThanOrEqual(3);
    expect(throttled).toBeGreaterThan(0); // 8 wanted (REQUEST_COUNT 1), 3 allowed

    await eventually(async () => ((await poolWorkers('burst')).every((w) => w.state === 'stopped') ? true : undefined), 15_000, 'idle workers to stop');
    expect(await health('burst')).toEqual({ idle: 0, initializing: 0, ready: 0, running: 0, throttled: 0, unhealthy: 0 });
  });

  it('keeps workersMin running (a runpod-python worker, unchanged) and runs jobs on it', async () => {
    await t.createEndpoint('min', { workersMin: 1, idleTimeout: 1, worker: { command: PYTHON } });
    const [worker] = await eventually(async () => {
      const list = await poolWorkers('min');
      return list.length === 1 && list[0]?.state === 'idle' ? list : undefined;
    }, 15_000, 'the workersMin worker');
    expect(worker).toMatchObject({ managed: true, restarts: 0, reason: null });
    expect(worker?.pid).toBeGreaterThan(0);
    const id = await submit('min', { hello: 'python' });
    const [job] = await allTerminal('min', [id]);
    expect(job).toMatchObject({ status: 'COMPLETED', output: { hello: 'python' }, workerId: worker?.id });
    // A pass sees the worker idle (idle since then); passes 2 s later on the gateway's clock, well
    // past idleTimeout (1 s), keep it: the same single worker, idle, not draining.
    await autoscalerPasses(1);
    const kept = (): void => expect(pool('min').map((w) => [w.id, w.state])).toEqual([[worker?.id, 'idle']]);
    await offsetClock.ahead(2_000, () => autoscalerPasses(2, kept));
    expect((await health('min')).idle).toBe(1);
  });

  it('lowPriority jobs alone start nothing; they run on workers that exist', async () => {
    await t.createEndpoint('low', { workersMax: 2, idleTimeout: 1, worker: { command: PYTHON } });
    const low = await submit('low', { kind: 'low' }, { lowPriority: true });
    // Whole autoscaler passes that saw the queued job (and its jobs-available event): still no worker.
    await autoscalerPasses(3, () => expect(pool('low')).toEqual([]));
    expect(await status('low', low)).toMatchObject({ status: 'IN_QUEUE' });
    expect(await health('low')).toMatchObject({ initializing: 0, idle: 0, running: 0 });

    const normal = await submit('low', { kind: 'normal' });
    const jobs = await allTerminal('low', [low, normal]);
    expect(jobs.map((j) => j.status)).toEqual(['COMPLETED', 'COMPLETED']);
    expect(jobs[0]?.workerId).toBe(jobs[1]?.workerId); // one worker, started for the normal job
  });

  it('a crash-looping worker command shows as unhealthy with its reason in health, the admin API and its log', async () => {
    await t.createEndpoint('crash', { workersMax: 2, worker: { command: CRASH } });
    const id = await submit('crash', { x: 1 });
    await eventually(async () => ((await health('crash')).unhealthy === 1 ? true : undefined), 15_000, 'health to show the crash loop');
    const [worker] = await poolWorkers('crash');
    expect(worker).toMatchObject({ state: 'unhealthy', managed: true });
    expect(worker?.reason).toMatch(/exited with code 3 \(\d+ times in a row\): boom: missing model/);
    expect(worker?.restarts).toBeGreaterThanOrEqual(2);
    expect(pool('crash')).toHaveLength(1); // backing off, not multiplying

    // Lines reach the store in batches (docs/logs.md).
    const lines = await eventually(async () => {
      const l = (await t.admin.workerLogs('crash', worker?.id ?? '', 50)).map((x) => `${x.stream}: ${x.line}`);
      return l.some((x) => /^gantry: restarting in/.test(x)) ? l : undefined;
    }, 10_000, 'the crash notes in the stored log');
    expect(lines).toContain('stderr: boom: missing model');
    expect(lines.some((l) => /^gantry: exited: exited with code 3/.test(l))).toBe(true);
    expect(lines.some((l) => /^gantry: restarting in/.test(l))).toBe(true);
    expect(await status('crash', id)).toMatchObject({ status: 'IN_QUEUE' });

    // The same through the CLI.
    const table = await cli('endpoints', 'workers', 'crash');
    expect(table).toMatch(/^ID +STATE +MANAGED +PID +HOST +CONTAINER +JOBS +RESTARTS +STARTED +REASON/);
    expect(table).toMatch(new RegExp(`${worker?.id} +unhealthy +pool .*boom: missing model`));
    const tail = await cli('endpoints', 'logs', 'crash', worker?.id ?? '', '--lines', '20');
    expect(tail).toMatch(/Z -  +boom: missing model$/m);

    await expect(t.admin.workerLogs('crash', 'nope')).rejects.toMatchObject({ status: 404, code: 'WORKER_NOT_FOUND' });
    await expect(t.admin.workerLogs('crash', worker?.id ?? '', 0)).rejects.toMatchObject({ status: 400 });
    await t.admin.deleteEndpoint('crash');
    await eventually(async () => (t.gantry.gateway.autoscaler.view.workers('crash') === undefined ? true : undefined), 10_000, 'the pool to close');
  });

  it('a worker killed mid-job (SIGKILL) has its job requeued at once and finished by another', async () => {
    await t.createEndpoint('kill', { workersMin: 2, workersMax: 2, idleTimeout: 60, worker: { command: ECHO } });
    await eventually(async () => ((await health('kill')).idle === 2 ? true : undefined), 15_000, 'two idle workers');
    const id = await submit('kill', { delayMs: 1_500 });
    const victim = await eventually(async () => {
      const job = await status('kill', id);
      return job.status === 'IN_PROGRESS' ? job.workerId : undefined;
    }, 10_000, 'the job to start');
    const pid = pool('kill').find((w) => w.id === victim)?.pid;
    expect(pid).toBeGreaterThan(0);
    process.kill(pid ?? 0, 'SIGKILL');

    const [job] = await allTerminal('kill', [id]);
    expect(job).toMatchObject({ status: 'COMPLETED', output: { delayMs: 1_500 } });
    expect(job?.workerId).not.toBe(victim);
    expect((await t.gantry.gateway.jobs.getJob('kill', id))?.attempts).toBe(2);
    // The killed worker is restarted (it crashed once: initializing, not unhealthy).
    await eventually(async () => ((await health('kill')).idle === 2 ? true : undefined), 15_000, 'the killed worker to come back');
    expect((await poolWorkers('kill')).find((w) => w.id === victim)?.restarts).toBe(1);
  });

  it('stopPod from a worker recycles it', async () => {
    await t.createEndpoint('recycle', { workersMin: 1, idleTimeout: 60, worker: { command: ECHO } });
    const first = await eventually(async () => pool('recycle').find((w) => w.state === 'idle')?.id, 15_000, 'a worker');
    const [job] = await allTerminal('recycle', [await submit('recycle', { refresh: true })]);
    expect(job).toMatchObject({ status: 'COMPLETED', workerId: first });
    const next = await eventually(async () => {
      const list = pool('recycle');
      return list.length === 1 && list[0]?.id !== first && list[0]?.state === 'idle' ? list[0].id : undefined;
    }, 15_000, 'the recycled worker to be replaced');
    expect(next).not.toBe(first);
  });

  it('an endpoint update rolls its workers: the old ones drain their jobs, new ones start, no job lost', async () => {
    await t.createEndpoint('roll', { workersMin: 1, workersMax: 2, idleTimeout: 60, scalerType: 'REQUEST_COUNT', scalerValue: 1, worker: { command: ECHO } });
    await eventually(async () => ((await health('roll')).idle === 1 ? true : undefined), 15_000, 'the first worker');
    const before = await Promise.all([1, 2, 3].map((n) => submit('roll', { n, delayMs: 700 })));
    await eventually(async () => ((await health('roll')).running === 2 ? true : undefined), 15_000, 'two busy workers');
    const old = new Set(pool('roll').map((w) => w.id));
    const running = (await Promise.all(before.map((id) => status('roll', id)))).filter((j) => j.status === 'IN_PROGRESS');

    const newCommand = `${ECHO} --concurrency 1`;
    await t.admin.updateEndpoint('roll', { worker: { command: newCommand } });
    const after = await Promise.all([4, 5].map((n) => submit('roll', { n, delayMs: 100 })));

    const jobs = await allTerminal('roll', [...before, ...after]);
    expect(jobs.map((j) => j.status)).toEqual([...before, ...after].map(() => 'COMPLETED'));
    // Jobs running at the update were finished by their (draining) workers, not requeued.
    for (const r of running) expect(jobs.find((j) => j.id === r.id)?.workerId).toBe(r.workerId);
    expect(old.has(jobs.at(-1)?.workerId ?? '')).toBe(false);

    const fresh = await eventually(async () => {
      const list = pool('roll');
      return list.length > 0 && list.every((w) => !old.has(w.id)) ? list : undefined;
    }, 20_000, 'only new workers');
    await eventually(async () => (JSON.stringify(await t.admin.workerLogs('roll', fresh[0]?.id ?? '')).includes('--concurrency 1') ? true : undefined), 10_000, 'the started note in the stored log');
  });
});

// Reads the job back from the SQLite file once the gateway is closed.
describe.skipIf(process.env.GANTRY_TEST_BACKEND === 'postgres')('gateway shutdown', () => {
  it('drains pool workers: a running job finishes before the gateway is gone', async () => {
    const g = await startTestGantry(SETTINGS);
    const file = join(g.dataDir, 'gantry.db');
    let id = '';
    try {
      await g.createEndpoint('drain', { worker: { command: ECHO } });
      id = (await g.client().run('drain', { input: { progress: ['started'], delayMs: 800 } })).id;
      // The worker has the job once its handler's progress is in: IN_PROGRESS alone is the claim,
      // and a take answer still on its way when the worker gets SIGTERM is rightly returned to the queue.
      const started = async (): Promise<true | undefined> => {
        const job = await g.gantry.gateway.jobs.getJob('drain', id);
        return job?.status === 'IN_PROGRESS' && job.outputJson === '"started"' ? true : undefined;
      };
      await eventually(started, 15_000, 'the job to start');
      await g.gantry.close();
      const store = createSqliteStore({ file });
      try {
        expect(await store.getJob(id)).toMatchObject({ status: 'COMPLETED', outputJson: '{"progress":["started"],"delayMs":800}' });
      } finally {
        await store.close();
      }
    } finally {
      await g.close();
    }
  });
});
