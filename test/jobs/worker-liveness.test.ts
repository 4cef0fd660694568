import { mkdtempSync, rmSync } from 'node:fs';
import { randomBytes } from 'node:crypto';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pino } from 'pino';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { createGateway, type Gateway } from '../../src/gateway.js';
import { PING_GRACE_MS } from '../../src/jobs/worker-service.js';
import { DEFAULTS } from '../../src/config/config.js';
import { parseEndpointSettings } from '../../src/jobs/endpoint-settings.js';
import { parseSubmitBody } from '../../src/jobs/policy.js';
import { createSecretBox } from '../../src/security/secret-box.js';
import { createSqliteStore } from '../../src/store/sqlite/sqlite-store.js';
import type { Store } from '../../src/store/store.js';
import type { EndpointRecord } from '../../src/model/records.js';
import { createLocalNotifier } from '../../src/store/local-notifier.js';

const WORKER_LOST_MS = 4_000;
/** The touch throttle for this workerLostMs: min(1 s, workerLostMs / 4). */
const TOUCH_EVERY_MS = 1_000;
const REAPER_INTERVAL_MS = 1_000;

/**
 * Worker liveness (issue 15), on a real SQLite file with a clock the test moves: a worker that
 * keeps taking is never declared lost however often it takes (the throttled touch writes its row
 * at least once per throttle period), and a reaper pass that fires late allows for its lateness.
 */
