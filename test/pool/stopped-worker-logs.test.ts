// The logs of pool workers that are gone: a worker scaled down after its idle timeout, and a
// crash-looping one stopped in its backoff, are listed as `stopped` (stop time, reason, how the
// last process ended) and their logs stay readable through the same route, within the bounds
// GANTRY_STOPPED_WORKERS_KEPT (count per endpoint) and GANTRY_STOPPED_WORKERS_KEPT_MS (age).
// Their log lines are read from the store, so they outlive the listing's bounds (docs/logs.md).
// Real gateway, real worker processes over HTTP. Needs `npm run build` (the echo worker runs dist/).
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createOffsetClock } from '../helpers/clock.js';
import { AdminApiError, type EndpointWorker } from '../../src/sdk/admin-client.js';
import { eventually, startTestGantry, type TestGantry } from '../helpers/gantry.js';

const ROOT = fileURLToPath(new URL('../..', import.meta.url));
const CLI = join(ROOT, 'dist/src/cli/main.js');
const ECHO = `echo "marker of $RUNPOD_POD_ID" && exec node ${JSON.stringify(CLI)} worker ${JSON.stringify(join(ROOT, 'dist/examples/echo-worker.js'))}`;
const CRASH = `node -e "console.error('boom: stopped-crash'); process.exit(3)"`;
const SETTINGS = { autoscalerIntervalMs: 50, workerStopGraceMs: 5_000, workerRestartBackoffMs: 300 };

const listing = (t: TestGantry, ep: string): Promise<EndpointWorker[]> => t.admin.listWorkers(ep);
const logLines = async (t: TestGantry, ep: string, id: string): Promise<string[]> => (await t.admin.workerLogs(ep, id, 500)).map((l) => `${l.stream}: ${l.line}`);
const stoppedOne = (t: TestGantry, ep: string, id?: string): Promise<EndpointWorker> =>
  eventually(async () => (await listing(t, ep)).find((w) => w.state === 'stopped' && (id === undefined || w.id === id)), 15_000, `a stopped worker of ${ep}`);

