// Issue 23: cold-start figures outlive the leader. A real `gantry serve` (dist/: run `npm run
// build` first) with an endpoint whose pool starts command workers (the Gantry SDK's echo
// worker); a job sent with no worker up makes a cold start. The gateway is stopped and started
// again on the same store, twice: each new leader reports, in the admin API and in /metrics,
// every cold start its predecessors counted (count, quantiles, histogram), and adds its own.
// The store is GANTRY_TEST_BACKEND's (this file is in vitest.config.ts's BOTH_STORES).
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { ColdStarts } from '../../src/sdk/admin-client.js';
import { eventually } from '../helpers/gantry.js';
import { createTestSchema, type TestSchema } from '../helpers/postgres.js';
import { CLI, startGateway, type ServeProcess } from '../helpers/serve-process.js';
import { scratchDir } from '../helpers/scratch.js';

const ROOT = fileURLToPath(new URL('../..', import.meta.url));
const ECHO = `node ${JSON.stringify(CLI)} worker ${JSON.stringify(join(ROOT, 'dist/examples/echo-worker.js'))}`;
const BACKEND = process.env.GANTRY_TEST_BACKEND === 'postgres' ? 'postgres' : 'sqlite';
const ADMIN_KEY = 'cold-start-restart-admin-key-0123456789';

let schema: TestSchema | undefined;
let dataDir: string;
let gateway: ServeProcess | undefined;

async function serve(): Promise<ServeProcess> {
  const env: Record<string, string> = { GANTRY_AUTOSCALER_INTERVAL_MS: '100', GANTRY_WORKER_STOP_GRACE_MS: '2000', GANTRY_JOB_TAKE_WAIT_MS: '1000' };
  if (schema) env.DATABASE_URL = schema.url;
  return startGateway({ adminKey: ADMIN_KEY, dataDir, env });
}

/** The endpoint's cold starts as the admin API lists them (null until the leader's pool has read them). */
async function coldStarts(gw: ServeProcess): Promise<ColdStarts | null> {
  return (await gw.admin.workerListing('cold')).coldStarts ?? null;
}

/** The endpoint's cold starts once `count` of them are reported. */
function coldStartsCounted(gw: ServeProcess, count: number, what: string): Promise<ColdStarts> {
  return eventually(async () => {
    const c = await coldStarts(gw);
    return c && c.count === count ? c : undefined;
  }, 30_000, what);
}

/** A job sent while no worker runs: the pool starts one for it (a cold start), and it completes. */
async function coldJob(gw: ServeProcess, n: number): Promise<void> {
  const job = await gw.client().runSync('cold', { input: { n } }, { timeoutMs: 60_000 });
  expect(job.status).toBe('COMPLETED');
}

/** The /metrics lines of the endpoint's cold starts. */
async function metricLines(gw: ServeProcess): Promise<string[]> {
  const res = await fetch(`${gw.url}/metrics`, { headers: { authorization: `Bearer ${ADMIN_KEY}` } });
  const text = await res.text();
  return text.split('\n').filter((l) => l.startsWith('gantry_cold_start') && l.includes('endpoint="cold"'));
}

/** Waits until the endpoint has no worker left (idleTimeout passed), so the next job makes a cold start. */
async function noWorkers(gw: ServeProcess): Promise<void> {
  await eventually(async () => ((await gw.admin.listWorkers('cold')).every((w) => w.state === 'stopped') ? true : undefined), 30_000, 'no worker running');
}

beforeAll(async () => {
  dataDir = scratchDir('cold-restart');
  if (BACKEND === 'postgres') schema = await createTestSchema('coldrestart');
  gateway = await serve();
  await gateway.admin.createEndpoint({ id: 'cold', workersMin: 0, workersMax: 1, idleTimeout: 1, worker: { command: ECHO } });
}, 120_000);

afterAll(async () => {
  await gateway?.stop();
  await schema?.drop();
});

describe(`cold starts across gateway restarts (${BACKEND})`, () => {
  it('a new leader reports the cold starts its predecessors counted, and adds its own', async () => {
    let gw = gateway!;
    await coldJob(gw, 1);
    await noWorkers(gw);
    await coldJob(gw, 2);
    const before = await coldStartsCounted(gw, 2, 'two cold starts counted');
    expect(before.start.count).toBe(2);
    const metricsBefore = await metricLines(gw);
    expect(metricsBefore).toContain('gantry_cold_starts_total{endpoint="cold",kind="start"} 2');

    // A restart: the new leader reads what the old one stored.
    expect(await gw.stop()).toBe(0);
    gw = gateway = await serve();
    const after = await coldStartsCounted(gw, 2, 'the stored cold starts read by the new leader');
    expect(after).toEqual(before);
    expect(await metricLines(gw)).toEqual(metricsBefore);

    // Its own cold start adds to them; and a second restart keeps all three.
    await coldJob(gw, 3);
    const three = await coldStartsCounted(gw, 3, 'a third cold start counted');
    expect(three.start).toMatchObject({ count: 3, window: 3 });
    expect(await gw.stop()).toBe(0);
    gw = gateway = await serve();
    const again = await coldStartsCounted(gw, 3, 'three cold starts after the second restart');
    expect(again).toEqual(three);
    expect(await metricLines(gw)).toContain('gantry_cold_starts_total{endpoint="cold",kind="start"} 3');
    expect((await metricLines(gw)).find((l) => l.startsWith('gantry_cold_start_seconds_count{endpoint="cold",kind="start"}'))).toMatch(/ 3$/);
  }, 240_000);
});
