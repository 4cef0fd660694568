// Issue 21 item 1: a stopping worker is handed nothing. The workers are the runpod-python 1.12
// stand-in (fixtures/runpod_like_worker.py), which on SIGTERM behaves as runpod-python does: its
// heartbeat stops, the job-take already open stays open, and a job that take returns is never
// run (`EVENT dropped <id>`). The take hold is long (HOLD_MS), so a take answered only by its
// hold, or a job handed through it, would show.
import type { ChildProcess } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { afterEach, describe, expect, it } from 'vitest';
import type { Job } from '../../src/sdk/client.js';
import { poolStopGraceMs, STOP_GRACE_OVER_TAKE_HOLD_MS } from '../../src/config/config.js';
import { createOffsetClock } from '../helpers/clock.js';
import { waitForJob } from '../helpers/jobs.js';
import { spawnOwned } from '../helpers/processes.js';
import { eventually, parkedTake, startTestGantry, type TestBackend, type TestGantry } from '../helpers/gantry.js';

const SCRIPT = fileURLToPath(new URL('./fixtures/runpod_like_worker.py', import.meta.url));
const HOLD_MS = 20_000;

let t: TestGantry | undefined;
const procs: ChildProcess[] = [];

afterEach(async () => {
  for (const p of procs.splice(0)) {
    if (p.exitCode === null && p.signalCode === null) {
      const exited = new Promise((resolve) => p.once('exit', resolve));
      p.kill('SIGKILL');
      await exited;
    }
  }
  await t?.close();
  t = undefined;
});

const submit = async (g: TestGantry, ep: string, input: unknown): Promise<string> => (await g.client().run(ep, { input })).id;
const ended = (g: TestGantry, ep: string, id: string): Promise<Job> => waitForJob(g.client(), ep, id, 30_000);

/** A hand-started stand-in with its stdout events and stderr (each request, with --verbose). */
function handWorker(g: TestGantry, ep: string, workerId: string): { proc: ChildProcess; out: () => string; err: () => string; exited: Promise<number | null> } {
  const base = Object.fromEntries(Object.entries(process.env).filter(([k]) => !k.startsWith('RUNPOD_')));
  const proc = spawnOwned('python3', ['-u', SCRIPT, '--handler', 'echo', '--verbose'], { env: { ...base, ...g.workerEnv(ep, workerId) }, stdio: ['ignore', 'pipe', 'pipe'] });
  procs.push(proc);
  let out = '';
  let err = '';
  proc.stdout!.setEncoding('utf8').on('data', (d: string) => (out += d));
  proc.stderr!.setEncoding('utf8').on('data', (d: string) => (err += d));
  const exited = new Promise<number | null>((resolve) => proc.once('exit', (code) => resolve(code)));
  return { proc, out: () => out, err: () => err, exited };
}

