// End to end: the fleet over two Docker engines standing in for GPU hosts of two models
// (test/fixtures/docker/engines.sh, with the stand-in NVIDIA hook): engine a declares
// {"L4": 2}, engine b {"A100-80GB": 1}. Real containers, the runpod-python stand-in as the
// worker, the real autoscaler and allocator.
import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { PoolHostInfo, PoolWorkerInfo } from '../../src/jobs/pool-view.js';
import { containersOf, enginesFor, findTestEngines, hostConfig, inspect, type TestEngine } from '../fixtures/docker/test-engines.js';
import { ensureWorkerImage } from '../fixtures/docker/test-images.js';
import { eventually, startTestGantry, type TestGantry } from '../helpers/gantry.js';

type Json = Record<string, unknown>;

const engines = await findTestEngines();

describe.skipIf(!enginesFor(engines, 2))('the fleet over two Docker hosts with GPU models', { timeout: 240_000 }, () => {
  const [a, b] = engines as [TestEngine, TestEngine];
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
  const listing = async (ep: string): Promise<{ workers: (PoolWorkerInfo & Json)[]; hosts: (PoolHostInfo & Json)[] }> => (await api('GET', `/admin/v1/endpoints/${ep}/workers`)) as never;
  const pool = (ep: string): PoolWorkerInfo[] => t.gantry.gateway.autoscaler.view.workers(ep) ?? [];
  /** Our containers on both engines (of one endpoint, when named). */
  const ours = async (ep?: string): Promise<number> =>
    [...(await containersOf(a, instance)), ...(await containersOf(b, instance))].filter((c) => ep === undefined || c.Labels['io.gantry.endpoint'] === ep).length;
  const removeEndpoint = async (ep: string): Promise<void> => {
    await api('DELETE', `/admin/v1/endpoints/${ep}`);
    await eventually(async () => ((await ours(ep)) === 0 ? true : undefined), 30_000, `the containers of ${ep} to go`);
  };

  beforeAll(async () => {
    const images = await Promise.all([ensureWorkerImage(a), ensureWorkerImage(b)]);
    image = images[0]!;
    t = await startTestGantry({
      host: '0.0.0.0',
      autoscalerIntervalMs: 100,
      workerStopGraceMs: 5_000,
      workerRestartBackoffMs: 300,
      docker: { hosts: [hostConfig(a.url, 'a', { L4: 2 }), hostConfig(b.url, 'b', { 'A100-80GB': 1 })], defaultHost: false, pingIntervalMs: 200, downAfterMs: 5_000, instance },
    });
  }, 300_000);

  afterAll(async () => {
    await t?.close();
    expect(await ours()).toBe(0);
  });

  it('places typed GPU workers in the order of worker.gpuTypes, and a throttled worker names the full models', async () => {
    const worker = { image, gpus: 1, gpuTypes: ['L4', 'A100-80GB'] };
    await t.createEndpoint('typed', { workersMin: 1, workersMax: 4, idleTimeout: 60, worker });
    // L4 first: on a, though b's single A100 would bin-pack better (b left with none free).
    const first = await eventually(async () => pool('typed').find((w) => w.state === 'idle'), 60_000, 'the first typed worker');
    expect(first.host).toBe('a');
    await api('PATCH', '/admin/v1/endpoints/typed', { workersMin: 2 });
    await eventually(async () => (pool('typed').filter((w) => w.state === 'idle').length === 2 ? true : undefined), 60_000, 'two idle');
    expect(pool('typed').map((w) => w.host)).toEqual(['a', 'a']);
    // Then the second preference, b's A100; then nothing is left of either model.
    await api('PATCH', '/admin/v1/endpoints/typed', { workersMin: 4 });
    await eventually(async () => (pool('typed').filter((w) => w.state === 'idle').length === 3 && pool('typed').some((w) => w.state === 'throttled') ? true : undefined), 60_000, 'three idle and one throttled');
    const { workers, hosts } = await listing('typed');
    expect(workers.filter((w) => w.state === 'idle').map((w) => w.host).sort()).toEqual(['a', 'a', 'b']);
    const waiting = workers.find((w) => w.state === 'throttled');
    expect(waiting?.reason).toBe('waiting for room: no Docker host has 1 free L4 or A100-80GB GPU (a: 0 of 2 L4 free; b: 0 of 1 A100-80GB free); 2 L4 + 1 A100-80GB held by `typed` at priority 50');
    expect(hosts.map((h) => [h.name, h.gpuTypes])).toEqual([
      ['a', { L4: { gpus: 2, inUse: 2 } }],
      ['b', { 'A100-80GB': { gpus: 1, inUse: 1 } }],
    ]);
    // The containers got the devices placement chose, each once.
    const requests: string[] = [];
    for (const [engine, name] of [[a, 'a'], [b, 'b']] as const) {
      for (const c of await containersOf(engine, instance)) {
        const [request] = (await inspect(engine, c.Id)).HostConfig.DeviceRequests as { DeviceIDs: string[] }[];
        requests.push(`${name}:${request?.DeviceIDs.join(',')}`);
      }
    }
    expect(requests.sort()).toEqual(['a:0', 'a:1', 'b:0']);
    // An endpoint that takes only L4 finds none free, and says which model was full.
    await t.createEndpoint('l4-only', { workersMin: 1, workersMax: 1, idleTimeout: 60, worker: { image, gpus: 1, gpuTypes: ['L4'] } });
    const l4 = await eventually(async () => pool('l4-only').find((w) => w.state === 'throttled'), 30_000, 'the L4-only worker to wait');
    expect(l4.reason).toMatch(/^waiting for room: no Docker host has 1 free L4 GPU \(a: 0 of 2 L4 free; b: no L4\)/);
    await removeEndpoint('l4-only');
    await removeEndpoint('typed');
  });

  const TERMINAL = new Set(['COMPLETED', 'FAILED', 'CANCELLED', 'TIMED_OUT']);
  const submit = async (ep: string, input: unknown): Promise<string> => (await api('POST', `/v2/${ep}/run`, { input })).id as string;
  const status = (ep: string, id: string): Promise<Json> => api('GET', `/v2/${ep}/status/${id}`);
  const allTerminal = (ep: string, ids: string[]): Promise<Json[]> =>
    eventually(
      async () => {
        const jobs = await Promise.all(ids.map((id) => status(ep, id)));
        return jobs.every((j) => TERMINAL.has(j.status as string)) ? jobs : undefined;
      },
      90_000,
      `the jobs of ${ep} to end`,
    );
  /** An endpoint on a's two L4 only, one GPU a worker, a worker per job (REQUEST_COUNT 1). */
  const onL4 = (id: string, settings: Json, handler = 'echo'): Promise<Json> =>
    api('POST', '/admin/v1/endpoints', { id, scalerType: 'REQUEST_COUNT', scalerValue: 1, workersMax: 2, ...settings, worker: { image, gpus: 1, gpuTypes: ['L4'], env: { WORKER_HANDLER: handler } } });

  it("a high-priority burst reclaims a lower priority's idle GPUs within one scaler pass", async () => {
    await onL4('lo', { priority: 10, idleTimeout: 600 });
    await allTerminal('lo', await Promise.all([1, 2].map((n) => submit('lo', { n }))));
    await eventually(async () => (pool('lo').filter((w) => w.state === 'idle').length === 2 ? true : undefined), 60_000, "lo's two idle workers");
    await onL4('hi', { priority: 90, idleTimeout: 1 });
    const scaler = t.gantry.gateway.autoscaler;
    const ids = await Promise.all([1, 2].map((n) => submit('hi', { n })));
    // The first pass that sees hi's jobs stops both of lo's idle workers (lo may keep none: workersMin 0).
    await scaler.nextPass();
    const lo = pool('lo');
    expect(lo.map((w) => w.state)).toEqual(['draining', 'draining']);
    for (const w of lo) expect(w.reason).toMatch(/^reclaimed for `hi` \(priority 90\): 1 L4 on a, idle beyond workersMin$/);
    // hi waits for those GPUs (a later pass, lo's workers still draining, says only that they are being freed).
    const hiWaits = pool('hi');
    expect(hiWaits.map((w) => w.state)).toEqual(['throttled', 'throttled']);
    for (const w of hiWaits) expect(w.reason).toMatch(/^waiting for room: 1 L4 on a being freed( \(stopping workers of `lo`\))?$/);
    // Once they are gone, hi's workers start on those GPUs and run the burst.
    const jobs = await allTerminal('hi', ids);
    expect(jobs.map((j) => j.status)).toEqual(['COMPLETED', 'COMPLETED']);
    expect(new Set(jobs.map((j) => j.workerId)).size).toBe(2);
    await removeEndpoint('hi');
    await removeEndpoint('lo');
  });

  it("preempts a preemptible endpoint's running job for a higher priority: requeued uncounted, finished later, nothing lost", async () => {
    await onL4('batch', { priority: 10, preemptible: true, idleTimeout: 1 }, 'sleep');
    const ids = await Promise.all([1, 2].map(() => submit('batch', { seconds: 6 })));
    await eventually(async () => ((await Promise.all(ids.map((id) => status('batch', id)))).every((j) => j.status === 'IN_PROGRESS') ? true : undefined), 60_000, 'both batch jobs to run');
    await onL4('urgent', { priority: 90, idleTimeout: 1, workersMax: 1 });
    const scaler = t.gantry.gateway.autoscaler;
    const urgent = await submit('urgent', { now: true });
    await scaler.nextPass();
    // One batch worker was asked to stop, its job back in the queue with the hand-out uncounted.
    const preempted = pool('batch').filter((w) => w.state === 'draining');
    expect(preempted).toHaveLength(1);
    expect(preempted[0]!.reason).toMatch(/^preempted for `urgent` \(priority 90\): 1 L4 on a, its jobs requeued$/);
    const requeued = await eventually(async () => (await Promise.all(ids.map((id) => status('batch', id)))).find((j) => j.preemptions === 1), 10_000, 'the preempted job');
    expect(requeued).toMatchObject({ status: 'IN_QUEUE', attempts: 0, preemptions: 1 });
    expect((await allTerminal('urgent', [urgent]))[0]).toMatchObject({ status: 'COMPLETED', output: { now: true } });
    // urgent goes idle and stops; batch gets the GPU back and finishes the requeued job: both complete, none failed.
    const jobs = await allTerminal('batch', ids);
    expect(jobs.map((j) => [j.status, j.output])).toEqual([
      ['COMPLETED', { slept: 6 }],
      ['COMPLETED', { slept: 6 }],
    ]);
    const again = jobs.find((j) => j.id === requeued.id)!;
    expect(again).toMatchObject({ attempts: 1, preemptions: 1 });
    expect(again.workerId).not.toBe(preempted[0]!.id);
    await removeEndpoint('urgent');
    await removeEndpoint('batch');
  });
});
