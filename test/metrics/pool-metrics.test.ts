// The pool's numbers in /metrics: cold starts (src/pool/cold-starts.ts: counts, histogram,
// p70/p90/p98 over a bounded window) and preemptions (gantry_preemptions_total, counted by the
// JobObserver when the allocator takes jobs back from a worker), on a real gateway over SQLite.
import { mkdtempSync, rmSync } from 'node:fs';
import { randomBytes } from 'node:crypto';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pino } from 'pino';
import { describe, expect, it } from 'vitest';
import { DEFAULTS } from '../../src/config/config.js';
import { createGateway } from '../../src/gateway.js';
import { parseEndpointSettings } from '../../src/jobs/endpoint-settings.js';
import { parseSubmitBody } from '../../src/jobs/policy.js';
import { createMetrics } from '../../src/metrics/metrics-feature.js';
import { registerPoolMetrics } from '../../src/metrics/pool-metrics.js';
import { ColdStarts, quantile, WINDOW } from '../../src/pool/cold-starts.js';
import { createSecretBox } from '../../src/security/secret-box.js';
import { createLocalNotifier } from '../../src/store/local-notifier.js';
import { createSqliteStore } from '../../src/store/sqlite/sqlite-store.js';
import { systemClock } from '../../src/util/clock.js';

describe('cold starts (pool/cold-starts.ts)', () => {
  it('nearest-rank quantiles', () => {
    expect(quantile([], 0.9)).toBeNull();
    expect(quantile([10, 20, 30, 40], 0.7)).toBe(30);
    const hundred = Array.from({ length: 100 }, (_, i) => i + 1);
    expect([0.7, 0.9, 0.98].map((q) => quantile(hundred, q))).toEqual([70, 90, 98]);
  });

  it('counts every cold start, and keeps the quantiles over the last WINDOW of each kind', () => {
    const c = new ColdStarts();
    for (let i = 1; i <= 100; i++) c.record('start', i * 10);
    c.record('resume', 40);
    let s = c.stats();
    expect(s.start).toEqual({ count: 100, window: 100, p70Ms: 700, p90Ms: 900, p98Ms: 980, lastMs: 1000 });
    expect(s.resume).toEqual({ count: 1, window: 1, p70Ms: 40, p90Ms: 40, p98Ms: 40, lastMs: 40 });
    expect(s).toMatchObject({ count: 101, window: 101, lastMs: 40 });
    expect(s.buckets.resume.count).toBe(1);
    // Past the window the oldest go: 300 more fast starts, the slow ones are out of the quantiles but still counted.
    for (let i = 0; i < 3 * WINDOW; i++) c.record('start', 5);
    s = c.stats();
    expect(s.start).toMatchObject({ count: 100 + 3 * WINDOW, window: WINDOW, p98Ms: 5 });
    expect(s.buckets.start.count).toBe(100 + 3 * WINDOW);
  });

  it('kept in the store: a new pool reads the same figures as the one that recorded them (past the window, sums to the last bit)', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'gantry-cold-ledger-'));
    const store = createSqliteStore({ file: join(dir, 'gantry.db') });
    await store.migrate();
    const errors: unknown[] = [];
    // A clock that moves between cold starts (the latest of all kinds is told by its time).
    let now = 1_000;
    const keeping = { ledger: store, endpointId: 'sd', now: () => (now += 7), onError: (err: unknown) => void errors.push(err) };
    const first = new ColdStarts(keeping);
    // Recorded before the stored figures are read: added on top of them, written after the read.
    first.record('start', 1);
    await first.loaded;
    let seed = 7;
    for (let i = 0; i < 2 * WINDOW + 40; i++) {
      seed = (seed * 1103515245 + 12345) % 2147483648;
      first.record(i % 5 === 0 ? 'resume' : 'start', 10 + (seed % 9000));
    }
    await first.flushed();
    const second = new ColdStarts(keeping);
    await second.loaded;
    expect(second.stats()).toEqual(first.stats());
    expect(second.stats().start.window).toBe(WINDOW);
    expect(errors).toEqual([]);
    await store.close();
    rmSync(dir, { recursive: true, force: true });
  });

  it('renders counters, a histogram and the recent quantiles per endpoint and kind', async () => {
    const { registry } = createMetrics();
    const c = new ColdStarts();
    c.record('start', 1500);
    c.record('resume', 80);
    const refresh = registerPoolMetrics(registry, { coldStarts: (id) => (id === 'sd' ? c.stats() : undefined) });
    refresh(['sd', 'none']);
    const text = await registry.metrics();
    expect(text).toContain('gantry_cold_starts_total{endpoint="sd",kind="start"} 1');
    expect(text).toContain('gantry_cold_starts_total{endpoint="sd",kind="resume"} 1');
    expect(text).toContain('gantry_cold_start_seconds_bucket{endpoint="sd",kind="resume",le="0.1"} 1');
    expect(text).toContain('gantry_cold_start_seconds_bucket{endpoint="sd",kind="start",le="1"} 0');
    expect(text).toContain('gantry_cold_start_seconds_bucket{endpoint="sd",kind="start",le="2"} 1');
    expect(text).toContain('gantry_cold_start_recent_seconds{endpoint="sd",kind="all",quantile="0.98"} 1.5');
    expect(text).toContain('gantry_cold_start_recent_seconds{endpoint="sd",kind="resume",quantile="0.7"} 0.08');
    expect(text).not.toContain('endpoint="none"');
  });
});

describe('gantry_preemptions_total', () => {
  it('counts the jobs the allocator takes back from a preempted worker, by endpoint', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'gantry-preempt-metrics-'));
    const store = createSqliteStore({ file: join(dir, 'gantry.db') });
    await store.migrate();
    const metrics = createMetrics();
    const secrets = createSecretBox(randomBytes(32));
    const app = createGateway({
      config: { ...DEFAULTS, dataDir: dir, jobTakeWaitMs: 0 },
      store,
      notifier: createLocalNotifier(),
      logger: pino({ level: 'silent' }),
      secrets,
      clock: systemClock,
      baseUrl: () => 'http://127.0.0.1:0',
      observers: { jobs: metrics.jobs },
    });
    try {
      const endpoint = parseEndpointSettings({ id: 'batch', preemptible: true }, undefined, Date.now(), secrets.seal);
      await store.createEndpoint(endpoint);
      for (let i = 0; i < 2; i++) await app.jobs.submit(endpoint, parseSubmitBody({ input: { i } }, endpoint.executionTimeoutMs), { sync: false, keyId: null });
      expect((await app.transitions.claim('batch', [{ workerId: 'w1', limit: 2 }]))[0]).toHaveLength(2);
      expect(await app.transitions.preempt('w1')).toHaveLength(2);
      // A worker holding nothing counts nothing.
      expect(await app.transitions.preempt('w1')).toEqual([]);
      const text = await metrics.registry.metrics();
      expect(text).toContain('gantry_preemptions_total{endpoint="batch"} 2');
      // Not a retry nor a lost worker.
      expect(text).toContain('gantry_jobs_requeued_total{endpoint="batch",reason="worker_lost"} 0');
    } finally {
      app.closeWaits();
      await store.close();
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