describe.each(['sqlite', 'postgres'] as TestBackend[])('a stopping worker is handed nothing (%s store)', (backend) => {
  it('a pool worker draining after idleTimeout: a job submitted during the drain goes to a fresh worker, never to the draining one', async () => {
    // The stop grace set equal to the take hold, as in the report (both 30 s): the pool's grace is derived longer (item 2).
    const g = (t = await startTestGantry({ autoscalerIntervalMs: 50, workerStopGraceMs: HOLD_MS, jobTakeWaitMs: HOLD_MS, workerRestartBackoffMs: 300 }, { backend }));
    const ep = `drain-${backend}`;
    // --linger 3: after its work is done the process stays 3 s (a teardown), so the drain lasts.
    const command = `exec python3 -u '${SCRIPT}' --handler echo --linger 3 --verbose`;
    await g.createEndpoint(ep, { workersMin: 0, workersMax: 1, idleTimeout: 1, worker: { command } });
    const view = g.gantry.gateway.autoscaler.view;
    const logLines = (id: string): { at: number; stream: string; line: string }[] => view.logs(ep, id, 500) ?? [];
    const log = (id: string): string[] => logLines(id).map((l) => l.line);

    // A cold start for the first job; then the worker idles past idleTimeout and the pool stops it.
    const first = await ended(g, ep, await submit(g, ep, { n: 1 }));
    const draining = first.workerId!;
    await eventually(async () => (log(draining).some((l) => l.includes('EVENT sigterm')) ? true : undefined), 20_000, 'the idle worker to get SIGTERM');
    const id = await submit(g, ep, { n: 2 });
    // The drain is on: the draining worker has not exited (it lingers), and its open take was answered at once.
    expect(log(draining).some((l) => l.includes('EVENT exiting'))).toBe(false);
    expect(view.workers(ep)?.find((w) => w.id === draining)?.state).toBe('draining');

    const job = await ended(g, ep, id);
    expect(job).toMatchObject({ status: 'COMPLETED', output: { n: 2 } });
    expect(job.workerId).not.toBe(draining);
    await eventually(async () => (view.stoppedWorkers(ep)?.some((w) => w.id === draining) ? true : undefined), 20_000, 'the draining worker to exit');
    const lines = logLines(draining);
    expect(lines.filter((l) => l.line.includes(id))).toEqual([]);
    expect(lines.some((l) => l.line.includes('EVENT dropped'))).toBe(false);
    // Once the pool stopped it (its own note, written before the SIGTERM): the take it had open
    // answered 204 long before its hold, no new take, a clean exit.
    const stopping = lines.find((l) => l.stream === 'gantry' && l.line.startsWith('stopping ('))!;
    const takes = lines.filter((l) => l.at >= stopping.at && l.line.includes('/job-take/'));
    expect(takes.map((l) => l.line.replace(/.* -> /, ''))).toEqual(['204']);
    expect(takes[0]!.at - stopping.at).toBeLessThan(HOLD_MS / 2);
    expect(lines.some((l) => l.line.includes('EVENT exiting'))).toBe(true);
    expect(stopping.line).toMatch(new RegExp(`^stopping \\(.*\\): SIGTERM, up to ${HOLD_MS + STOP_GRACE_OVER_TAKE_HOLD_MS} ms to finish its jobs$`));
    expect(view.stoppedWorkers(ep)?.find((w) => w.id === draining)?.lastExit).toBe('exited with code 0, as asked');
    // Figures for the record (GANTRY_TEST_FIGURES=1): the fresh worker's cold start and the job's wait.
    const fresh = view.workers(ep)?.find((w) => w.id === job.workerId);
    if (process.env.GANTRY_TEST_FIGURES) console.log(`drain (${backend}): job delayTime ${String(job.delayTime)} ms; fresh worker ready ${(fresh?.readyAt ?? 0) - (fresh?.startedAt ?? 0)} ms after its start`);
  }, 60_000);

  it('a hand worker SIGTERMed while its take is parked: once it is silent its take is answered empty and a new job is not handed to it', async () => {
    const clock = createOffsetClock();
    const g = (t = await startTestGantry({ jobTakeWaitMs: HOLD_MS }, { backend, clock }));
    const ep = `sigterm-${backend}`;
    await g.createEndpoint(ep);
    const w = handWorker(g, ep, `hand-${backend}`);
    await parkedTake(g.gantry, `hand-${backend}`);
    // Three pings (1 s apart): the gateway has learned this worker's interval.
    await eventually(async () => ((w.err().match(/\/ping\/\S+ -> 200$/gm) ?? []).length >= 3 ? true : undefined), 15_000, 'three pings');
    w.proc.kill('SIGTERM');
    await eventually(async () => (w.out().includes('EVENT sigterm') ? true : undefined), 10_000, 'the worker to take the signal');
    const pings = (w.err().match(/\/ping\//g) ?? []).length;

    // On the gateway's clock, 10 s later: the worker is silent (it pings every 1 s).
    const id = await clock.ahead(10_000, async () => {
      const jobId = await submit(g, ep, { n: 1 });
      // Its take is answered: empty (by the dispatch of this job or the sweep of silent takes).
      const answer = await eventually(async () => /job-take\/\S+ -> (\d+)$/m.exec(w.err().slice(w.err().indexOf('received signal')))?.[1], 10_000, 'the parked take to be answered');
      expect(answer).toBe('204');
      return jobId;
    });
    expect(w.out()).not.toContain('EVENT dropped');
    expect(w.out()).not.toContain('EVENT taken');
    expect((w.err().match(/\/ping\//g) ?? []).length).toBe(pings);
    expect((await g.client().status(ep, id)).status).toBe('IN_QUEUE');
    expect(g.gantry.gateway.takeQueue.waitingWorkers()).toEqual([]);

    // A fresh worker runs it.
    handWorker(g, ep, `fresh-${backend}`);
    expect(await ended(g, ep, id)).toMatchObject({ status: 'COMPLETED', workerId: `fresh-${backend}` });
  }, 60_000);
});

describe('the pool\'s stop grace', () => {
  it('is longer than the take hold whatever is set (runpod-python exits once its open take is answered)', () => {
    expect(poolStopGraceMs({ workerStopGraceMs: 30_000, jobTakeWaitMs: 30_000 })).toBe(35_000);
    expect(poolStopGraceMs({ workerStopGraceMs: 1_000, jobTakeWaitMs: 60_000 })).toBe(65_000);
    expect(poolStopGraceMs({ workerStopGraceMs: 0, jobTakeWaitMs: 0 })).toBe(STOP_GRACE_OVER_TAKE_HOLD_MS);
    expect(poolStopGraceMs({ workerStopGraceMs: 120_000, jobTakeWaitMs: 30_000 })).toBe(120_000);
  });
});
