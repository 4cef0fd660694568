import { describe, expect, it } from 'vitest';
import { createTakeQueue } from '../../src/dispatch/take-queue.js';
import type { JobRecord, Taker } from '../../src/model/records.js';

function job(id: string): JobRecord {
  return { id } as JobRecord;
}

/** A claim that settles only when the test says so (with each taker's jobs, by position). */
function controlledClaims() {
  const pending: { takers: readonly Taker[]; resolve: (jobs: JobRecord[][]) => void }[] = [];
  const claim = (_endpointId: string, takers: readonly Taker[]) => new Promise<JobRecord[][]>((resolve) => pending.push({ takers, resolve }));
  return { pending, claim };
}

describe('take queue', () => {
  it('delivers jobs claimed while the long-poll timed out', async () => {
    const { pending, claim } = controlledClaims();
    const q = createTakeQueue({ claim, unclaim: async () => {}, onError: (err) => { throw err; } });
    const taken = q.take('ep', 'w1', 1, 1, new AbortController().signal);
    await new Promise((r) => setTimeout(r, 10)); // the 1 ms timeout passes while the claim is in flight
    pending.shift()!.resolve([[job('a')]]);
    expect((await taken).map((j) => j.id)).toEqual(['a']);
  });

  it('returns jobs to the queue when the worker went away during the claim', async () => {
    const { pending, claim } = controlledClaims();
    const returned: string[] = [];
    const q = createTakeQueue({ claim, unclaim: async (_e, _w, jobs) => void returned.push(...jobs.map((j) => j.id)), onError: (err) => { throw err; } });
    const controller = new AbortController();
    const taken = q.take('ep', 'w1', 1, 10_000, controller.signal);
    const next = q.take('ep', 'w2', 1, 10_000, new AbortController().signal);
    controller.abort();
    pending.shift()!.resolve([[job('a')]]);
    expect(await taken).toEqual([]);
    await new Promise((r) => setImmediate(r));
    expect(returned).toEqual(['a']);
    // The pump goes on with the next waiter, which gets the returned job.
    const second = pending.shift()!;
    expect(second.takers).toEqual([{ workerId: 'w2', limit: 1 }]);
    second.resolve([[job('a')]]);
    expect((await next).map((j) => j.id)).toEqual(['a']);
  });

  it('serves every waiter at the head with one claim, first come first served', async () => {
    const { pending, claim } = controlledClaims();
    const q = createTakeQueue({ claim, unclaim: async () => {}, onError: (err) => { throw err; } });
    const signal = new AbortController().signal;
    const first = q.take('ep', 'w1', 1, 10_000, signal);
    // w2, w3 and w4 arrive while w1's claim is in flight: the next claim is one call for all three.
    const second = q.take('ep', 'w2', 1, 10_000, signal);
    const third = q.take('ep', 'w3', 50, 10_000, signal);
    const fourth = q.take('ep', 'w4', 1, 10_000, signal);
    pending.shift()!.resolve([[job('a')]]);
    expect((await first).map((j) => j.id)).toEqual(['a']);
    await new Promise((r) => setImmediate(r));
    expect(pending).toHaveLength(1);
    expect(pending[0]!.takers).toEqual([{ workerId: 'w2', limit: 1 }, { workerId: 'w3', limit: 50 }, { workerId: 'w4', limit: 1 }]);
    // The queue ran short: w2 gets one job, w3 two, w4 none and keeps waiting.
    pending.shift()!.resolve([[job('b')], [job('c'), job('d')], []]);
    expect((await second).map((j) => j.id)).toEqual(['b']);
    expect((await third).map((j) => j.id)).toEqual(['c', 'd']);
    // Waiters joined while the pump ran, so it looks once more before it stops.
    await new Promise((r) => setImmediate(r));
    expect(pending.map((p) => p.takers)).toEqual([[{ workerId: 'w4', limit: 1 }]]);
    pending.shift()!.resolve([[]]);
    await new Promise((r) => setImmediate(r));
    expect(pending).toHaveLength(0);
    expect(q.waitingWorkers()).toEqual([{ endpointId: 'ep', workerId: 'w4' }]);
    q.poke('ep');
    expect(pending[0]!.takers).toEqual([{ workerId: 'w4', limit: 1 }]);
    pending.shift()!.resolve([[job('e')]]);
    expect((await fourth).map((j) => j.id)).toEqual(['e']);
  });

  it('answers an empty long-poll when its time is up', async () => {
    const q = createTakeQueue({ claim: async () => [[]], unclaim: async () => {}, onError: (err) => { throw err; } });
    const started = Date.now();
    expect(await q.take('ep', 'w1', 1, 50, new AbortController().signal)).toEqual([]);
    expect(Date.now() - started).toBeGreaterThanOrEqual(45);
    expect(q.waitingWorkers()).toEqual([]);
  });
});
