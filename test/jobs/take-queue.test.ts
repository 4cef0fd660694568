import { describe, expect, it } from 'vitest';
import { createTakeQueue } from '../../src/dispatch/take-queue.js';
import { createWorkerLiveness, MAX_PINGING } from '../../src/dispatch/worker-liveness.js';
import type { JobWithInput, Taker } from '../../src/model/records.js';

function job(id: string): JobWithInput {
  return { id, inputJson: '{}' } as JobWithInput;
}

/** A claim that settles only when the test says so (with each taker's jobs, by position). */
function controlledClaims() {
  const pending: { takers: readonly Taker[]; resolve: (jobs: JobWithInput[][]) => void }[] = [];
  const claim = (_endpointId: string, takers: readonly Taker[]) => new Promise<JobWithInput[][]>((resolve) => pending.push({ takers, resolve }));
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

  it('hands nothing to a worker the pool is stopping: its parked take answers empty at once, a claim in flight for it goes back, a new take answers at once', async () => {
    const { pending, claim } = controlledClaims();
    const returned: string[] = [];
    let now = 1_000_000;
    const liveness = createWorkerLiveness({ now: () => now, defaultPingIntervalMs: 1_000 });
    const q = createTakeQueue({ claim, unclaim: async (_e, _w, jobs) => void returned.push(...jobs.map((j) => j.id)), onError: (err) => { throw err; }, liveness, now: () => now });
    const signal = new AbortController().signal;
    // w1's claim is in flight when the pool marks it; w2 waits behind it.
    const first = q.take('ep', 'w1', 1, 60_000, signal);
    const second = q.take('ep', 'w2', 1, 60_000, signal);
    liveness.markStopping('w1');
    q.release('ep', 'w1');
    pending.shift()!.resolve([[job('a')]]);
    expect(await first).toEqual([]);
    await new Promise((r) => setImmediate(r));
    expect(returned).toEqual(['a']);
    // The returned job goes to w2, in a claim that names w2 only.
    const next = pending.shift()!;
    expect(next.takers).toEqual([{ workerId: 'w2', limit: 1 }]);
    next.resolve([[job('a')]]);
    expect((await second).map((j) => j.id)).toEqual(['a']);
    // A parked take of a worker marked later answers at once, and w1 never parks again.
    const third = q.take('ep', 'w3', 1, 60_000, signal);
    // Until the pump rests: it may look once more for w3, which arrived while it ran.
    for (await new Promise((r) => setImmediate(r)); pending.length > 0; await new Promise((r) => setImmediate(r))) pending.shift()!.resolve([[]]);
    liveness.markStopping('w3');
    q.release('ep', 'w3');
    expect(await third).toEqual([]);
    now += 1;
    expect(await q.take('ep', 'w1', 1, 60_000, signal)).toEqual([]);
    expect(q.waitingWorkers()).toEqual([]);
    expect(pending).toHaveLength(0);
  });

  it('never hands a job through a take whose worker stopped pinging: it is answered empty and the job goes to the next waiter', async () => {
    const { pending, claim } = controlledClaims();
    let now = 1_000_000;
    const liveness = createWorkerLiveness({ now: () => now, defaultPingIntervalMs: 10_000 });
    const q = createTakeQueue({ claim, unclaim: async () => {}, onError: (err) => { throw err; }, liveness, now: () => now });
    const signal = new AbortController().signal;
    // w1 pings every second (the interval is learned from the gaps), then parks a take and goes quiet.
    for (let i = 0; i < 3; i++, now += 1_000) liveness.pinged('w1');
    now -= 1_000;
    const quiet = q.take('ep', 'w1', 1, 60_000, signal);
    pending.shift()!.resolve([[]]);
    await new Promise((r) => setImmediate(r));
    // w2 never pinged here: it is never judged silent.
    const other = q.take('ep', 'w2', 1, 60_000, signal);
    await new Promise((r) => setImmediate(r));
    pending.shift()!.resolve([[], []]);
    await new Promise((r) => setImmediate(r));
    now += 3_000; // two intervals and the slack since its take parked: still alive
    q.poke('ep');
    const both = pending.shift()!;
    expect(both.takers).toEqual([{ workerId: 'w1', limit: 1 }, { workerId: 'w2', limit: 1 }]);
    both.resolve([[], []]);
    await new Promise((r) => setImmediate(r));
    now += 1; // one ms later w1 is silent: a job that arrives now is not claimed for it
    q.poke('ep');
    expect(await quiet).toEqual([]);
    const claimFor = pending.shift()!;
    expect(claimFor.takers).toEqual([{ workerId: 'w2', limit: 1 }]);
    claimFor.resolve([[job('a')]]);
    expect((await other).map((j) => j.id)).toEqual(['a']);
    // A new take is a sign of life of its own: w1 asking again may receive jobs.
    const again = q.take('ep', 'w1', 1, 60_000, signal);
    await new Promise((r) => setImmediate(r));
    const claimAgain = pending.shift()!;
    expect(claimAgain.takers).toEqual([{ workerId: 'w1', limit: 1 }]);
    claimAgain.resolve([[job('b')]]);
    expect((await again).map((j) => j.id)).toEqual(['b']);
  });
});

describe('worker liveness', () => {
  it('learns each worker\'s ping interval: an early ping (a retry) lowers it only halfway', () => {
    let now = 0;
    const liveness = createWorkerLiveness({ now: () => now, defaultPingIntervalMs: 10_000 });
    liveness.pinged('w');
    // Until a gap is seen, the default interval: silent after 2 × 10 s + 1 s.
    now = 21_000;
    expect(liveness.mayReceive('w', 0)).toBe(true);
    now = 21_001;
    expect(liveness.mayReceive('w', 0)).toBe(false);
    // For v, a 4 s gap replaces the default; a 1 s gap then lowers it to 2.5 s, not to 1 s.
    now = 100_000;
    liveness.pinged('v');
    now += 4_000;
    liveness.pinged('v');
    now += 1_000;
    liveness.pinged('v');
    now += 2 * 2_500 + 1_000;
    expect(liveness.mayReceive('v', 0)).toBe(true);
    now += 1;
    expect(liveness.mayReceive('v', 0)).toBe(false);
    // The take's own arrival is a sign of life.
    expect(liveness.mayReceive('v', now - 100)).toBe(true);
    expect(liveness.mayReceive('unknown', 0)).toBe(true);
  });

  it('keeps at most MAX_PINGING ping records, dropping the oldest', () => {
    let now = 0;
    const liveness = createWorkerLiveness({ now: () => now, defaultPingIntervalMs: 1_000 });
    liveness.pinged('first');
    for (let i = 0; i < MAX_PINGING; i++) liveness.pinged(`w${i}`);
    expect(liveness.size().pinging).toBe(MAX_PINGING);
    now = 10_000;
    // 'first' was dropped: unknown again, so never judged silent; the newest is still known.
    expect(liveness.mayReceive('first', 0)).toBe(true);
    expect(liveness.mayReceive(`w${MAX_PINGING - 1}`, 0)).toBe(false);
  });
});
