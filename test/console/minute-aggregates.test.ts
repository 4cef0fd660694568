// The per-minute aggregates behind the console's charts: the store's additive rows on both
// backends (real SQLite file, real PostgreSQL schema), percentiles from the buckets, and the
// charts route of a real gateway counting jobs that really ran.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pino from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DEFAULTS, loadConfig } from '../../src/config/config.js';
import { bucketOf, createMinuteRecorder, percentile } from '../../src/console/minute-recorder.js';
import { initialJob } from '../../src/jobs/transitions.js';
import { createReaper } from '../../src/services/reaper.js';
import { emptyBuckets, type MinuteDelta } from '../../src/store/minute-store.js';
import { createPostgresStore } from '../../src/store/postgres/postgres-store.js';
import { createSqliteStore } from '../../src/store/sqlite/sqlite-store.js';
import type { Store } from '../../src/store/store.js';
import { startTestGantry, type TestGantry } from '../helpers/gantry.js';
import { createManualClock } from '../helpers/clock.js';
import { createTestSchema, type TestSchema } from '../helpers/postgres.js';

const MIN = 60_000;
const T0 = 1_800_000_000_000 - (1_800_000_000_000 % MIN);

function delta(endpointId: string, minute: number, fields: Partial<MinuteDelta>): MinuteDelta {
  return { endpointId, minute, submitted: 0, completed: 0, failed: 0, queueDepth: 0, delay: emptyBuckets(), execution: emptyBuckets(), ...fields };
}

const withBucket = (index: number, count: number): number[] => {
  const b = emptyBuckets();
  b[index] = count;
  return b;
};

