// Meters over HTTP (docs/api.md, "Usage"; "Budgets and quotas"), on the store of
// GANTRY_TEST_BACKEND (this file is in vitest.config.ts's BOTH_STORES): execution seconds per
// key across two gateways (PostgreSQL: a second gateway on the same schema; SQLite: one),
// priced to the 10th decimal; a pool worker's seconds from its real start and stop; a budget
// crossed mid-stream refused with 402 and accepted again once the period rolls (manual clock);
// maxConcurrentJobs answered 429.
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createManualClock } from '../helpers/clock.js';
import { eventually, startTestGantry, type TestGantry } from '../helpers/gantry.js';
import { newKey, uniqueId } from '../helpers/jobs.js';
import { call, clientFor, workerFor, type Json } from './http-helpers.js';

const ROOT = fileURLToPath(new URL('../..', import.meta.url));
const ECHO = `node ${JSON.stringify(join(ROOT, 'dist/src/cli/main.js'))} worker ${JSON.stringify(join(ROOT, 'dist/examples/echo-worker.js'))}`;
const PG = process.env.GANTRY_TEST_BACKEND === 'postgres';
/** 0.0001234567 USD per second of execution, in units of 1e-10 USD: 1234.567 units a ms, so each run's cost is rounded. */
const PRICE = '0.0001234567';
const PRICE_UNITS = 1_234_567n;

/** ceil(ms × units per second / 1000) in units → the decimal USD text the API prints. */
function usd(units: bigint): string {
  const whole = units / 10_000_000_000n;
  const fraction = (units % 10_000_000_000n).toString().padStart(10, '0').replace(/0+$/, '');
  return fraction ? `${whole}.${fraction}` : `${whole}`;
}
const costOf = (ms: number): bigint => (PRICE_UNITS * BigInt(ms) + 999n) / 1000n;

const admin = (t: TestGantry, method: string, path: string, body?: unknown, key = t.adminKey) => call(t.url, method, `/admin/v1${path}`, { key, body });