describe('logs of stopped pool workers', () => {
  let t: TestGantry;
  beforeAll(async () => {
    if (!existsSync(CLI)) throw new Error('run `npm run build` first: the pool workers run dist/src/cli/main.js');
    t = await startTestGantry(SETTINGS);
  });
  afterAll(async () => {
    await t?.close();
  });

  it('a worker scaled down after its idle timeout is listed as stopped, and its log stays readable', async () => {
    await t.createEndpoint('idle', { workersMax: 1, idleTimeout: 1, worker: { command: ECHO } });
    const { id } = await t.client().run('idle', { input: { hello: 'stopped' } });
    const job = await t.client().wait('idle', id, { timeoutMs: 30_000 });
    expect(job.status).toBe('COMPLETED');
    const workerId = job.workerId!;

    const stopped = await stoppedOne(t, 'idle', workerId);
    expect(stopped).toMatchObject({ id: workerId, state: 'stopped', managed: true, jobs: 0 });
    expect(stopped.reason).toMatch(/^scaled down \(idle for 1 s/);
    // Asked to stop (SIGTERM) and it did: said as such, never "killed by SIGTERM".
    expect(stopped.lastExit).toMatch(/^(exited with code 0|stopped by SIGTERM), as asked$/);
    expect(Date.parse(stopped.stoppedAt ?? '')).toBeGreaterThanOrEqual(Date.parse(stopped.startedAt ?? ''));
    // Gone is gone: not counted by /health, not listed again as a worker connected by hand.
    expect((await listing(t, 'idle')).filter((w) => w.id === workerId)).toHaveLength(1);
    expect((await t.client().health('idle')).workers).toMatchObject({ idle: 0, running: 0, initializing: 0, unhealthy: 0 });

    // Lines reach the store in batches (docs/logs.md): read once the last note is there.
    const lines = await eventually(async () => {
      const l = await logLines(t, 'idle', workerId);
      return l.some((x) => x.startsWith('gantry: stopped')) ? l : undefined;
    }, 10_000, 'the stop note in the stored log');
    expect(lines).toContain(`stdout: marker of ${workerId}`);
    expect(lines.some((l) => l.startsWith('gantry: stopping (scaled down'))).toBe(true);
    expect(lines.some((l) => l.startsWith('gantry: exited: '))).toBe(true);
    expect(lines.at(-1)).toMatch(/^gantry: stopped \(scaled down/);
  }, 60_000);

  it('a crash-looping worker stopped in its backoff keeps its crash output readable', async () => {
    await t.createEndpoint('crashed', { workersMax: 1, idleTimeout: 1, worker: { command: CRASH } });
    const { id } = await t.client().run('crashed', { input: { x: 1 } });
    const crashed = await eventually(async () => (await listing(t, 'crashed')).find((w) => w.state !== 'stopped' && (w.restarts ?? 0) >= 1), 30_000, 'a crash');
    // With the queue empty the waiting worker is idle, and stopped after idleTimeout.
    await t.client().cancel('crashed', id);
    const stopped = await stoppedOne(t, 'crashed', crashed.id);
    expect(stopped.reason).toMatch(/^scaled down/);
    expect(stopped.lastExit).toBe('exited with code 3');
    expect(stopped.restarts ?? 0).toBeGreaterThanOrEqual(1);
    const lines = await eventually(async () => {
      const l = await logLines(t, 'crashed', crashed.id);
      return l.some((x) => x.startsWith('gantry: stopped')) ? l : undefined;
    }, 10_000, 'the stop note in the stored log');
    expect(lines).toContain('stderr: boom: stopped-crash');
    expect(lines.some((l) => /^gantry: exited: exited with code 3/.test(l))).toBe(true);
  }, 60_000);

  it('an unknown worker still answers 404', async () => {
    const failure = await t.admin.workerLogs('idle', 'idle-00000000').catch((err: unknown) => err);
    expect(failure).toBeInstanceOf(AdminApiError);
    expect(failure).toMatchObject({ status: 404, code: 'WORKER_NOT_FOUND' });
  });
});

describe('the bounds on stopped workers', () => {
  const clock = createOffsetClock();
  let t: TestGantry;
  beforeAll(async () => {
    t = await startTestGantry({ ...SETTINGS, stoppedWorkersKept: 2, stoppedWorkersKeptMs: 60_000 }, { clock });
  });
  afterAll(async () => {
    await t?.close();
  });

  it('keeps the last N stopped workers of an endpoint, forgets the oldest, and forgets all after their time', async () => {
    // Each new worker command rolls the pool: the running worker is stopped, a new one starts.
    const command = (n: number): string => `echo "generation ${n}" && exec sleep 600`;
    await t.createEndpoint('churn', { workersMin: 1, workersMax: 1, worker: { command: command(0) } });
    const gone: string[] = [];
    for (let n = 1; n <= 3; n++) {
      const running = await eventually(async () => {
        const w = (await listing(t, 'churn')).find((x) => x.state !== 'stopped' && x.startedAt !== null);
        return w && (await logLines(t, 'churn', w.id)).includes(`stdout: generation ${n - 1}`) ? w : undefined;
      }, 20_000, `generation ${n - 1} to run`);
      await t.admin.updateEndpoint('churn', { worker: { command: command(n) } });
      await stoppedOne(t, 'churn', running.id);
      gone.push(running.id);
    }
    // Three stopped, two kept: the newest first; the oldest's log is gone.
    const stopped = (await listing(t, 'churn')).filter((w) => w.state === 'stopped');
    expect(stopped.map((w) => w.id)).toEqual([gone[2], gone[1]]);
    expect(stopped[0]?.reason).toBe("the endpoint's worker settings changed");
    expect(await logLines(t, 'churn', gone[1]!)).toContain('stdout: generation 1');
    // Forgotten by the listing, its log is still in the store (docs/logs.md: kept GANTRY_LOG_KEEP_DAYS).
    expect(await logLines(t, 'churn', gone[0]!)).toContain('stdout: generation 0');

    // Past GANTRY_STOPPED_WORKERS_KEPT_MS, none is listed; the logs stay readable.
    await clock.ahead(60_001, async () => {
      expect((await listing(t, 'churn')).filter((w) => w.state === 'stopped')).toEqual([]);
      expect(await logLines(t, 'churn', gone[2]!)).toContain('stdout: generation 2');
    });
  }, 90_000);
});