describe.each(['sqlite', 'postgres'] as const)('job_minutes on %s', (backend) => {
  let store: Store;
  let dir: string | undefined;
  let schema: TestSchema | undefined;
  beforeAll(async () => {
    if (backend === 'sqlite') {
      dir = mkdtempSync(join(tmpdir(), 'gantry-minutes-'));
      store = createSqliteStore({ file: join(dir, 'g.db') });
    } else {
      schema = await createTestSchema('minutes');
      store = createPostgresStore({ connectionString: schema.url });
    }
    await store.migrate();
  });
  afterAll(async () => {
    await store.close();
    if (dir) rmSync(dir, { recursive: true, force: true });
    await schema?.drop();
  });

  it('adds deltas to the same minute (two gateways), keeps the deepest queue, reads a range in order', async () => {
    await store.addMinutes([delta('ep', T0, { submitted: 3, completed: 2, failed: 1, queueDepth: 5, delay: withBucket(2, 2), execution: withBucket(7, 3) })]);
    await store.addMinutes([
      delta('ep', T0, { submitted: 1, completed: 1, queueDepth: 2, delay: withBucket(2, 1), execution: withBucket(8, 1) }),
      delta('ep', T0 + MIN, { submitted: 4 }),
      delta('other', T0, { submitted: 9 }),
    ]);
    const rows = await store.readMinutes({ endpointId: 'ep', from: T0, to: T0 + 2 * MIN });
    expect(rows.map((r) => r.minute)).toEqual([T0, T0 + MIN]);
    expect(rows[0]).toMatchObject({ endpointId: 'ep', submitted: 4, completed: 3, failed: 1, queueDepth: 5 });
    expect(rows[0]!.delay).toEqual(withBucket(2, 3));
    expect(rows[0]!.execution[7]).toBe(3);
    expect(rows[0]!.execution[8]).toBe(1);
    expect(await store.readMinutes({ endpointId: 'ep', from: T0 + MIN, to: T0 + 2 * MIN })).toHaveLength(1);
  });

  it('the reaper deletes minutes older than minutesKeepDays (GANTRY_MINUTES_KEEP_DAYS) and keeps the newer ones', async () => {
    const DAY = 24 * 60 * MIN;
    const now = T0 + 100 * DAY;
    await store.addMinutes([delta('kept', now - 3 * DAY - MIN, { submitted: 1 }), delta('kept', now - 3 * DAY + MIN, { submitted: 2 }), delta('kept', now - MIN, { submitted: 3 })]);
    const clock = createManualClock(now);
    const none = async () => [];
    const reaper = createReaper({
      transitions: { timeOutRunning: none, expireQueued: none, releaseWorkers: async () => ({ requeued: [], failed: [] }), deleteExpired: async () => 0 },
      workers: { touchWaiting: async () => {} },
      store,
      config: { ...DEFAULTS, minutesKeepDays: 3 },
      logger: pino({ level: 'silent' }),
      clock,
    });
    // The older rows of the test above go too (this describe's store is shared).
    expect((await reaper.runOnce()).minutes).toBeGreaterThanOrEqual(1);
    const left = await store.readMinutes({ endpointId: 'kept', from: 0, to: now + MIN });
    expect(left.map((m) => m.submitted)).toEqual([2, 3]);
    expect(await reaper.runOnce()).toMatchObject({ minutes: 0 });
  });

  it('the recorder writes no minute for an idle endpoint, nor one for an endpoint deleted before the write', async () => {
    const at = T0 + 500 * MIN;
    const job = (id: string, endpointId: string) =>
      initialJob({ id, endpointId, inputBytes: 2, webhook: null, s3Config: null, executionTimeoutMs: MIN, lowPriority: false, ttlMs: 60 * MIN, retentionMs: MIN, maxAttempts: 1, sync: false, keyId: null, now: at });
    await store.insertJob({ job: job('queued-1', 'queued'), inputJson: '{}' });
    const recorder = createMinuteRecorder(() => at);
    const endpoints = [{ id: 'idle' }, { id: 'busy' }, { id: 'queued' }];
    recorder.start({ store, endpoints: { list: async () => endpoints }, logger: pino({ level: 'silent' }), intervalMs: 3_600_000 });
    recorder.observer.submitted(job('busy-1', 'busy'));
    recorder.observer.submitted(job('deleted-1', 'deleted'));
    await recorder.stop();
    const span = (endpointId: string) => store.readMinutes({ endpointId, from: at, to: at + MIN });
    expect(await span('idle')).toEqual([]);
    expect(await span('deleted')).toEqual([]);
    // busy-1 was in the queue as far as the transitions tell (the store never saw it here).
    expect((await span('busy')).map((m) => [m.submitted, m.queueDepth])).toEqual([[1, 1]]);
    expect((await span('queued')).map((m) => [m.submitted, m.queueDepth])).toEqual([[0, 1]]);
  });

  it('the recorder keeps the deepest queue between samples: a burst taken before the next sample still shows', async () => {
    const at = T0 + 700 * MIN;
    const job = (id: string) =>
      initialJob({ id, endpointId: 'burst', inputBytes: 2, webhook: null, s3Config: null, executionTimeoutMs: MIN, lowPriority: false, ttlMs: 60 * MIN, retentionMs: MIN, maxAttempts: 1, sync: false, keyId: null, now: at });
    const recorder = createMinuteRecorder(() => at);
    recorder.start({ store, endpoints: { list: async () => [{ id: 'burst' }] }, logger: pino({ level: 'silent' }), intervalMs: 3_600_000 });
    const burst = [1, 2, 3, 4, 5, 6].map((i) => job(`burst-${i}`));
    for (const j of burst) recorder.observer.submitted(j);
    // All six taken before any sample of the store: the queue was 6 deep for a moment.
    recorder.observer.started(burst.map((j) => ({ ...j, status: 'IN_PROGRESS' as const, startedAt: at + 1 })));
    const late = job('burst-7');
    recorder.observer.submitted(late);
    recorder.observer.ended({ ...late, status: 'CANCELLED', finishedAt: at + 2 });
    await recorder.stop();
    expect((await store.readMinutes({ endpointId: 'burst', from: at, to: at + MIN })).map((m) => [m.submitted, m.queueDepth])).toEqual([[7, 6]]);
  });
});