describe('worker liveness', () => {
  let dir: string;
  let app: Gateway;
  let store: Store;
  let clock: number;
  /** Timers the services set on the clock; the test fires them. */
  let timers: { ms: number; fn: () => void; cancelled: boolean }[];
  let touchWrites: number;
  let endpoint: EndpointRecord;
  const signal = new AbortController().signal;

  beforeEach(async () => {
    dir = mkdtempSync(join(tmpdir(), 'gantry-liveness-'));
    clock = 1_800_000_000_000;
    timers = [];
    touchWrites = 0;
    store = createSqliteStore({ file: join(dir, 'gantry.db') });
    await store.migrate();
    // Count the liveness-row writes through the real store's method.
    const touchWorker = store.touchWorker.bind(store);
    store.touchWorker = (args) => {
      touchWrites++;
      return touchWorker(args);
    };
    const secrets = createSecretBox(randomBytes(32));
    app = createGateway({
      config: { ...DEFAULTS, dataDir: dir, jobTakeWaitMs: 0, workerLostMs: WORKER_LOST_MS, reaperIntervalMs: REAPER_INTERVAL_MS },
      store,
      notifier: createLocalNotifier(),
      logger: pino({ level: 'silent' }),
      secrets,
      clock: {
        now: () => clock,
        after: (ms, fn) => {
          const timer = { ms, fn, cancelled: false };
          timers.push(timer);
          return () => {
            timer.cancelled = true;
          };
        },
      },
      baseUrl: () => 'http://127.0.0.1:0',
    });
    endpoint = parseEndpointSettings({ id: 'ep', maxAttempts: 3, executionTimeoutMs: 600_000 }, undefined, clock, secrets.seal);
    await store.createEndpoint(endpoint);
  });

  afterEach(async () => {
    await app.reaper.stop();
    app.closeWaits();
    await store.close();
    rmSync(dir, { recursive: true, force: true });
  });

  const submit = () => app.jobs.submit(endpoint, parseSubmitBody({ input: { n: 1 } }, endpoint.executionTimeoutMs), { sync: false, keyId: null });
  const lastSeen = async (workerId: string) => (await store.listWorkers('ep')).find((w) => w.id === workerId)?.lastSeenAt;

  it('a worker taking every 200 ms for longer than workerLostMs keeps a fresh row, written about once per throttle period', async () => {
    const job = await submit();
    const start = clock;
    const [taken] = await app.workers.take('ep', 'w1', 1, signal);
    expect(taken?.id).toBe(job.id);
    expect(touchWrites).toBe(1);
    expect(await lastSeen('w1')).toBe(start);

    // 10 s of clock (2.5 × workerLostMs), a take every 200 ms: 50 takes.
    const takes = 50;
    for (let i = 1; i <= takes; i++) {
      clock += 200;
      expect(await app.workers.take('ep', 'w1', 1, signal)).toEqual([]); // the queue is empty; the take still proves liveness
      // The row is never older than the throttle period, so never near workerLostMs.
      expect(clock - (await lastSeen('w1'))!).toBeLessThan(TOUCH_EVERY_MS);
      expect((await store.findStaleWorkers(clock - WORKER_LOST_MS)).map((w) => w.id)).not.toContain('w1');
      if (i % 5 === 0) expect(await app.reaper.runOnce()).toMatchObject({ requeued: 0, failed: 0 });
    }
    expect(await app.jobs.getJob('ep', job.id)).toMatchObject({ status: 'IN_PROGRESS', workerId: 'w1' });
    // The write carries the arrival time of the request that issued it: the last write was the take at start + 10 s.
    expect(await lastSeen('w1')).toBe(start + 10_000);
    // One write per throttle period (at start, +1 s, …, +10 s), not one per take.
    expect(touchWrites).toBe(1 + (takes * 200) / TOUCH_EVERY_MS);
  });

  it('a reaper pass that fires lateMs late releases only workers silent for more than workerLostMs + lateMs', async () => {
    const lateMs = 3_000;
    const jobA = await submit();
    const jobB = await submit();
    await store.touchWorker({ id: 'wb', endpointId: 'ep', now: clock - 3_500 });
    expect((await app.transitions.claim('ep', [{ workerId: 'wb', limit: 1 }]))[0]?.map((j) => j.id)).toEqual([jobA.id]);
    await store.touchWorker({ id: 'wa', endpointId: 'ep', now: clock - 2_000 });
    expect((await app.transitions.claim('ep', [{ workerId: 'wa', limit: 1 }]))[0]?.map((j) => j.id)).toEqual([jobB.id]);

    app.reaper.start();
    expect(timers).toHaveLength(1);
    const [timer] = timers;
    expect(timer!.ms).toBe(REAPER_INTERVAL_MS);
    // The pass was due at start + interval and fires lateMs after that.
    clock += REAPER_INTERVAL_MS + lateMs;
    timer!.fn();
    await app.reaper.stop(); // waits for the pass in flight

    // At the pass, wa was silent 6 s (> workerLostMs 4 s, < 4 s + 3 s late): kept.
    // wb was silent 7.5 s (> 7 s): released, its job requeued.
    expect(await app.jobs.getJob('ep', jobB.id)).toMatchObject({ status: 'IN_PROGRESS', workerId: 'wa' });
    expect((await app.jobs.getJob('ep', jobA.id))?.status).toBe('IN_QUEUE');
    // The same pass on time (runOnce: lateMs 0) releases wa too.
    expect(await app.reaper.runOnce()).toMatchObject({ requeued: 1 });
    expect((await app.jobs.getJob('ep', jobB.id))?.status).toBe('IN_QUEUE');
  });

  it('reconnect grace after a start: no worker is lost before the reaper has run workerLostMs, whatever its row says', async () => {
    const job = await submit();
    // wr was last heard from long before this gateway started (its row is from the earlier process).
    await store.touchWorker({ id: 'wr', endpointId: 'ep', now: clock - 60_000 });
    expect((await app.transitions.claim('ep', [{ workerId: 'wr', limit: 1 }]))[0]?.map((j) => j.id)).toEqual([job.id]);
    app.reaper.start();
    clock += WORKER_LOST_MS - 1;
    expect(await app.reaper.runOnce()).toMatchObject({ requeued: 0 });
    expect(await app.jobs.getJob('ep', job.id)).toMatchObject({ status: 'IN_PROGRESS', workerId: 'wr' });
    clock += 1;
    expect(await app.reaper.runOnce()).toMatchObject({ requeued: 1 });
    expect((await app.jobs.getJob('ep', job.id))?.status).toBe('IN_QUEUE');
  });

  it('reconnect grace after a start: a ping that does not list a held job returns it only once the gateway has run PING_GRACE_MS', async () => {
    const started = clock; // when the gateway (its worker service) was made
    clock -= 60_000; // the job was handed out by the earlier process, long ago
    const job = await submit();
    expect((await app.transitions.claim('ep', [{ workerId: 'wp', limit: 1 }]))[0]?.map((j) => j.id)).toEqual([job.id]);
    const health = { healthy: true, reason: null, version: '1.12.0' };
    clock = started + PING_GRACE_MS - 1;
    await app.workers.ping('ep', 'wp', [], health);
    expect(await app.jobs.getJob('ep', job.id)).toMatchObject({ status: 'IN_PROGRESS', workerId: 'wp' });
    clock = started + PING_GRACE_MS + 1;
    await app.workers.ping('ep', 'wp', [], health);
    expect((await app.jobs.getJob('ep', job.id))?.status).toBe('IN_QUEUE');
  });
});
