// The allocator (src/services/allocator.ts) with flashboot's warm pool: paused workers hold
// their GPUs, their own endpoint resumes them before taking free GPUs, and any other endpoint
// that finds no free GPU reclaims them before stopping anything else, whatever the priorities.
import { describe, expect, it } from 'vitest';
import { allocate } from '../../src/services/allocator.js';
import { NOW, ep, host, idle } from './allocator-fixtures.js';



describe('allocate with paused workers (flashboot)', () => {
  it('resumes its own paused worker before taking a free GPU', () => {
    const out = allocate({ now: NOW, hosts: [host('a', ['L4', 'L4'], { 'w-1': ['0'] })], endpoints: [ep('w', { paused: ['w-1'], want: 1 })] });
    expect(out.get('w')).toMatchObject({ start: 1, resume: 1, waiting: 0, reclaim: [] });
    // Two wanted: the paused one resumed, the other on the free GPU.
    const two = allocate({ now: NOW, hosts: [host('a', ['L4', 'L4'], { 'w-1': ['0'] })], endpoints: [ep('w', { paused: ['w-1'], want: 2 })] });
    expect(two.get('w')).toMatchObject({ start: 2, resume: 1, waiting: 0 });
  });

  it('a paused worker is reclaimed for any other endpoint that finds no free GPU, even of a lower priority, before idle workers', () => {
    const hosts = [host('a', ['L4', 'L4'], { 'hi-1': ['0'], 'lo-1': ['1'] })];
    const out = allocate({
      now: NOW,
      hosts,
      endpoints: [ep('hi', { priority: 90, paused: ['hi-1'] }), ep('lo', { priority: 10, workers: [idle('lo-1')] }), ep('new', { priority: 10, want: 1 })],
    });
    expect(out.get('hi')!.reclaim).toEqual([{ workerId: 'hi-1', why: 'reclaimed for `new` (priority 10): 1 L4 on a, paused in the warm pool' }]);
    expect(out.get('lo')!.reclaim).toEqual([]);
    expect(out.get('new')).toMatchObject({ start: 0, waiting: 1 });
    expect(out.get('new')!.reason).toBe('waiting for room: 1 L4 on a being freed (stopping workers of `hi`)');
  });

  it('free GPUs go first: nothing paused is reclaimed while a GPU is free', () => {
    const out = allocate({ now: NOW, hosts: [host('a', ['L4', 'L4'], { 'w-1': ['0'] })], endpoints: [ep('w', { paused: ['w-1'] }), ep('x', { want: 1 })] });
    expect(out.get('x')).toMatchObject({ start: 1, waiting: 0 });
    expect(out.get('w')!.reclaim).toEqual([]);
  });

  it('among equal priorities, a paused worker goes before an idle one over its share', () => {
    // w holds all three GPUs: two idle workers (over its fair share against x) and one paused.
    const hosts = [host('a', ['L4', 'L4', 'L4'], { 'w-1': ['0'], 'w-2': ['1'], 'w-3': ['2'] })];
    const out = allocate({ now: NOW, hosts, endpoints: [ep('w', { workers: [idle('w-1'), idle('w-3')], paused: ['w-2'] }), ep('x', { want: 1 })] });
    expect(out.get('w')!.reclaim.map((r) => r.workerId)).toEqual(['w-2']);
  });
});