describe('GANTRY_MINUTES_KEEP_DAYS', () => {
  it('defaults to 7 days, at least the charts\' longest span (1 day), and names the variable when refused', () => {
    expect(loadConfig({}).minutesKeepDays).toBe(7);
    expect(loadConfig({ GANTRY_MINUTES_KEEP_DAYS: '30' }).minutesKeepDays).toBe(30);
    expect(() => loadConfig({ GANTRY_MINUTES_KEEP_DAYS: '0' })).toThrow(/GANTRY_MINUTES_KEEP_DAYS/);
  });
});

describe('percentiles from buckets', () => {
  it('places values in buckets and reads p70/p90/p98 back within the right bucket', () => {
    expect(bucketOf(0)).toBe(0);
    expect(bucketOf(5)).toBe(0);
    expect(bucketOf(6)).toBe(1);
    expect(bucketOf(10_000_000)).toBe(emptyBuckets().length - 1);
    const b = emptyBuckets();
    b[bucketOf(20)] = 70; // 10 < x <= 25
    b[bucketOf(400)] = 20; // 250 < x <= 500
    b[bucketOf(4_000)] = 10; // 2500 < x <= 5000
    expect(percentile(b, 0.7)).toBe(25);
    const p90 = percentile(b, 0.9)!;
    expect(p90).toBeGreaterThan(250);
    expect(p90).toBeLessThanOrEqual(500);
    const p98 = percentile(b, 0.98)!;
    expect(p98).toBeGreaterThan(2_500);
    expect(p98).toBeLessThanOrEqual(5_000);
    expect(percentile(emptyBuckets(), 0.9)).toBeNull();
  });
});

describe('the charts route', () => {
  let t: TestGantry;
  beforeAll(async () => {
    t = await startTestGantry();
  });
  afterAll(async () => {
    await t.close();
  });

  it('counts submitted, completed and failed jobs per minute with delay and execution percentiles', async () => {
    await t.createEndpoint('charted');
    const env = t.workerEnv('charted');
    const key = env.RUNPOD_AI_API_KEY!;
    const run = (input: unknown) => fetch(`${t.url}/v2/charted/run`, { method: 'POST', headers: { authorization: `Bearer ${t.adminKey}` }, body: JSON.stringify({ input }) });
    for (const i of [1, 2, 3]) expect((await run({ i })).status).toBe(200);
    const take = await fetch(`${t.url}/v2/charted/job-take-batch/w1?batch_size=3`, { headers: { authorization: key } });
    const taken = (await take.json()) as { job?: { id: string }[] } | { id: string }[];
    const jobs = Array.isArray(taken) ? taken : (taken.job ?? []);
    expect(jobs).toHaveLength(3);
    const done = (id: string, body: unknown) => fetch(`${t.url}/v2/charted/job-done/w1/${id}`, { method: 'POST', headers: { authorization: key }, body: JSON.stringify(body) });
    await done(jobs[0]!.id, { output: 1 });
    await done(jobs[1]!.id, { output: 2 });
    await done(jobs[2]!.id, { error: 'boom' });

    const session = await fetch(`${t.url}/console/api/session`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ key: t.adminKey }) });
    const cookie = (session.headers.get('set-cookie') ?? '').split(';')[0]!;
    const res = await fetch(`${t.url}/console/api/charts/charted?minutes=5`, { headers: { cookie } });
    expect(res.status).toBe(200);
    const body = (await res.json()) as { points: { t: number; submitted: number; completed: number; failed: number; delay: { p70: number | null }; execution: { p98: number | null } }[] };
    expect(body.points).toHaveLength(5);
    const sum = (f: 'submitted' | 'completed' | 'failed') => body.points.reduce((a, p) => a + p[f], 0);
    expect([sum('submitted'), sum('completed'), sum('failed')]).toEqual([3, 2, 1]);
    expect(body.points.some((p) => p.delay.p70 !== null && p.execution.p98 !== null)).toBe(true);
    expect((await fetch(`${t.url}/console/api/charts/nope`, { headers: { cookie } })).status).toBe(404);
    expect((await fetch(`${t.url}/console/api/charts/charted?minutes=0`, { headers: { cookie } })).status).toBe(400);
    expect((await fetch(`${t.url}/console/api/charts/charted`)).status).toBe(401);
  });
});
