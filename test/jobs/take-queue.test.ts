import { describe, expect, it } from 'vitest';
import { createTakeQueue } from '../../src/dispatch/take-queue.js';
import type { JobRecord } from '../../src/model/records.js';

function job(id: string): JobRecord {
  return { id } as JobRecord;
}

/** A claim that settles only when the test says so. */
function controlledClaims() {
  const pending: { workerId: string; resolve: (jobs: JobRecord[]) => void }[] = [];
  const claim = (_endpointId: string, workerId: string) => new Promise<JobRecord[]>((resolve) => pending.push({ workerId, resolve }));
  return { pending, claim };
}

describe('take queue', () => {
  it('delivers jobs claimed while the long-poll timed out', async () => {
    const { pending, claim } = controlledClaims();
    const q = createTakeQueue({ claim, unclaim: async () => {}, onError: (err) => { throw err; } });
    const taken = q.take('ep', 'w1', 1, 1, new AbortController().signal);
    await new Promise((r) => setTimeout(r, 10)); // the 1 ms timeout passes while the claim is in flight
    pending.shift()!.resolve([job('a')]);
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
    pending.shift()!.resolve([job('a')]);
    expect(await taken).toEqual([]);
    await new Promise((r) => setImmediate(r));
    expect(returned).toEqual(['a']);
    // The pump goes on with the next waiter, which gets the returned job.
    const second = pending.shift()!;
    expect(second.workerId).toBe('w2');
    second.resolve([job('a')]);
    expect((await next).map((j) => j.id)).toEqual(['a']);
  });

  it('answers an empty long-poll when its time is up', async () => {
    const q = createTakeQueue({ claim: async () => [], unclaim: async () => {}, onError: (err) => { throw err; } });
    const started = Date.now();
    expect(await q.take('ep', 'w1', 1, 50, new AbortController().signal)).toEqual([]);
    expect(Date.now() - started).toBeGreaterThanOrEqual(45);
    expect(q.waitingWorkers()).toEqual([]);
  });
});
