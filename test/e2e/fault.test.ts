// Faults under load (docs/security.md, guarantees): the gateway killed with SIGKILL while clients
// submit and workers take and post results, then started again on the same SQLite file and port;
// and the PostgreSQL server restarted under a gateway. Every job the gateway acknowledged (200 on
// /run) ends COMPLETED, and its completion is accepted exactly once. Several gateways on
// PostgreSQL with one killed: test/e2e/multi-gateway.test.ts.
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { eventually } from '../helpers/gantry.js';
import { startEmbedded } from '../helpers/postgres.js';
import { startServe, type ServeProcess } from '../helpers/serve-process.js';
import { call, type Json } from '../http/http-helpers.js';

const ADMIN_KEY = `fault-admin-${randomBytes(8).toString('hex')}`;
const SETTINGS = { GANTRY_JOB_TAKE_WAIT_MS: '1000', GANTRY_WORKER_LOST_MS: '3000', GANTRY_REAPER_INTERVAL_MS: '250' };
const dirs: string[] = [];
const running: ServeProcess[] = [];

afterAll(async () => {
  for (const s of running) if (s.proc.exitCode === null && s.proc.signalCode === null) s.proc.kill('SIGKILL');
  for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
});

function newDir(label: string): string {
  const dir = mkdtempSync(join(tmpdir(), `gantry-fault-${label}-`));
  dirs.push(dir);
  return dir;
}

/** A port that was free a moment ago: the restarted gateway listens where the first one did. */
function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address() as { port: number };
      server.close(() => resolve(port));
    });
  });
}

async function serve(env: Record<string, string>): Promise<ServeProcess> {
  const s = await startServe(ADMIN_KEY, { ...SETTINGS, ...env });
  if (!s.url) throw new Error(`gantry serve exited: ${s.output().slice(-2000)}`);
  running.push(s);
  return s;
}

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
  const worker = async (workerId: string): Promise<void> => {
    while (!stopWorkers) {
      const r = await call(url, 'GET', `/v2/${endpointId}/job-take-batch/${workerId}?batch_size=10&job_in_progress=0`, { key: keys.worker, rawAuth: true }).catch(() => undefined);
      if (r?.status === 200) for (const job of r.json as unknown as Json[]) await finish(workerId, job.id as string);
      else if (r?.status !== 204) await pause(50);
    }
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
  const admin = async (path: string, body: unknown): Promise<Json> => {
    const r = await call(s.url, 'POST', `/admin/v1/${path}`, { key: ADMIN_KEY, body });
    if (r.status !== 200) throw new Error(`admin ${path}: ${r.status} ${r.text}`);
    return r.json;
  };
  await admin('endpoints', { id: endpointId });
  return { run: (await admin('keys', { name: 'run', scopes: ['run', 'read'] })).key as string, worker: (await admin('keys', { name: 'w', scopes: ['worker'] })).key as string };
}

/** Every acknowledged job COMPLETED, each completion accepted exactly once. */
async function expectEachEndedOnce(url: string, endpointId: string, runKey: string, load: ReturnType<typeof createLoad>): Promise<void> {
  const ids = [...new Set(load.acknowledged)];
  expect(ids.length).toBe(load.acknowledged.length);
  await eventually(async () => (ids.every((id) => load.accepted.has(id)) ? true : undefined), 60_000, 'every acknowledged job to be completed');
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
    const dir = newDir('sqlite');
    const port = await freePort();
    const env = { GANTRY_DATA_DIR: dir, PORT: String(port) };
    const first = await serve(env);
    const keys = await setUp(first, 'fault');
    const load = createLoad(first.url, 'fault', keys);
    await eventually(async () => (load.acknowledged.length >= 300 && load.accepted.size >= 100 ? true : undefined), 60_000, 'load to flow');
    first.proc.kill('SIGKILL');
    await first.exited;
    const before = load.acknowledged.length;
    const second = await serve(env);
    expect(second.url).toBe(first.url);
    await eventually(async () => (load.acknowledged.length >= before + 300 ? true : undefined), 60_000, 'load to flow again');
    await load.stopSubmitting();
    await expectEachEndedOnce(second.url, 'fault', keys.run, load);
    second.proc.kill('SIGTERM');
    expect(await second.exited).toBe(0);
  });

  it('PostgreSQL: the database server restarted under load: every acknowledged job ends exactly once', async () => {
    // A server of this test alone, so that restarting it disturbs no other test.
    const pg = await startEmbedded();
    try {
      const first = await serve({ GANTRY_DATA_DIR: newDir('pg'), DATABASE_URL: pg.url, GANTRY_SECRET_KEY: randomBytes(32).toString('base64') });
      const keys = await setUp(first, 'fault');
      const load = createLoad(first.url, 'fault', keys);
      await eventually(async () => (load.acknowledged.length >= 300 && load.accepted.size >= 100 ? true : undefined), 60_000, 'load to flow');
      await pg.restart();
      const before = load.acknowledged.length;
      await eventually(async () => (load.acknowledged.length >= before + 300 ? true : undefined), 60_000, 'load to flow after the restart');
      await load.stopSubmitting();
      await expectEachEndedOnce(first.url, 'fault', keys.run, load);
      first.proc.kill('SIGTERM');
      expect(await first.exited).toBe(0);
    } finally {
      await pg.stop();
    }
  });
});
