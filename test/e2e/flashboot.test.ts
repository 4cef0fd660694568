// End to end: flashboot's warm pool on a real Docker engine (test/fixtures/docker/engines.sh,
// with the stand-in NVIDIA hook): engine a declares one L4. An idle worker of a flashboot
// endpoint is paused, not removed, its GPU still held; the next job resumes the same container;
// another endpoint that needs the GPU reclaims the paused one first. Cold starts are counted and
// timed in the admin API and /metrics. Real containers, the runpod-python stand-in as the worker.
// Again on Podman's Docker-compatible service where it answers (engines.sh podman): there the
// workers ask for no GPU (the driver refuses GPU workers on Podman, which would drop the device
// request), so the pause and resume run and the GPU reclaim does not apply.
import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { ColdStartStats, PoolWorkerInfo } from '../../src/jobs/pool-view.js';
import { containersOf, enginesFor, findPodmanEngine, findTestEngines, hostConfig, inspect, type TestEngine } from '../fixtures/docker/test-engines.js';
import { ensureWorkerImage } from '../fixtures/docker/test-images.js';
import { eventually, startTestGantry, type TestGantry } from '../helpers/gantry.js';
import { histogram, scrape, value } from '../metrics/scrape.js';

type Json = Record<string, unknown>;

const engines = await findTestEngines();
const podman = await findPodmanEngine();
const targets = [...(enginesFor(engines, 1) ? [engines[0] as TestEngine] : []), ...(podman ? [podman] : [])];
const TERMINAL = new Set(['COMPLETED', 'FAILED', 'CANCELLED', 'TIMED_OUT']);

describe.skipIf(targets.length === 0)('flashboot: a warm pool of paused containers', () => {
  for (const engine of targets) describe(engine.engine, { timeout: 180_000 }, () => suite(engine));
});