describe('meters: execution seconds per key, worker seconds per endpoint', () => {
  let a: TestGantry;
  let b: TestGantry;

  beforeAll(async () => {
    a = await startTestGantry({ autoscalerIntervalMs: 50, workerStopGraceMs: 10_000 });
    // The second gateway installs its own admin key, which replaces the first one's: both are called with b's.
    b = PG && a.databaseUrl ? await startTestGantry({}, { databaseUrl: a.databaseUrl }) : a;
  });
  afterAll(async () => {
    if (b !== a) await b?.close();
    await a?.close();
  });

  it('execution seconds per key lie within the jobs\' real run times (taken on one gateway, finished on the other); cost to the 10th decimal', async () => {
    const id = uniqueId('metered');
    await b.createEndpoint(id, { pricePerSecond: PRICE });
    expect((await b.admin.getEndpoint(id)) as unknown as Json).toMatchObject({ pricePerSecond: 0.0001234567 });
    const workerKey = await newKey(b, ['worker']);
    const keyOne = (await b.admin.createKey({ name: `team one ${id}`, scopes: ['run'] })) as { id: string; key: string };
    const keyTwo = (await b.admin.createKey({ name: `team two ${id}`, scopes: ['run'] })) as { id: string; key: string };
    const plan: { key: { id: string; key: string }; holdMs: number; fail?: boolean }[] = [
      { key: keyOne, holdMs: 300 },
      { key: keyOne, holdMs: 700, fail: true },
      { key: keyTwo, holdMs: 500 },
    ];
    // Bounds of each run as the worker saw it: at least from the take's answer to the done's
    // send, at most from the take's send to the done's answer.
    const bounds = new Map<string, { min: number; max: number }>();
    const takeOn = workerFor(a, id, workerKey);
    const doneOn = workerFor(b, id, workerKey, takeOn.id);
    for (const step of plan) {
      const jobId = await clientFor(a, id, step.key.key).submit({ input: { hold: step.holdMs } });
      const before = Date.now();
      const job = await takeOn.takeJob(60_000);
      const taken = Date.now();
      expect(job.id).toBe(jobId);
      await new Promise((r) => setTimeout(r, step.holdMs));
      const sent = Date.now();
      const done = await doneOn.done(jobId, step.fail ? { error: 'handler raised' } : { output: { ok: true } });
      expect(done.status).toBe(200);
      bounds.set(jobId, { min: sent - taken, max: Date.now() - before });
    }
    // A job cancelled in the queue never ran: nothing metered for it.
    const queued = await clientFor(a, id, keyTwo.key).submit();
    expect((await clientFor(b, id, keyTwo.key).cancel(queued)).status).toBe(200);

    // The server's own executionTime of each job is what is metered and priced.
    const runs = await Promise.all([...bounds.keys()].map(async (jobId) => (await clientFor(b, id, keyOne.key).status(jobId)).json));
    for (const run of runs) {
      const { min, max } = bounds.get(run.id as string)!;
      expect(run.executionTime as number).toBeGreaterThanOrEqual(min);
      expect(run.executionTime as number).toBeLessThanOrEqual(max);
    }
    const msOf = (keyId: string) => runs.filter((_, i) => plan[i]!.key.id === keyId).map((r) => r.executionTime as number);
    const report = (await admin(b, 'GET', `/usage?groupBy=key,endpoint&from=${Date.now() - 600_000}`)).json as { usage: Json[]; total: Json };
    for (const key of [keyOne, keyTwo]) {
      const row = report.usage.find((u) => u.key === key.id && u.endpoint === id);
      const ms = msOf(key.id);
      const sumMs = ms.reduce((x, y) => x + y, 0);
      const boundsOfKey = [...bounds.values()].filter((_, i) => plan[i]!.key.id === key.id);
      // Tolerance: each run within its worker-side bounds (above); the sum exactly the runs' executionTime.
      expect(row).toMatchObject({ keyName: key.id === keyOne.id ? `team one ${id}` : `team two ${id}`, jobs: ms.length, executionSeconds: sumMs / 1000, workerSeconds: null });
      expect(row!.executionSeconds as number).toBeGreaterThanOrEqual(boundsOfKey.reduce((x, y) => x + y.min, 0) / 1000);
      expect(row!.executionSeconds as number).toBeLessThanOrEqual(boundsOfKey.reduce((x, y) => x + y.max, 0) / 1000);
      // Every run costs its seconds, the failed one too; each rounded up after the 10th decimal.
      expect(row!.costUsd).toBe(usd(ms.map(costOf).reduce((x, y) => x + y, 0n)));
    }
    const csv = await call(b.url, 'GET', `/admin/v1/usage?groupBy=day,key&format=csv&from=${Date.now() - 600_000}`, { key: b.adminKey });
    expect(csv.headers.get('content-type')).toMatch(/^text\/csv/);
    expect(csv.text.split('\r\n')[0]).toBe('day,key,keyName,jobs,executionSeconds,workerSeconds,gpuSeconds,megapixels,costUsd');
    expect(csv.text).toContain(`,${keyOne.id},team one ${id},2,${msOf(keyOne.id).reduce((x, y) => x + y, 0) / 1000},,,0,${usd(msOf(keyOne.id).map(costOf).reduce((x, y) => x + y, 0n))}\r\n`);
  }, 120_000);

  it('worker seconds of an endpoint run from a pool worker\'s real start to its stop', async () => {
    const id = uniqueId('pooled');
    await b.createEndpoint(id, { workersMin: 1, workersMax: 1, idleTimeout: 1, worker: { command: ECHO } });
    const listing = async () => {
      const r = await admin(a, 'GET', `/endpoints/${id}/workers`, undefined, b.adminKey);
      if (r.status !== 200) throw new Error(`listing: ${r.status} ${r.text}`);
      return r.json as { workers: Json[] };
    };
    const started = await eventually(async () => (await listing()).workers.find((w) => w.state === 'idle'), 60_000, 'the pool worker to serve');
    // Let it run (idle) a few seconds, so its life is long against the tolerance below.
    await new Promise((r) => setTimeout(r, 4_000));
    await b.admin.updateEndpoint(id, { workersMin: 0, workersMax: 0 });
    const stopped = await eventually(async () => (await listing()).workers.find((w) => w.id === started.id && w.state === 'stopped'), 60_000, 'the pool worker to stop');
    const lifeMs = Date.parse(stopped.stoppedAt as string) - Date.parse(stopped.startedAt as string);
    const report = (await admin(b, 'GET', `/usage?groupBy=endpoint&from=${Date.now() - 600_000}`)).json as { usage: Json[]; total: Json };
    const row = report.usage.find((u) => u.endpoint === id);
    // The meter starts when the listing's startedAt does and stops at the exit, which the
    // listing's stoppedAt follows after the exit's bookkeeping (requeue, key revoked): within 2 s.
    expect(row).toMatchObject({ jobs: 0, executionSeconds: 0, gpuSeconds: 0 });
    expect(row!.workerSeconds as number).toBeLessThanOrEqual(lifeMs / 1000);
    expect(lifeMs).toBeGreaterThan(4_000);
    expect(row!.workerSeconds as number).toBeGreaterThanOrEqual(lifeMs / 1000 - 2);
    expect(report.total.workerSeconds as number).toBeGreaterThanOrEqual(row!.workerSeconds as number);
  }, 120_000);
});

