import { describe, expect, it } from 'vitest';
import { allocate, type AllocWorker } from '../../src/services/allocator.js';
import { NOW, ep, host } from './allocator-fixtures.js';

const MIN = 60_000;

const starting = (id: string): AllocWorker => ({ id, busy: false, starting: true });
const busySince = (id: string, at: number): AllocWorker => ({ id, busy: true, starting: false, busySince: at });

describe('allocate: aging and preemption', () => {
  it('keeps the worker a lower priority got for aging against the priority it went before, until that one has aged past it', () => {
    // `old` (priority 30) has waited 5 minutes: rank 80. Its first worker, still starting, holds the only GPU.
    const hosts = [host('a', ['L4'], { 'old-1': ['0'] })];
    const old = ep('old', { priority: 30, workers: [starting('old-1')], waitingSince: NOW - 5 * MIN });
    const fresh = allocate({ now: NOW, hosts, endpoints: [old, ep('hi', { priority: 60, want: 1, waitingSince: NOW - 1_000 })] });
    expect(fresh.get('old')!.reclaim).toEqual([]);
    expect(fresh.get('hi')).toMatchObject({ start: 0, waiting: 1 });
    // Once `hi` has waited 3 minutes (rank 90 > 80) it may take it.
    const aged = allocate({ now: NOW, hosts, endpoints: [old, ep('hi', { priority: 60, want: 1, waitingSince: NOW - 3 * MIN })] });
    expect(aged.get('old')!.reclaim.map((o) => o.workerId)).toEqual(['old-1']);
    // A second worker of `old` counts at its plain priority: it goes for `hi` at once.
    const two = [host('a', ['L4', 'L4'], { 'old-1': ['0'], 'old-2': ['1'] })];
    const more = allocate({ now: NOW, hosts: two, endpoints: [ep('old', { priority: 30, workers: [starting('old-1'), starting('old-2')], waitingSince: NOW - 5 * MIN }), ep('hi', { priority: 60, want: 2, waitingSince: NOW - 1_000 })] });
    expect(more.get('old')!.reclaim).toHaveLength(1);
  });

  it('preempts the busy worker whose job started last (the least work lost)', () => {
    const hosts = [host('a', ['L4', 'L4', 'L4'], { 'lo-1': ['0'], 'lo-2': ['1'], 'lo-3': ['2'] })];
    const lo = ep('lo', { priority: 10, preemptible: true, workers: [busySince('lo-1', NOW - 100_000), busySince('lo-2', NOW - 5_000), busySince('lo-3', NOW - 50_000)] });
    const out = allocate({ now: NOW, hosts, endpoints: [lo, ep('hi', { priority: 90, want: 2 })] });
    expect(out.get('lo')!.preempt.map((o) => o.workerId)).toEqual(['lo-2', 'lo-3']);
  });
});