function suite(engine: TestEngine): void {
  /** Podman: no GPU (see the top); Docker: one L4 a worker. */
  const gpu = !/podman/i.test(engine.engine);
  const instance = `test-${randomBytes(4).toString('hex')}`;
  let t: TestGantry;
  let image: string;

  async function api(method: string, path: string, body?: unknown): Promise<Json> {
    const res = await fetch(`${t.url}${path}`, {
      method,
      headers: { authorization: `Bearer ${t.adminKey}`, 'content-type': 'application/json' },
      ...(body === undefined ? {} : { body: JSON.stringify(body) }),
    });
    const json = (await res.json()) as Json;
    if (res.status !== 200) throw new Error(`${method} ${path}: ${res.status} ${JSON.stringify(json)}`);
    return json;
  }
  const pool = (ep: string): PoolWorkerInfo[] => t.gantry.gateway.autoscaler.view.workers(ep) ?? [];
  const ours = async (ep: string) => (await containersOf(engine, instance)).filter((c) => c.Labels['io.gantry.endpoint'] === ep);
  const run = async (ep: string, input: Json): Promise<Json> => {
    const id = (await api('POST', `/v2/${ep}/run`, { input })).id as string;
    return eventually(async () => {
      const job = await api('GET', `/v2/${ep}/status/${id}`);
      return TERMINAL.has(job.status as string) ? job : undefined;
    }, 90_000, `the job of ${ep} to end`);
  };
  const listing = async (ep: string) => (await api('GET', `/admin/v1/endpoints/${ep}/workers`)) as { workers: (PoolWorkerInfo & Json)[]; hosts: Json[]; coldStarts: Omit<ColdStartStats, 'buckets'> | null };
  /** One L4 a worker (none on Podman), one worker at most, stopped (or paused) after a second idle. */
  const endpoint = (id: string, settings: Json): Promise<Json> =>
    api('POST', '/admin/v1/endpoints', { id, workersMax: 1, idleTimeout: 1, ...settings, worker: { image, ...(gpu ? { gpus: 1, gpuTypes: ['L4'] } : {}), env: { WORKER_HANDLER: 'echo' } } });

  beforeAll(async () => {
    image = await ensureWorkerImage(engine);
    t = await startTestGantry({
      host: '0.0.0.0',
      autoscalerIntervalMs: 100,
      workerStopGraceMs: 5_000,
      workerRestartBackoffMs: 300,
      docker: { hosts: [hostConfig(engine.url, 'a', { L4: 1 })], defaultHost: false, pingIntervalMs: 200, downAfterMs: 5_000, instance },
    });
  }, 300_000);

  afterAll(async () => {
    await t?.close();
    // Paused containers are removed with the rest when the gateway closes.
    expect(await containersOf(engine, instance)).toEqual([]);
  });

  it('pauses an idle worker (its GPU held, where it has one), resumes the same container for the next job, and times both cold starts', async () => {
    await endpoint('warm', { flashboot: true });
    const first = await run('warm', { n: 1 });
    expect(first).toMatchObject({ status: 'COMPLETED', output: { n: 1 } });
    const workerId = first.workerId as string;

    // Idle for a second: paused, not removed. The container is there, frozen, and still holds the GPU.
    const paused = await eventually(async () => pool('warm').find((w) => w.id === workerId && w.state === 'paused'), 30_000, 'the idle worker to be paused');
    const [container] = await ours('warm');
    expect(container?.Id.slice(0, 12)).toBe(paused.container);
    await eventually(async () => ((await inspect(engine, container!.Id)).State.Paused === true ? true : undefined), 10_000, 'the engine to say paused');
    const whilePaused = await listing('warm');
    expect(whilePaused.workers.map((w) => [w.id, w.state])).toEqual([[workerId, 'paused']]);
    if (gpu) expect(whilePaused.hosts).toMatchObject([{ name: 'a', gpusInUse: 1, gpuTypes: { L4: { gpus: 1, inUse: 1 } } }]);
    // A paused worker is neither ready nor idle for /health.
    expect((await api('GET', '/v2/warm/health')).workers).toMatchObject({ idle: 0, ready: 0, initializing: 0 });

    // The next job resumes it: the same worker in the same container, unpaused.
    const second = await run('warm', { n: 2 });
    expect(second).toMatchObject({ status: 'COMPLETED', output: { n: 2 }, workerId });
    expect((await ours('warm')).map((c) => c.Id)).toEqual([container!.Id]);
    // Both cold starts counted: the first a new container, the second a resume.
    const { coldStarts } = await eventually(async () => {
      const l = await listing('warm');
      return l.coldStarts?.resume.count === 1 ? l : undefined;
    }, 10_000, 'the resume to be counted');
    expect(coldStarts).toMatchObject({ count: 2, window: 2, start: { count: 1, window: 1 }, resume: { count: 1, window: 1 } });
    for (const q of [coldStarts!.p70Ms, coldStarts!.p90Ms, coldStarts!.p98Ms, coldStarts!.start.p90Ms, coldStarts!.resume.p90Ms]) expect(q).toEqual(expect.any(Number));
    // p98 over both is the slower of the two; each kind's quantiles are its one duration.
    expect(coldStarts!.p98Ms).toBe(Math.max(coldStarts!.start.p98Ms!, coldStarts!.resume.p98Ms!));

    // Its log tells the story: paused, resumed for the job, ready again; started once.
    // (Lines reach the store in batches: read until the last one is there.)
    const log = await eventually(async () => {
      const lines = ((await api('GET', `/admin/v1/endpoints/warm/workers/${workerId}/logs?lines=500`)).lines as { stream: string; line: string }[]).filter((l) => l.stream === 'gantry').map((l) => l.line);
      return lines.some((line) => /^ready: first poll \d+ ms after resume$/.test(line)) ? lines : undefined;
    }, 10_000, 'the resume to be logged');
    const at = (pattern: RegExp): number => log.findIndex((line) => pattern.test(line));
    expect(at(/^paused$/)).toBeGreaterThan(at(/^pausing \(scaled down/));
    expect(at(/^resuming \(/)).toBeGreaterThan(at(/^paused$/));
    expect(at(/^ready: first poll \d+ ms after resume$/)).toBeGreaterThan(at(/^resuming \(/));
    expect(log.filter((line) => line.startsWith('started: ')).length).toBe(1);

    const families = await scrape(t.url, t.adminKey);
    expect(value(families, 'gantry_cold_starts_total', { endpoint: 'warm', kind: 'start' })).toBe(1);
    expect(value(families, 'gantry_cold_starts_total', { endpoint: 'warm', kind: 'resume' })).toBe(1);
    const resumeHistogram = histogram(families, 'gantry_cold_start_seconds', { endpoint: 'warm', kind: 'resume' });
    expect(resumeHistogram.count).toBe(1);
    expect(resumeHistogram.sum).toBeCloseTo(coldStarts!.resume.lastMs! / 1000, 2);
    for (const quantile of ['0.7', '0.9', '0.98']) {
      expect(value(families, 'gantry_cold_start_recent_seconds', { endpoint: 'warm', kind: 'all', quantile })).toBeGreaterThan(0);
    }
    expect(value(families, 'gantry_cold_start_recent_seconds', { endpoint: 'warm', kind: 'resume', quantile: '0.9' })).toBeCloseTo(coldStarts!.resume.p90Ms! / 1000, 3);
  });

  it.skipIf(!gpu)('another endpoint that needs the GPU reclaims the paused container first, whatever its priority', async () => {
    const warm = await eventually(async () => pool('warm').find((w) => w.state === 'paused'), 30_000, 'warm to be paused again');
    const [container] = await ours('warm');
    // A lower priority than warm's: a paused worker is anyone's to reclaim.
    await endpoint('other', { priority: 10 });
    const job = await run('other', { other: true });
    expect(job).toMatchObject({ status: 'COMPLETED', output: { other: true } });
    // warm's paused container was removed for it, and said why.
    expect(await ours('warm')).toEqual([]);
    expect(pool('warm')).toEqual([]);
    const stopped = t.gantry.gateway.autoscaler.view.stoppedWorkers('warm') ?? [];
    expect(stopped.find((w) => w.id === warm.id)?.reason).toMatch(/^reclaimed for `other` \(priority 10\): 1 L4 on a, paused in the warm pool$/);
    expect(container).toBeDefined();
    // warm's next job gets a new container once other's worker is gone (idle, no flashboot).
    const again = await run('warm', { n: 3 });
    expect(again).toMatchObject({ status: 'COMPLETED', output: { n: 3 } });
    expect(again.workerId).not.toBe(warm.id);
    await api('DELETE', '/admin/v1/endpoints/other');
    await api('DELETE', '/admin/v1/endpoints/warm');
    await eventually(async () => ((await containersOf(engine, instance)).length === 0 ? true : undefined), 30_000, 'the containers to go');
  });
}