describe('budgets and quotas per key', () => {
  const clock = createManualClock(Date.UTC(2030, 0, 15, 22, 0, 0));
  let t: TestGantry;

  beforeAll(async () => {
    t = await startTestGantry({}, { clock });
  });
  afterAll(async () => {
    await t?.close();
  });

  it('a key past its daily budget gets 402 on every submitting route, and is accepted again once the day rolls', async () => {
    const id = uniqueId('budget');
    await t.createEndpoint(id, { pricePerSecond: '0.001' });
    const created = (await t.admin.createKey({ name: `budgeted ${id}`, scopes: ['run'] })) as { id: string; key: string };
    const patched = await admin(t, 'PATCH', `/keys/${created.id}`, { budgetUsd: 0.0025, budgetPeriod: 'day' });
    expect(patched.status).toBe(200);
    expect(patched.json).toMatchObject({ budgetUsd: 0.0025, budgetPeriod: 'day', budget: { spentUsd: '0', budgetUsd: '0.0025', resetsAt: '2030-01-16T00:00:00.000Z' } });
    const worker = workerFor(t, id, await newKey(t, ['worker']));
    const client = clientFor(t, id, created.key);
    // Each job runs 1 s of the manual clock: 0.001 USD. Submissions go on until one is refused.
    const accepted: string[] = [];
    let refused: Json | undefined;
    for (let i = 0; i < 6 && !refused; i++) {
      const r = await client.run({ input: { i } });
      if (r.status === 402) {
        refused = r.json;
        break;
      }
      expect(r.status).toBe(200);
      accepted.push(r.json.id as string);
      await worker.takeJob(30_000);
      clock.advance(1_000);
      expect((await worker.done(r.json.id as string, { output: { i } })).status).toBe(200);
      clock.advance(1_000); // past the spend cache
    }
    // 0.001 and 0.002 are under 0.0025; the third job made it 0.003.
    expect(accepted).toHaveLength(3);
    expect(refused).toMatchObject({ code: 'BUDGET_EXCEEDED', budgetUsd: 0.0025, budgetPeriod: 'day', spentUsd: 0.003, resetsAt: '2030-01-16T00:00:00.000Z' });
    expect(refused!.error).toMatch(/budgeted .* spent 0\.003 USD of its budget of 0\.0025 USD per day; it resets at 2030-01-16T00:00:00\.000Z/);
    expect((await client.runsync({ input: {} })).status).toBe(402);
    const openai = await call(t.url, 'POST', `/v2/${id}/openai/v1/chat/completions`, { key: created.key, body: { model: 'm', messages: [{ role: 'user', content: 'hi' }] } });
    expect(openai.status).toBe(402);
    const listed = ((await admin(t, 'GET', '/keys')).json.keys as Json[]).find((k) => k.id === created.id);
    expect(listed).toMatchObject({ budget: { spentUsd: '0.003', budgetUsd: '0.0025' } });

    clock.advance(2 * 3_600_000); // 2030-01-16: a new day, a new budget
    const again = await client.run({ input: { again: true } });
    expect(again.status).toBe(200);
  }, 120_000);

  it('maxConcurrentJobs: the key\'s queued + running jobs past it are answered 429 with Retry-After', async () => {
    const id = uniqueId('capped');
    await t.createEndpoint(id);
    const created = (await t.admin.createKey({ name: `capped ${id}`, scopes: ['run'] })) as { id: string; key: string };
    expect((await admin(t, 'PATCH', `/keys/${created.id}`, { maxConcurrentJobs: 2 })).json).toMatchObject({ maxConcurrentJobs: 2, budget: null });
    const client = clientFor(t, id, created.key);
    const first = await client.submit();
    await client.submit();
    const third = await client.run();
    expect(third.status).toBe(429);
    expect(third.json).toMatchObject({ code: 'TOO_MANY_JOBS', maxConcurrentJobs: 2 });
    expect(third.headers.get('retry-after')).toBe('1');
    // Another key is not held by this one's cap.
    expect((await clientFor(t, id, await newKey(t, ['run'])).run()).status).toBe(200);
    expect((await client.cancel(first)).status).toBe(200);
    expect((await client.run()).status).toBe(200);
    // Bad limits are refused naming the field.
    expect((await admin(t, 'PATCH', `/keys/${created.id}`, { maxConcurrentJobs: 0 })).json).toMatchObject({ code: 'INVALID_PARAMETER', field: 'maxConcurrentJobs' });
    expect((await admin(t, 'PATCH', `/keys/${created.id}`, { budgetUsd: 5 })).json).toMatchObject({ code: 'INVALID_PARAMETER', field: 'budgetPeriod' });
    expect((await admin(t, 'PATCH', `/keys/${created.id}`, { budgetUsd: '1e-3', budgetPeriod: 'day' })).json).toMatchObject({ field: 'budgetUsd' });
    expect((await admin(t, 'PATCH', '/keys/no-such-key', { maxConcurrentJobs: 1 })).status).toBe(404);
  }, 60_000);
});
