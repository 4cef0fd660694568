// Every ended job stays readable for its retention, measured from its end, whatever ended it:
// a job whose queue `ttl` passed (TIMED_OUT "ttl expired in queue") is still there when its
// webhook has been delivered (after a failed first attempt, as in the report of a 404 right
// after the webhook) and for the rest of its retention: 30 min for /run, 60 s for /runsync.
// Over real HTTP, on both stores; time is moved by the gateway's clock, the reaper run by hand.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Clock } from '../../src/util/clock.js';
import { eventually, startTestGantry, type TestBackend, type TestGantry } from '../helpers/gantry.js';
import { clientFor, startReceiver, uniqueId, type Client, type Receiver } from './http-helpers.js';

/** Real time plus an offset that stays where the test moves it (the webhook sender's retries run on real timers). */
function movableClock(): Clock & { move(ms: number): void } {
  let offset = 0;
  return {
    now: () => Date.now() + offset,
    after(ms, fn) {
      const timer = setTimeout(fn, ms);
      timer.unref();
      return () => clearTimeout(timer);
    },
    move(ms) {
      offset += ms;
    },
  };
}

const TTL_MS = 10_000;

describe.each(['sqlite', 'postgres'] as const)('a job ended by its queue ttl stays readable (%s)', (backend: TestBackend) => {
  let t: TestGantry;
  let c: Client;
  let ep: string;
  const clock = movableClock();
  const hooks: Receiver[] = [];

  beforeAll(async () => {
    // No reaper passes of its own (an hour apart): this file runs them when it has moved the clock.
    t = await startTestGantry({ webhookRetryMs: 50, outboundAllow: ['127.0.0.1'], reaperIntervalMs: 3_600_000 }, { backend, clock });
    ep = uniqueId('ttl');
    await t.createEndpoint(ep);
    c = clientFor(t, ep, await t.createKey(['run']));
  });
  afterAll(async () => {
    await t?.close();
    for (const hook of hooks) await hook.close();
  });

  const reap = () => t.gantry.gateway.reaper.runOnce();

  it('keeps a TIMED_OUT job past its webhook and for its whole retention; a /runsync one for 60 s', async () => {
    // Each receiver refuses the first call: the delivery ends only after a retry.
    const asyncHook = await startReceiver([500]);
    const syncHook = await startReceiver([500]);
    hooks.push(asyncHook, syncHook);
    const asyncId = await c.submit({ input: { n: 1 }, webhook: asyncHook.url, policy: { ttl: TTL_MS } });
    // No worker: the runsync call answers {id, status} after its shortest wait.
    const sync = await c.runsync({ input: { n: 2 }, webhook: syncHook.url, policy: { ttl: TTL_MS } }, '?wait=1000');
    expect(sync.json).toMatchObject({ status: 'IN_QUEUE' });
    const syncId = sync.json.id as string;

    clock.move(TTL_MS + 1_000);
    expect((await reap()).expired).toBe(2);
    const delivered = (hook: Receiver) => eventually(async () => (hook.calls.length === 2 ? hook.calls[1]!.body : undefined), 15_000, 'the webhook retry');
    expect(await delivered(asyncHook)).toMatchObject({ id: asyncId, status: 'TIMED_OUT', error: 'ttl expired in queue' });
    expect(await delivered(syncHook)).toMatchObject({ id: syncId, status: 'TIMED_OUT', error: 'ttl expired in queue' });
    const recorded = (id: string) => eventually(async () => ((await t.gantry.gateway.jobs.getJob(ep, id))?.webhookNextAt === null ? true : undefined), 5_000, 'the delivery to be recorded');
    await recorded(asyncId);
    await recorded(syncId);

    // Right after the webhook, and past the job's ttl measured again from its end.
    for (const id of [asyncId, syncId]) expect((await c.status(id)).json).toMatchObject({ id, status: 'TIMED_OUT', error: 'ttl expired in queue' });
    clock.move(TTL_MS + 20_000);
    await reap();
    for (const id of [asyncId, syncId]) expect((await c.status(id)).json).toMatchObject({ id, status: 'TIMED_OUT' });

    // The /runsync job's 60 s end; the /run job's 30 min.
    clock.move(30_000);
    await reap();
    expect((await c.status(syncId)).status).toBe(404);
    expect((await c.status(asyncId)).json).toMatchObject({ status: 'TIMED_OUT' });
    clock.move(28 * 60_000);
    await reap();
    expect((await c.status(asyncId)).status).toBe(200);
    clock.move(2 * 60_000);
    await reap();
    expect((await c.status(asyncId)).status).toBe(404);
  });
});
