// The reaper's retention of worker logs (docs/logs.md): lines older than GANTRY_LOG_KEEP_DAYS
// go, and each endpoint keeps at most GANTRY_LOG_MAX_LINES_PER_ENDPOINT of its newest lines.
// A real SQLite store; time moved by a manual clock.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pino } from 'pino';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { DEFAULTS } from '../../src/config/config.js';
import { createReaper } from '../../src/services/reaper.js';
import type { LogRecord } from '../../src/store/log-store.js';
import { createPostgresStore } from '../../src/store/postgres/postgres-store.js';
import { createSqliteStore } from '../../src/store/sqlite/sqlite-store.js';
import type { Store } from '../../src/store/store.js';
import { createManualClock } from '../helpers/clock.js';
import { createTestSchema } from '../helpers/postgres.js';

const DAY = 86_400_000;
const NOW = 1_700_000_000_000 + 100 * DAY;

describe('worker log retention', () => {
  let dir: string;
  let store: Store;
  beforeEach(async () => {
    dir = mkdtempSync(join(tmpdir(), 'gantry-log-retention-'));
    store = createSqliteStore({ file: join(dir, 'g.db') });
    await store.migrate();
  });
  afterEach(async () => {
    await store.close();
    rmSync(dir, { recursive: true, force: true });
  });

  it('deletes lines past GANTRY_LOG_KEEP_DAYS and trims each endpoint to GANTRY_LOG_MAX_LINES_PER_ENDPOINT', async () => {
    for (const id of ['busy', 'quiet']) {
      await store.createEndpoint({
        id, name: id, workersMin: 0, workersMax: 1, idleTimeout: 5, executionTimeoutMs: 600_000, scalerType: 'QUEUE_DELAY', scalerValue: 4, maxAttempts: 3,
        workerJson: null, webhookSecret: null, rateLimitsJson: null, priority: 50, preemptible: false, flashboot: false, shareWeight: 1, priceUnitsPerSecond: null, createdAt: NOW, updatedAt: NOW,
      });
    }
    const line = (endpointId: string, at: number, n: number): LogRecord => ({ at, endpointId, workerId: `${endpointId}-1`, jobId: null, stream: 'stdout', level: null, line: `${endpointId} ${n}` });
    await store.appendLogs([
      line('quiet', NOW - 4 * DAY, 0), // past 3 days: goes
      line('quiet', NOW - 2 * DAY, 1),
      ...Array.from({ length: 1_500 }, (_, i) => line('busy', NOW - DAY + i, i)),
    ]);
    const none = async () => [];
    const reaper = createReaper({
      transitions: { timeOutRunning: none, expireQueued: none, releaseWorkers: async () => ({ requeued: [], failed: [] }), deleteExpired: async () => 0 },
      workers: { touchWaiting: async () => {} },
      store,
      config: { ...DEFAULTS, logKeepDays: 3, logMaxLinesPerEndpoint: 1_000 },
      logger: pino({ level: 'silent' }),
      clock: createManualClock(NOW),
    });
    expect((await reaper.runOnce()).logs).toBe(1 + 500);
    expect((await store.readLogs({ endpointId: 'quiet', limit: 10 })).map((l) => l.line)).toEqual(['quiet 1']);
    const busy = await store.readLogs({ endpointId: 'busy', limit: 2_000 });
    expect(busy).toHaveLength(1_000);
    expect(busy.at(-1)?.line).toBe('busy 500');
    expect(await reaper.runOnce()).toMatchObject({ logs: 0 });
  });
});

describe.each(['sqlite', 'postgres'] as const)('worker log retention by bytes (%s)', (backend) => {
  let store: Store;
  let cleanup: () => Promise<void>;
  beforeEach(async () => {
    if (backend === 'sqlite') {
      const dir = mkdtempSync(join(tmpdir(), 'gantry-log-bytes-'));
      store = createSqliteStore({ file: join(dir, 'g.db') });
      cleanup = async () => {
        await store.close();
        rmSync(dir, { recursive: true, force: true });
      };
    } else {
      const schema = await createTestSchema('logbytes');
      store = createPostgresStore({ connectionString: schema.url, poolSize: 2 });
      cleanup = async () => {
        await store.close();
        await schema.drop();
      };
    }
    await store.migrate();
  });
  afterEach(async () => {
    await cleanup();
  });

  it('trims an endpoint to GANTRY_LOG_MAX_BYTES_PER_ENDPOINT when its lines are long, however few they are', async () => {
    await store.createEndpoint({
      id: 'wordy', name: 'wordy', workersMin: 0, workersMax: 1, idleTimeout: 5, executionTimeoutMs: 600_000, scalerType: 'QUEUE_DELAY', scalerValue: 4, maxAttempts: 3,
      workerJson: null, webhookSecret: null, rateLimitsJson: null, priority: 50, preemptible: false, flashboot: false, shareWeight: 1, priceUnitsPerSecond: null, createdAt: NOW, updatedAt: NOW,
    });
    // 1,500 lines of 4,000 bytes: 6 MB, far under the line bound; the byte bound (1 MB) keeps the newest 250.
    const long = (n: number): LogRecord => ({ at: NOW - DAY + n, endpointId: 'wordy', workerId: 'wordy-1', jobId: null, stream: 'stdout', level: null, line: `${String(n).padStart(5, '0')} ${'x'.repeat(3_994)}` });
    await store.appendLogs(Array.from({ length: 1_500 }, (_, i) => long(i)));
    const none = async () => [];
    const reaper = createReaper({
      transitions: { timeOutRunning: none, expireQueued: none, releaseWorkers: async () => ({ requeued: [], failed: [] }), deleteExpired: async () => 0 },
      workers: { touchWaiting: async () => {} },
      store,
      config: { ...DEFAULTS, logMaxLinesPerEndpoint: 200_000, logMaxBytesPerEndpoint: 1_000_000 },
      logger: pino({ level: 'silent' }),
      clock: createManualClock(NOW),
    });
    expect((await reaper.runOnce()).logs).toBe(1_250);
    const kept = await store.readLogs({ endpointId: 'wordy', limit: 2_000 });
    expect(kept).toHaveLength(250);
    expect(kept.at(-1)?.line.slice(0, 5)).toBe('01250');
    expect(await reaper.runOnce()).toMatchObject({ logs: 0 });
  });
});
