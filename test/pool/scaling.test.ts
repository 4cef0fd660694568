import { describe, expect, it } from 'vitest';
import type { ActiveWorker } from '../../src/pool/worker-pool.js';
import { planScale, type ScaleInput } from '../../src/services/scale-policy.js';
import type { QueueStats } from '../../src/model/records.js';

const NOW = 1_700_000_000_000;
const endpoint: ScaleInput['endpoint'] = { workersMin: 0, workersMax: 3, idleTimeout: 5, scalerType: 'QUEUE_DELAY', scalerValue: 4 };

function stats(overrides: Partial<QueueStats> = {}): QueueStats {
  return { inQueue: 0, inQueueBytes: 0, inQueueNormal: 0, oldestNormalQueuedAt: null, inProgress: 0, heldBy: new Map(), ...overrides };
}
const busy = (id: string): ActiveWorker => ({ id, starting: false, idleSince: null, busy: true, waiting: false });
const idle = (id: string, forMs: number): ActiveWorker => ({ id, starting: false, idleSince: NOW - forMs, busy: false, waiting: false });
const starting = (id: string): ActiveWorker => ({ id, starting: true, idleSince: null, busy: false, waiting: false });

describe('planScale', () => {
  it('QUEUE_DELAY: a queued job with no worker starts one at once', () => {
    const plan = planScale({ endpoint, now: NOW, workers: [], stats: stats({ inQueue: 1, inQueueNormal: 1, oldestNormalQueuedAt: NOW }) });
    expect(plan).toEqual({ start: 1, stop: [], throttled: 0 });
  });

  it('QUEUE_DELAY: adds a worker only once the oldest normal job waited over scalerValue s and none is starting', () => {
    const waiting = (ms: number) => stats({ inQueue: 5, inQueueNormal: 5, oldestNormalQueuedAt: NOW - ms, inProgress: 1 });
    expect(planScale({ endpoint, now: NOW, workers: [busy('a')], stats: waiting(3_000) }).start).toBe(0);
    expect(planScale({ endpoint, now: NOW, workers: [busy('a')], stats: waiting(4_001) }).start).toBe(1);
    expect(planScale({ endpoint, now: NOW, workers: [busy('a'), starting('b')], stats: waiting(9_000) }).start).toBe(0);
  });

  it('QUEUE_DELAY at workersMax reports the wanted worker as throttled', () => {
    const workers = [busy('a'), busy('b'), busy('c')];
    const plan = planScale({ endpoint, now: NOW, workers, stats: stats({ inQueue: 9, inQueueNormal: 9, oldestNormalQueuedAt: NOW - 10_000 }) });
    expect(plan).toEqual({ start: 0, stop: [], throttled: 1 });
  });

  it('REQUEST_COUNT: ceil((queued normal + running) / scalerValue), capped at workersMax', () => {
    const rc = { ...endpoint, scalerType: 'REQUEST_COUNT' as const, scalerValue: 2 };
    expect(planScale({ endpoint: rc, now: NOW, workers: [], stats: stats({ inQueue: 3, inQueueNormal: 3 }) }).start).toBe(2);
    expect(planScale({ endpoint: rc, now: NOW, workers: [busy('a')], stats: stats({ inQueue: 3, inQueueNormal: 3, inProgress: 1 }) }).start).toBe(1);
    expect(planScale({ endpoint: rc, now: NOW, workers: [], stats: stats({ inQueue: 20, inQueueNormal: 20 }) })).toEqual({ start: 3, stop: [], throttled: 7 });
  });

  it('lowPriority jobs alone never start a worker, with either scaler', () => {
    const low = stats({ inQueue: 4, inQueueNormal: 0, oldestNormalQueuedAt: null });
    expect(planScale({ endpoint, now: NOW, workers: [], stats: low })).toEqual({ start: 0, stop: [], throttled: 0 });
    const rc = { ...endpoint, scalerType: 'REQUEST_COUNT' as const, scalerValue: 1 };
    expect(planScale({ endpoint: rc, now: NOW, workers: [], stats: low })).toEqual({ start: 0, stop: [], throttled: 0 });
  });

  it('keeps workersMin running', () => {
    const min2 = { ...endpoint, workersMin: 2 };
    expect(planScale({ endpoint: min2, now: NOW, workers: [], stats: stats() }).start).toBe(2);
    expect(planScale({ endpoint: min2, now: NOW, workers: [idle('a', 60_000), idle('b', 60_000)], stats: stats() }).stop).toEqual([]);
    expect(planScale({ endpoint: min2, now: NOW, workers: [idle('a', 60_000), idle('b', 50_000), idle('c', 6_000)], stats: stats() }).stop).toEqual(['a']);
  });

  it('stops workers idle for idleTimeout, longest idle first, never busy ones', () => {
    const workers = [busy('a'), idle('b', 4_000), idle('c', 7_000), idle('d', 5_000)];
    expect(planScale({ endpoint, now: NOW, workers, stats: stats({ inProgress: 1 }) }).stop).toEqual(['c', 'd']);
  });

  it('REQUEST_COUNT keeps the demand: idle workers beyond it stop, not below it', () => {
    const rc = { ...endpoint, scalerType: 'REQUEST_COUNT' as const, scalerValue: 1 };
    const workers = [busy('a'), idle('b', 9_000), idle('c', 8_000)];
    expect(planScale({ endpoint: rc, now: NOW, workers, stats: stats({ inProgress: 2 }) }).stop).toEqual(['b']);
  });

  it('a lowered workersMax stops the extra workers at once, starting ones first', () => {
    const max1 = { ...endpoint, workersMax: 1 };
    const plan = planScale({ endpoint: max1, now: NOW, workers: [busy('a'), busy('b'), starting('c')], stats: stats({ inProgress: 2 }) });
    expect(plan.stop).toEqual(['c', 'a']);
  });
});
