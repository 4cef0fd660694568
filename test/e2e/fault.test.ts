// Faults under load (docs/security.md, guarantees): the gateway killed with SIGKILL while clients
// submit and workers take and post results, then started again on the same SQLite file and port;
// and the PostgreSQL server restarted under a gateway. Every job the gateway acknowledged (200 on
// /run) ends COMPLETED, and its completion is accepted exactly once. Several gateways on
// PostgreSQL with one killed: test/e2e/multi-gateway.test.ts.
import { randomBytes } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { eventually } from '../helpers/gantry.js';
import { startEmbedded } from '../helpers/postgres.js';
import { startGateway, type ServeProcess } from '../helpers/serve-process.js';
import { call, type Json } from '../http/http-helpers.js';
import { freePort } from '../helpers/ports.js';

const SETTINGS = { GANTRY_JOB_TAKE_WAIT_MS: '1000', GANTRY_WORKER_LOST_MS: '3000', GANTRY_REAPER_INTERVAL_MS: '250' };

/** `gantry serve` with this file's settings and `env`, on `dataDir` (default a new scratch folder). */
const serve = (env: Record<string, string>, dataDir?: string): Promise<ServeProcess> => startGateway({ env: { ...SETTINGS, ...env }, ...(dataDir ? { dataDir } : {}) });

const pause = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));

/**
 * Clients submitting and workers draining against `url`, through a gateway that may be down for
 * a while: refused connections and 5xx are retried, as clients and runpod-python's worker do.
 */
function createLoad(url: string, endpointId: string, keys: { run: string; worker: string }) {
  const acknowledged: string[] = [];
  const accepted = new Map<string, number>();
  let stopClients = false;
  let stopWorkers = false;

  const client = async (): Promise<void> => {
    let i = 0;
    while (!stopClients) {
      const r = await call(url, 'POST', `/v2/${endpointId}/run`, { key: keys.run, body: { input: { i: i++ } } }).catch(() => undefined);
      if (r?.status === 200) acknowledged.push(r.json.id as string);
      else await pause(50);
    }
  };
  /** Posts a result until the gateway answers it: 200 (accepted) or 409 (no longer this worker's). */
  const finish = async (workerId: string, jobId: string): Promise<void> => {
    for (;;) {
      const r = await call(url, 'POST', `/v2/${endpointId}/job-done/${workerId}/${jobId}`, { key: keys.worker, rawAuth: true, body: { output: { done: jobId } }, contentType: 'application/json' }).catch(() => undefined);
      if (r?.status === 200) {
        accepted.set(jobId, (accepted.get(jobId) ?? 0) + 1);
        return;
      }
      if (r?.status === 409) return;
      await pause(50);
    }
  };
  /**
   * Takes batches and finishes them, and pings every second listing what it holds, as runpod-python
   * does: a take answer lost when the gateway was killed leaves a job the store says this worker
   * holds but its pings never list, which the gateway returns to the queue (docs/worker-protocol.md).
   */
  const worker = async (workerId: string): Promise<void> => {
    const held = new Set<string>();
    const heartbeat = (async () => {
      while (!stopWorkers) {
        const jobIds = encodeURIComponent([...held].join(','));
        await call(url, 'GET', `/v2/${endpointId}/ping/${workerId}?job_id=${jobIds}&runpod_version=1.12.0`, { key: keys.worker, rawAuth: true }).catch(() => undefined);
        await pause(1_000);
      }
    })();
    while (!stopWorkers) {
      const r = await call(url, 'GET', `/v2/${endpointId}/job-take-batch/${workerId}?batch_size=10&job_in_progress=0`, { key: keys.worker, rawAuth: true }).catch(() => undefined);
      if (r?.status === 200) {
        const ids = (r.json as unknown as Json[]).map((job) => job.id as string);
        for (const id of ids) held.add(id);
        for (const id of ids) {
          await finish(workerId, id);
          held.delete(id);
        }
      } else if (r?.status !== 204) await pause(50);
    }
    await heartbeat;
  };
  const clients = Array.from({ length: 6 }, () => client());
  const workers = ['w1', 'w2', 'w3'].map((id) => worker(id));
  return {
    acknowledged,
    accepted,
    async stopSubmitting(): Promise<void> {
      stopClients = true;
      await Promise.all(clients);
    },
    async stop(): Promise<void> {
      stopWorkers = true;
      await Promise.all(workers);
    },
  };
}

