import { mkdtempSync, rmSync } from 'node:fs';
import { randomBytes } from 'node:crypto';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pino } from 'pino';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { createGateway, type Gateway } from '../../src/gateway.js';
import { DEFAULTS } from '../../src/config/config.js';
import { parseEndpointSettings } from '../../src/jobs/endpoint-settings.js';
import { parseSubmitBody } from '../../src/jobs/policy.js';
import { initialJob } from '../../src/jobs/transitions.js';
import { createSecretBox, type SecretBox } from '../../src/security/secret-box.js';
import { createSqliteStore } from '../../src/store/sqlite/sqlite-store.js';
import type { Store } from '../../src/store/store.js';
import type { EndpointRecord } from '../../src/model/records.js';
import { createLocalNotifier } from '../../src/store/local-notifier.js';

/**
 * The job state machine at the service level, on a real SQLite file, with a clock the test
 * moves: timeouts, ttl expiry, lost workers and retention without waiting on real time.
 */
describe('job service state machine', () => {
  let dir: string;
  let app: Gateway;
  let store: Store;
  let secrets: SecretBox;
  let clock: number;
  let endpoint: EndpointRecord;
  const signal = new AbortController().signal;

  beforeEach(async () => {
    dir = mkdtempSync(join(tmpdir(), 'gantry-jobs-'));
    clock = 1_800_000_000_000;
    store = createSqliteStore({ file: join(dir, 'gantry.db') });
    await store.migrate();
    secrets = createSecretBox(randomBytes(32));
    app = createGateway({
      config: { ...DEFAULTS, dataDir: dir, jobTakeWaitMs: 0, workerLostMs: 30_000 },
      store,
      notifier: createLocalNotifier(),
      logger: pino({ level: 'silent' }),
      secrets,
      clock: { now: () => clock, after: () => () => {} },
      baseUrl: () => 'http://127.0.0.1:0',
    });
    endpoint = parseEndpointSettings({ id: 'ep', maxAttempts: 2, executionTimeoutMs: 60_000 }, undefined, clock, secrets.seal);
    await store.createEndpoint(endpoint);
  });

  afterEach(async () => {
    app.closeWaits();
    await store.close();
    rmSync(dir, { recursive: true, force: true });
  });

  const submit = (body: unknown = { input: { n: 1 } }, sync = false) =>
    app.jobs.submit(endpoint, parseSubmitBody(body, endpoint.executionTimeoutMs), { sync, keyId: null });
  const take = async (workerId = 'w1', limit = 1) => (await app.transitions.claim('ep', [{ workerId, limit }]))[0]!;

  it('runs a job through queue, progress and completion', async () => {
    const job = await submit();
    expect(job.status).toBe('IN_QUEUE');
    clock += 40;
    const [taken] = await take();
    expect(taken?.id).toBe(job.id);
    expect(taken?.status).toBe('IN_PROGRESS');
    await app.workers.done('ep', 'w1', job.id, { status: 'IN_PROGRESS', output: { pct: 50 } });
    expect((await app.jobs.getJob('ep', job.id))?.outputJson).toBe('{"pct":50}');
    clock += 100;
    const outcome = await app.workers.done('ep', 'w1', job.id, { output: { ok: true } });
    expect(outcome.kind).toBe('finished');
    const done = await app.jobs.getJob('ep', job.id);
    expect(done).toMatchObject({ status: 'COMPLETED', outputJson: '{"ok":true}', startedAt: job.queuedAt + 40, finishedAt: job.queuedAt + 140 });
    // A late progress post and a duplicate result change nothing.
    expect(await app.workers.done('ep', 'w1', job.id, { status: 'IN_PROGRESS', output: 'late' })).toEqual({ kind: 'progress', applied: false });
    expect((await app.workers.done('ep', 'w1', job.id, { output: { other: 1 } })).kind).toBe('ignored');
    expect((await app.jobs.getJob('ep', job.id))?.outputJson).toBe('{"ok":true}');
  });

  it('refuses a result from a worker that does not hold the job', async () => {
    const job = await submit();
    await take('w1');
    expect(await app.workers.done('ep', 'w2', job.id, { output: 1 })).toMatchObject({ kind: 'refused', refusal: 'not-held', job: { id: job.id, status: 'IN_PROGRESS' } });
    expect(await app.workers.done('ep', 'w1', 'nope', { output: 1 })).toEqual({ kind: 'refused', refusal: 'job-not-found', jobId: 'nope' });
    expect((await app.jobs.getJob('ep', job.id))?.status).toBe('IN_PROGRESS');
  });

  it('times out a running job after its execution timeout and tells the worker', async () => {
    const job = await submit({ input: {}, policy: { executionTimeout: 10_000 } });
    await take('w1');
    const reaper = app.reaper;
    clock += 9_999;
    expect((await reaper.runOnce()).timedOut).toBe(0);
    clock += 1;
    expect((await reaper.runOnce()).timedOut).toBe(1);
    expect((await app.jobs.getJob('ep', job.id))?.status).toBe('TIMED_OUT');
    expect(await app.workers.stops('ep', 'w1', signal)).toEqual([job.id]);
    // The worker's late result is acknowledged and ignored.
    expect((await app.workers.done('ep', 'w1', job.id, { output: 'late' })).kind).toBe('ignored');
    expect((await app.jobs.getJob('ep', job.id))?.status).toBe('TIMED_OUT');
  });

  it('expires a job whose ttl passes in the queue', async () => {
    const job = await submit({ input: {}, policy: { ttl: 10_000 } });
    clock += 10_000;
    await app.reaper.runOnce();
    const expired = await app.jobs.getJob('ep', job.id);
    expect(expired).toMatchObject({ status: 'TIMED_OUT', error: 'ttl expired in queue' });
    expect(await take()).toEqual([]);
  });

  it('requeues the jobs of a lost worker, then fails them after maxAttempts', async () => {
    const job = await submit();
    await store.touchWorker({ id: 'w1', endpointId: 'ep', now: clock });
    await take('w1');
    const reaper = app.reaper;
    clock += 30_001;
    expect(await reaper.runOnce()).toMatchObject({ requeued: 1, failed: 0 });
    expect((await app.jobs.getJob('ep', job.id))?.status).toBe('IN_QUEUE');
    await store.touchWorker({ id: 'w2', endpointId: 'ep', now: clock });
    expect((await take('w2'))[0]?.attempts).toBe(2);
    clock += 30_001;
    expect(await reaper.runOnce()).toMatchObject({ requeued: 0, failed: 1 });
    expect(await app.jobs.getJob('ep', job.id)).toMatchObject({ status: 'FAILED', error: 'worker lost' });
  });

  it('returns a job its worker never listed in pings to the queue', async () => {
    const job = await submit();
    await take('w1');
    const health = { healthy: true, reason: null, version: '1.12.0' };
    await app.workers.ping('ep', 'w1', [], health);
    expect((await app.jobs.getJob('ep', job.id))?.status).toBe('IN_PROGRESS'); // still within the grace
    clock += 15_001;
    await app.workers.ping('ep', 'w1', [job.id], health); // listed: kept
    expect((await app.jobs.getJob('ep', job.id))?.status).toBe('IN_PROGRESS');
    await app.workers.ping('ep', 'w1', [], { ...health, version: null }); // no version: not trusted
    expect((await app.jobs.getJob('ep', job.id))?.status).toBe('IN_PROGRESS');
    await app.workers.ping('ep', 'w1', [], health);
    // The hand-out counts toward maxAttempts (a worker that drops every job it takes must not loop it forever).
    expect(await app.jobs.getJob('ep', job.id)).toMatchObject({ status: 'IN_QUEUE', attempts: 1, workerId: null });
  });

  it('cancels queued and running jobs, and only those', async () => {
    const running = await submit();
    await app.transitions.claim('ep', [{ workerId: 'w1', limit: 1 }]);
    const queued = await submit();
    expect((await app.jobs.cancel('ep', queued.id)).ok).toBe(true);
    expect((await app.jobs.cancel('ep', running.id)).ok).toBe(true);
    expect(await app.workers.stops('ep', 'w1', signal)).toEqual([running.id]);
    expect(await app.jobs.cancel('ep', running.id)).toMatchObject({ ok: false, reason: 'wrong-state' });
    expect(await app.jobs.cancel('ep', 'missing')).toMatchObject({ ok: false, reason: 'not-found' });
  });

  it('retries failed jobs until their result expires, and never completed ones', async () => {
    const job = await submit();
    await take('w1');
    await app.workers.done('ep', 'w1', job.id, { error: 'boom' });
    const retried = await app.jobs.retry('ep', job.id);
    expect(retried).toMatchObject({ ok: true, job: { status: 'IN_QUEUE', retries: 1, error: null } });
    // The same input is queued again: the next hand-out carries it.
    expect((await take('w2'))[0]).toMatchObject({ id: job.id, inputJson: '{"n":1}' });
    await app.workers.done('ep', 'w2', job.id, { error: 'again' });
    clock += DEFAULTS.asyncRetentionMs;
    expect(await app.jobs.retry('ep', job.id)).toMatchObject({ ok: false, reason: 'expired' });
    await app.reaper.runOnce();
    expect(await app.jobs.getJob('ep', job.id)).toBeUndefined();

    const ok = await submit();
    await take('w1');
    await app.workers.done('ep', 'w1', ok.id, { output: 1 });
    expect(await app.jobs.retry('ep', ok.id)).toMatchObject({ ok: false, reason: 'wrong-state' });
  });

  it('keeps sync results 60 s and lets status?ttl shorten retention', async () => {
    const sync = await submit({ input: {} }, true);
    expect(sync.id.startsWith('sync-')).toBe(true);
    const async = await submit();
    const [a, b] = await take('w1', 2);
    await app.workers.done('ep', 'w1', a!.id, { output: 1 });
    await app.workers.done('ep', 'w1', b!.id, { output: 2 });
    await app.jobs.status('ep', async.id, 5_000);
    const reaper = app.reaper;
    clock += 5_000;
    await reaper.runOnce();
    expect(await app.jobs.getJob('ep', async.id)).toBeUndefined();
    expect(await app.jobs.getJob('ep', sync.id)).toBeDefined();
    clock += 55_000;
    await reaper.runOnce();
    expect(await app.jobs.getJob('ep', sync.id)).toBeUndefined();
  });

  it('purges queued jobs only', async () => {
    const running = await submit();
    await take('w1');
    await submit();
    await submit();
    expect(await app.jobs.purgeQueue('ep')).toBe(2);
    expect((await app.jobs.getJob('ep', running.id))?.status).toBe('IN_PROGRESS');
    expect((await app.jobs.health('ep')).jobs).toMatchObject({ inQueue: 0, inProgress: 1, cancelled: 2 });
  });

  it('purges a long queue in batches of at most 1,000 jobs, each handed on once committed; a job queued after the purge began stays', async () => {
    const base = { endpointId: 'ep', inputBytes: 2, webhook: null, s3Config: null, executionTimeoutMs: 60_000, lowPriority: false, ttlMs: 3_600_000, retentionMs: 3_600_000, maxAttempts: 2, sync: false, keyId: null, now: clock };
    await Promise.all(Array.from({ length: 2_345 }, (_, i) => store.insertJob({ job: initialJob({ ...base, id: `bulk-${String(i).padStart(5, '0')}` }), inputJson: '{}' })));
    const batches: number[] = [];
    const seen = new Set<string>();
    const count = await app.transitions.purge('ep', (jobs) => {
      batches.push(jobs.length);
      for (const job of jobs) seen.add(job.id);
    });
    expect(count).toBe(2_345);
    expect(batches).toEqual([1_000, 1_000, 345]);
    expect(seen.size).toBe(2_345);
    expect((await app.jobs.health('ep')).jobs).toMatchObject({ inQueue: 0, cancelled: 2_345 });
    clock += 1;
    await submit();
    clock -= 1;
    expect(await app.transitions.purge('ep')).toBe(0);
    expect((await app.jobs.health('ep')).jobs).toMatchObject({ inQueue: 1 });
  });

  it('hands a job submitted during a long-poll to the waiting worker', async () => {
    const controller = new AbortController();
    const waiting = app.takeQueue.take('ep', 'w1', 4, 5_000, controller.signal);
    const job = await submit();
    const jobs = await waiting;
    expect(jobs.map((j) => j.id)).toEqual([job.id]);
    expect(jobs[0]?.workerId).toBe('w1');
  });

  it('refuses a full queue with 429', async () => {
    const small = parseEndpointSettings({ id: 'small', workersMax: 0 }, undefined, clock, secrets.seal);
    await store.createEndpoint(small);
    const body = parseSubmitBody({ input: {} }, 600_000);
    for (let i = 0; i < 51; i++) await app.jobs.submit(small, body, { sync: false, keyId: null });
    await expect(app.jobs.submit(small, body, { sync: false, keyId: null })).rejects.toMatchObject({ status: 429, code: 'QUEUE_FULL' });
  });

  it('seals s3Config at rest and opens it only for the worker', async () => {
    const s3Config = { accessId: 'AK', accessSecret: 'very-secret', bucketName: 'b', endpointUrl: 'http://s3.local' };
    const job = await submit({ input: {}, s3Config });
    const stored = await store.getJob(job.id);
    expect(stored?.s3Config).not.toContain('very-secret');
    const [taken] = await take();
    expect(JSON.parse(app.workers.renderForWorker(taken!) as string)).toMatchObject({ id: job.id, s3Config });
  });
});
