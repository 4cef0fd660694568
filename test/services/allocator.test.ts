import { describe, expect, it } from 'vitest';
import { allocate, type AllocWorker } from '../../src/services/allocator.js';
import { NOW, ep, host, idle } from './allocator-fixtures.js';


const busy = (id: string): AllocWorker => ({ id, busy: true, starting: false });

describe('allocate', () => {
  it('gives free GPUs to the higher priority first; the other waits and is told who holds them', () => {
    const out = allocate({ now: NOW, hosts: [host('a', ['L4', 'L4'])], endpoints: [ep('lo', { priority: 10, want: 2 }), ep('sd-xl', { priority: 80, want: 3 })] });
    expect(out.get('sd-xl')).toMatchObject({ start: 2, waiting: 1 });
    expect(out.get('lo')).toMatchObject({ start: 0, waiting: 2, reclaim: [], preempt: [] });
    // sd-xl's third worker waits too: nothing lower than it holds a GPU.
    expect(out.get('lo')!.reason).toBe('waiting for room: no Docker host has 1 free GPU (a: 0 of 2 GPUs free); 2 L4 held by `sd-xl` at priority 80');
  });

  it('names the holders of the models the waiting worker takes, the biggest first', () => {
    const hosts = [host('a', ['L4', 'L4', 'L4', 'A100'], { 'x-1': ['0'], 'x-2': ['1'], 'x-3': ['2'], 'y-1': ['3'] })];
    const out = allocate({
      now: NOW,
      hosts,
      endpoints: [
        ep('x', { priority: 80, workers: [busy('x-1'), busy('x-2'), busy('x-3')] }),
        ep('y', { priority: 60, workers: [busy('y-1')] }),
        ep('z', { priority: 40, want: 1, gpuTypes: ['L4'] }),
      ],
    });
    expect(out.get('z')!.reason).toBe('waiting for room: no Docker host has 1 free L4 GPU (a: 0 of 3 L4 free); 3 L4 held by `x` at priority 80');
  });

  it('stops idle workers of a lower priority beyond their workersMin (never within it) for a waiting higher priority', () => {
    const hosts = [host('a', ['L4', 'L4', 'L4'], { 'lo-1': ['0'], 'lo-2': ['1'], 'lo-3': ['2'] })];
    const out = allocate({ now: NOW, hosts, endpoints: [ep('lo', { priority: 10, workersMin: 1, workers: [idle('lo-1'), idle('lo-2'), idle('lo-3')] }), ep('hi', { priority: 90, want: 3 })] });
    expect(out.get('lo')!.reclaim.map((s) => s.workerId)).toHaveLength(2);
    expect(out.get('lo')!.reclaim[0]!.why).toMatch(/^reclaimed for `hi` \(priority 90\): 1 L4 on a, idle beyond workersMin$/);
    // Two GPUs are being freed for hi; its third worker waits, lo's last worker being its minimum.
    expect(out.get('hi')).toMatchObject({ start: 0, waiting: 3, preempt: [] });
    expect(out.get('hi')!.reason).toMatch(/^waiting for room: 1 L4 on a being freed \(stopping workers of `lo`\)/);
  });

  it('preempts busy workers only of preemptible endpoints, after their idle ones', () => {
    const hosts = [host('a', ['L4', 'L4', 'L4'], { 'lo-1': ['0'], 'lo-2': ['1'], 'lo-3': ['2'] })];
    const lo = (preemptible: boolean) => ep('lo', { priority: 10, preemptible, workers: [busy('lo-1'), idle('lo-2'), busy('lo-3')] });
    const fixed = allocate({ now: NOW, hosts, endpoints: [lo(false), ep('hi', { priority: 90, want: 2 })] });
    expect(fixed.get('lo')).toMatchObject({ reclaim: [{ workerId: 'lo-2' }], preempt: [] });
    const yielding = allocate({ now: NOW, hosts, endpoints: [lo(true), ep('hi', { priority: 90, want: 2 })] });
    expect(yielding.get('lo')!.reclaim.map((s) => s.workerId)).toEqual(['lo-2']);
    expect(yielding.get('lo')!.preempt).toHaveLength(1);
    expect(yielding.get('lo')!.preempt[0]!.why).toMatch(/^preempted for `hi` \(priority 90\): 1 L4 on a, its jobs requeued$/);
    // Never for an equal or lower priority that is not over its share.
    const equal = allocate({ now: NOW, hosts, endpoints: [lo(true), ep('peer', { priority: 10, want: 2 })] });
    // lo holds 3, peer 0: one for peer from lo's idle worker; a second would leave lo below peer.
    expect(equal.get('lo')).toMatchObject({ reclaim: [{ workerId: 'lo-2' }], preempt: [] });
    expect(equal.get('peer')).toMatchObject({ start: 0, waiting: 2 });
    // A busy worker of an equal over its share: only once peer's oldest job has waited an aging step.
    const busyLo = ep('lo', { priority: 10, preemptible: true, workers: [busy('lo-1'), busy('lo-2'), busy('lo-3')] });
    expect(allocate({ now: NOW, hosts, endpoints: [busyLo, ep('peer', { priority: 10, want: 1, waitingSince: NOW - 10_000 })] }).get('lo')!.preempt).toEqual([]);
    expect(allocate({ now: NOW, hosts, endpoints: [busyLo, ep('peer', { priority: 10, want: 1, waitingSince: NOW - 60_000 })] }).get('lo')!.preempt).toHaveLength(1);
    const lower = allocate({ now: NOW, hosts, endpoints: [lo(true), ep('low', { priority: 5, want: 3 })] });
    expect(lower.get('lo')).toMatchObject({ reclaim: [], preempt: [] });
  });

  it('shares equal priorities by weight (max-min), from free GPUs and by reclaiming from one over its share', () => {
    const empty = allocate({ now: NOW, hosts: [host('a', Array(8).fill('L4'))], endpoints: [ep('a', { want: 8 }), ep('b', { want: 8, shareWeight: 3 })] });
    expect([empty.get('a')!.start, empty.get('b')!.start]).toEqual([2, 6]);
    // One endpoint's burst holds all four GPUs with idle workers: the other gets back to an even split, no further.
    const holders = { 'n-1': ['0'], 'n-2': ['1'], 'n-3': ['2'], 'n-4': ['3'] };
    const noisy = { workers: ['n-1', 'n-2', 'n-3', 'n-4'].map(idle), waitingSince: NOW - 1_000 };
    const out = allocate({ now: NOW, hosts: [host('a', Array(4).fill('L4'), holders)], endpoints: [ep('noisy', noisy), ep('quiet', { want: 4 })] });
    expect(out.get('noisy')!.reclaim).toHaveLength(2);
    expect(out.get('quiet')).toMatchObject({ start: 0, waiting: 4 });
    // Workers still starting are not taken for the same priority (two bursts would swap cold starts forever).
    const starting = { workers: ['n-1', 'n-2', 'n-3', 'n-4'].map((id) => ({ id, busy: false, starting: true })) };
    const kept = allocate({ now: NOW, hosts: [host('a', Array(4).fill('L4'), holders)], endpoints: [ep('noisy', starting), ep('quiet', { want: 4 })] });
    expect(kept.get('noisy')!.reclaim).toEqual([]);
  });

  it('keeps workersMin as a reservation: it may reclaim an idle worker of a higher priority beyond its own minimum', () => {
    const hosts = [host('a', ['L4'], { 'hi-1': ['0'] })];
    const out = allocate({ now: NOW, hosts, endpoints: [ep('hi', { priority: 90, workers: [idle('hi-1')] }), ep('base', { priority: 5, workersMin: 1, want: 1 })] });
    expect(out.get('hi')!.reclaim.map((s) => s.workerId)).toEqual(['hi-1']);
    // Not beyond it: a higher priority never takes an endpoint's minimum.
    const kept = allocate({ now: NOW, hosts, endpoints: [ep('hi', { priority: 90, workersMin: 1, workers: [idle('hi-1')] }), ep('base', { priority: 5, workersMin: 1, want: 1 })] });
    expect(kept.get('hi')!.reclaim).toEqual([]);
    expect(kept.get('base')!.waiting).toBe(1);
  });

  it('ages waiting: a lower priority that waited long enough goes first for free GPUs', () => {
    const endpoints = (waited: number) => [ep('hi', { priority: 60, want: 1, waitingSince: NOW - 1_000 }), ep('old', { priority: 30, want: 1, waitingSince: NOW - waited })];
    expect(allocate({ now: NOW, hosts: [host('a', ['L4'])], endpoints: endpoints(2 * 60_000) }).get('hi')!.start).toBe(1);
    expect(allocate({ now: NOW, hosts: [host('a', ['L4'])], endpoints: endpoints(4 * 60_000) }).get('old')!.start).toBe(1);
  });

  it('waits for GPUs already being freed before stopping anything more', () => {
    // gone-1 is no endpoint's current worker (it is draining): its GPU goes to the waiting request.
    const hosts = [host('a', ['L4', 'L4'], { 'gone-1': ['0'], 'lo-1': ['1'] })];
    const out = allocate({ now: NOW, hosts, endpoints: [ep('lo', { priority: 10, workers: [idle('lo-1')] }), ep('hi', { priority: 90, want: 1 })] });
    expect(out.get('lo')!.reclaim).toEqual([]);
    expect(out.get('hi')).toMatchObject({ start: 0, waiting: 1, reason: 'waiting for room: 1 L4 on a being freed' });
  });

  it('frees a whole worker’s GPUs on one host for a multi-GPU worker', () => {
    const hosts = [host('a', ['L4', 'L4'], { 'lo-1': ['0'] }), host('b', ['L4', 'L4'], { 'lo-2': ['0'], 'lo-3': ['1'] })];
    const out = allocate({ now: NOW, hosts, endpoints: [ep('lo', { priority: 10, workers: [idle('lo-1'), idle('lo-2'), idle('lo-3')] }), ep('hi', { priority: 90, gpus: 2, want: 1 })] });
    // a has one free beside lo-1: stopping lo-1 alone makes room for two.
    expect(out.get('lo')!.reclaim.map((s) => s.workerId)).toEqual(['lo-1']);
  });

  it('grants workers without GPUs as asked', () => {
    const out = allocate({ now: NOW, hosts: [], endpoints: [ep('cpu', { gpus: 0, want: 5 })] });
    expect(out.get('cpu')).toMatchObject({ start: 5, waiting: 0 });
  });

  it('decides a demand repeated under one id as the last one given, in the first one\'s place (as a Map keyed by id would)', () => {
    const hosts = [host('a', ['L4', 'L4'])];
    const out = allocate({ now: NOW, hosts, endpoints: [ep('x', { priority: 90, want: 1 }), ep('y', { priority: 50, want: 2 }), ep('x', { priority: 10, want: 2 })] });
    expect([...out.keys()]).toEqual(['x', 'y']);
    // The second `x` (priority 10) is the one decided: y goes first and takes both GPUs.
    expect(out.get('y')).toMatchObject({ start: 2, waiting: 0 });
    expect(out.get('x')).toMatchObject({ start: 0, waiting: 2 });
  });
});