async function setUp(s: ServeProcess, endpointId: string): Promise<{ run: string; worker: string }> {
  await s.admin.createEndpoint({ id: endpointId });
  return { run: (await s.admin.createKey({ name: 'run', scopes: ['run', 'read'] })).key, worker: (await s.admin.createKey({ name: 'w', scopes: ['worker'] })).key };
}

/** Every acknowledged job COMPLETED, each completion accepted exactly once. */
async function expectEachEndedOnce(url: string, endpointId: string, runKey: string, load: ReturnType<typeof createLoad>): Promise<void> {
  const ids = [...new Set(load.acknowledged)];
  expect(ids.length).toBe(load.acknowledged.length);
  await eventually(async () => (ids.every((id) => load.accepted.has(id)) ? true : undefined), 60_000, 'every acknowledged job to be completed').catch(async (err: Error) => {
    const missing = ids.filter((id) => !load.accepted.has(id)).slice(0, 5);
    const states = await Promise.all(missing.map(async (id) => JSON.stringify((await call(url, 'GET', `/v2/${endpointId}/status/${id}`, { key: runKey })).json)));
    throw new Error(`${err.message}; not completed: ${states.join(' ')}`);
  });
  await load.stop();
  for (const id of ids) expect(load.accepted.get(id), id).toBe(1);
  for (const count of load.accepted.values()) expect(count).toBe(1);
  const sample = ids.filter((_, i) => i % 25 === 0);
  for (const id of sample) {
    const r = await call(url, 'GET', `/v2/${endpointId}/status/${id}`, { key: runKey });
    expect(r.json).toMatchObject({ id, status: 'COMPLETED', output: { done: id } });
  }
}

describe('faults under load', { timeout: 180_000 }, () => {
  it('SQLite: the gateway killed with SIGKILL, then started again on the same file: every acknowledged job ends exactly once', async () => {
    const env = { PORT: String(await freePort()) };
    const first = await serve(env);
    const keys = await setUp(first, 'fault');
    const load = createLoad(first.url, 'fault', keys);
    await eventually(async () => (load.acknowledged.length >= 300 && load.accepted.size >= 100 ? true : undefined), 60_000, 'load to flow');
    await first.stop('SIGKILL');
    const before = load.acknowledged.length;
    const second = await serve(env, first.dataDir);
    expect(second.url).toBe(first.url);
    await eventually(async () => (load.acknowledged.length >= before + 300 ? true : undefined), 60_000, 'load to flow again');
    await load.stopSubmitting();
    await expectEachEndedOnce(second.url, 'fault', keys.run, load);
    expect(await second.stop()).toBe(0);
  });

  it('PostgreSQL: the database server restarted under load: every acknowledged job ends exactly once', async () => {
    // A server of this test alone, so that restarting it disturbs no other test.
    const pg = await startEmbedded();
    try {
      const first = await serve({ DATABASE_URL: pg.url, GANTRY_SECRET_KEY: randomBytes(32).toString('base64') });
      const keys = await setUp(first, 'fault');
      const load = createLoad(first.url, 'fault', keys);
      await eventually(async () => (load.acknowledged.length >= 300 && load.accepted.size >= 100 ? true : undefined), 60_000, 'load to flow');
      await pg.restart();
      const before = load.acknowledged.length;
      await eventually(async () => (load.acknowledged.length >= before + 300 ? true : undefined), 60_000, 'load to flow after the restart');
      await load.stopSubmitting();
      await expectEachEndedOnce(first.url, 'fault', keys.run, load);
      expect(await first.stop()).toBe(0);
    } finally {
      await pg.stop();
    }
  });
});
