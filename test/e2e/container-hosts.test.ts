// End to end over two Docker engines standing in for two GPU hosts (test/fixtures/docker/
// engines.sh: two dockerd daemons with their own sockets, data roots and bridges, and a
// stand-in for NVIDIA's container hook, since these machines have no GPU). Checks placement
// against each host's GPU count — in the device requests of the created containers and in
// what the containers see — and what happens when a host stops answering.
import { randomBytes } from 'node:crypto';
import { existsSync, readFileSync } from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { PoolHostInfo, PoolWorkerInfo } from '../../src/jobs/pool-view.js';
import { containersOf, enginesFor, findTestEngines, hostConfig, inspect, type TestEngine } from '../fixtures/docker/test-engines.js';
import { ensureWorkerImage } from '../fixtures/docker/test-images.js';
import { eventually, startTestGantry, type TestGantry } from '../helpers/gantry.js';

type Json = Record<string, unknown>;

const engines = await findTestEngines();
const TERMINAL = new Set(['COMPLETED', 'FAILED', 'CANCELLED', 'TIMED_OUT']);
/** The runpod-python stand-in, after printing the GPUs the container was given. */
const SHOW_GPUS = 'echo "visible GPUs: $NVIDIA_VISIBLE_DEVICES"; exec python3 -u /app/runpod_like_worker.py';

describe.skipIf(!enginesFor(engines, 2))('worker containers over two Docker hosts', { timeout: 120_000 }, () => {
  const [a, b] = engines as [TestEngine, TestEngine];
  const instance = `test-${randomBytes(4).toString('hex')}`;
  let t: TestGantry;
  let images: string[];

  async function api(method: string, path: string, body?: unknown): Promise<Json> {
    const res = await fetch(`${t.url}${path}`, {
      method,
      headers: { authorization: `Bearer ${t.adminKey}`, 'content-type': 'application/json' },
      ...(body === undefined ? {} : { body: JSON.stringify(body) }),
    });
    const json = (await res.json()) as Json;
    if (res.status !== 200) throw new Error(`${method} ${path}: ${res.status} ${JSON.stringify(json)}`);
    return json;
  }  /** A worker's stored log once it holds `text`: lines reach the store in batches (docs/logs.md). */
  const storedLog = (path: string, text: string): Promise<Json> =>
    eventually(async () => {
      const log = await api('GET', path);
      return JSON.stringify(log.lines).includes(text) ? log : undefined;
    }, 10_000, `${text} in the stored log`);

  const submit = async (ep: string, input: unknown): Promise<string> => (await api('POST', `/v2/${ep}/run`, { input })).id as string;
  const health = async (ep: string): Promise<Record<string, number>> => (await api('GET', `/v2/${ep}/health`)).workers as Record<string, number>;
  const listing = async (ep: string): Promise<{ workers: (PoolWorkerInfo & Json)[]; hosts: (PoolHostInfo & Json)[] }> => (await api('GET', `/admin/v1/endpoints/${ep}/workers`)) as never;
  const pool = (ep: string): PoolWorkerInfo[] => t.gantry.gateway.autoscaler.view.workers(ep) ?? [];
  const allTerminal = (ep: string, ids: string[], timeoutMs = 60_000): Promise<Json[]> =>
    eventually(async () => {
      const jobs = await Promise.all(ids.map((id) => api('GET', `/v2/${ep}/status/${id}`)));
      return jobs.every((j) => TERMINAL.has(j.status as string)) ? jobs : undefined;
    }, timeoutMs, `jobs of ${ep} to finish`);

  beforeAll(async () => {
    images = await Promise.all([ensureWorkerImage(a), ensureWorkerImage(b)]);
    expect(images[0]).toBe(images[1]); // the same inputs, so the same tag on both hosts
    t = await startTestGantry({
      host: '0.0.0.0',
      autoscalerIntervalMs: 50,
      workerStopGraceMs: 5_000,
      workerRestartBackoffMs: 300,
      // Host a has two GPUs, host b one; health checks every 200 ms, down after 1.5 s of silence.
      docker: { hosts: [hostConfig(a.url, 'a', 2), hostConfig(b.url, 'b', 1)], defaultHost: false, pingIntervalMs: 200, downAfterMs: 1_500, instance },
    });
  }, 300_000);

  afterAll(async () => {
    await t?.close();
    expect([...(await containersOf(a, instance)), ...(await containersOf(b, instance))]).toEqual([]);
  });

  it('places GPU workers by each host’s free GPUs: bin-packed, one GPU never given twice, the rest throttled', async () => {
    await t.createEndpoint('gpu', { workersMin: 4, workersMax: 4, idleTimeout: 60, worker: { image: images[0], command: SHOW_GPUS, gpus: 1 } });
    // Three fit (a: 2, b: 1); the fourth waits for a GPU.
    await eventually(async () => ((await health('gpu')).idle === 3 && (await health('gpu')).throttled === 1 ? true : undefined), 60_000, 'three GPU workers and one throttled');
    const { workers, hosts } = await listing('gpu');
    const waiting = workers.find((w) => w.state === 'throttled');
    // The allocator names what holds the GPUs (here the endpoint's own three workers).
    expect(waiting?.reason).toBe('waiting for room: no Docker host has 1 free GPU (a: 0 of 2 GPUs free; b: 0 of 1 GPUs free); 3 GPU held by `gpu` at priority 50');
    expect(waiting?.restarts).toBe(0);
    expect(hosts.map((h) => [h.name, h.state, h.gpus, h.gpusInUse, h.endpointWorkers])).toEqual([
      ['a', 'up', 2, 2, 2],
      ['b', 'up', 1, 1, 1],
    ]);

    // The device requests of the created containers: each GPU of a host given once.
    const requests: string[] = [];
    for (const [engine, name] of [[a, 'a'], [b, 'b']] as const) {
      for (const c of await containersOf(engine, instance)) {
        const info = await inspect(engine, c.Id);
        const [request] = info.HostConfig.DeviceRequests as { Driver: string; DeviceIDs: string[]; Count: number; Capabilities: string[][] }[];
        expect(request).toMatchObject({ Driver: 'nvidia', Capabilities: [['gpu']] });
        requests.push(`${name}:${request?.DeviceIDs.join(',')}`);
        // What the container saw (NVIDIA_VISIBLE_DEVICES, set by the engine from the request), in its log.
        const worker = c.Labels['io.gantry.worker'] as string;
        const log = await storedLog(`/admin/v1/endpoints/gpu/workers/${worker}/logs`, `visible GPUs: ${request?.DeviceIDs.join(',')}`);
        expect((log.lines as { line: string }[]).map((l) => l.line)).toContain(`visible GPUs: ${request?.DeviceIDs.join(',')}`);
      }
    }
    expect(requests.sort()).toEqual(['a:0', 'a:1', 'b:0']);

    const ids = await Promise.all([1, 2, 3, 4, 5].map((n) => submit('gpu', { n })));
    expect((await allTerminal('gpu', ids)).map((j) => j.status)).toEqual(ids.map(() => 'COMPLETED'));

    // Fewer workers free their GPUs: exact device ids then fit where those ids are free.
    await api('PATCH', '/admin/v1/endpoints/gpu', { workersMin: 0, workersMax: 1, idleTimeout: 1 });
    await eventually(async () => (pool('gpu').length <= 1 && (await containersOf(a, instance)).length + (await containersOf(b, instance)).length <= 1 ? true : undefined), 60_000, 'the GPU pool to shrink');
    await api('DELETE', '/admin/v1/endpoints/gpu');
    await eventually(async () => ((await containersOf(a, instance)).length + (await containersOf(b, instance)).length === 0 ? true : undefined), 30_000, 'the GPU containers to go');

    await t.createEndpoint('pinned', { workersMin: 1, idleTimeout: 60, worker: { image: images[0], command: SHOW_GPUS, gpus: ['1'] } });
    const pinned = await eventually(async () => pool('pinned').find((w) => w.state === 'idle'), 60_000, 'the pinned worker');
    expect(pinned.host).toBe('a'); // only a has a device "1"
    const [c] = await containersOf(a, instance);
    expect((await inspect(a, c!.Id)).HostConfig.DeviceRequests).toEqual([expect.objectContaining({ DeviceIDs: ['1'] })]);
    await api('DELETE', '/admin/v1/endpoints/pinned');
    await eventually(async () => ((await containersOf(a, instance)).length === 0 ? true : undefined), 30_000, 'the pinned container to go');
  });

  const pidFile = '/run/gantry-test-docker/b/dockerd.pid';
  // Needs engine b to be one of engines.sh (its dockerd is paused here to stop it answering).
  it.skipIf(!existsSync(pidFile) || !b.url.includes('/run/gantry-test-docker/b/'))('a host that stops answering is marked down: its workers count as lost, their jobs are requeued and run elsewhere; once back, what it still ran of ours is removed', async () => {
    await t.createEndpoint('spread', { workersMin: 2, workersMax: 2, idleTimeout: 60, worker: { image: images[0], env: { WORKER_HANDLER: 'sleep' } } });
    await eventually(async () => ((await health('spread')).idle === 2 ? true : undefined), 60_000, 'two idle workers');
    // Workers without GPUs are spread: one on each host.
    expect(pool('spread').map((w) => w.host).sort()).toEqual(['a', 'b']);
    const onB = pool('spread').find((w) => w.host === 'b')!;
    // Long enough that b's run cannot end before b is marked down, however busy the machine (the mark takes downAfterMs, 1.5 s, and more under load).
    const ids = await Promise.all([1, 2].map(() => submit('spread', { seconds: 10 })));
    await eventually(async () => ((await health('spread')).running === 2 ? true : undefined), 20_000, 'both workers busy');
    const heldOnB = await eventually(async () => {
      for (const id of ids) if ((await api('GET', `/v2/spread/status/${id}`)).workerId === onB.id) return id;
      return undefined;
    }, 10_000, "b's job");

    const dockerd = Number(readFileSync(pidFile, 'utf8'));
    process.kill(dockerd, 'SIGSTOP');
    try {
      await eventually(async () => ((await listing('spread')).hosts.find((h) => h.name === 'b')?.state === 'down' ? true : undefined), 20_000, 'host b to be marked down');
      const jobs = await allTerminal('spread', ids);
      expect(jobs.map((j) => j.status)).toEqual(['COMPLETED', 'COMPLETED']);
      // The job b's worker held ran again: on the worker's replacement, placed on host a (a
      // restarted worker keeps its id, like a RunPod pod; the lost container's key is revoked).
      expect((await t.gantry.gateway.jobs.getJob('spread', heldOnB))?.attempts).toBe(2);
      const log = await storedLog(`/admin/v1/endpoints/spread/workers/${onB.id}/logs`, 'exited: lost: Docker host b stopped answering');
      expect(JSON.stringify(log.lines)).toContain('exited: lost: Docker host b stopped answering');
      expect(pool('spread').every((w) => w.host !== 'b')).toBe(true);
    } finally {
      process.kill(dockerd, 'SIGCONT');
    }
    await eventually(async () => ((await listing('spread')).hosts.find((h) => h.name === 'b')?.state === 'up' ? true : undefined), 20_000, 'host b to be up again');
    // The container still running on b (its key revoked, its job done elsewhere) is removed.
    await eventually(async () => ((await containersOf(b, instance)).length === 0 ? true : undefined), 30_000, 'the lost container on b to be removed');
    await api('DELETE', '/admin/v1/endpoints/spread');
  });
});
