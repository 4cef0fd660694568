// A webhook delivery pending when its gateway stops is finished by the gateway started next on
// the same store: only the attempts left (3 in all), every one with the same webhook-id.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { eventually, startTestGantry, type TestBackend, type TestGantry, type TestGantryOptions } from '../helpers/gantry.js';
import { createTestSchema } from '../helpers/postgres.js';
import { systemClock, type Clock } from '../../src/util/clock.js';
import { clientFor, startReceiver, uniqueId, workerFor } from './http-helpers.js';

/** The job row's delivery state: [attempts, next attempt scheduled]. */
async function delivery(g: TestGantry, ep: string, id: string): Promise<[number, boolean]> {
  const job = await g.gantry.gateway.jobs.getJob(ep, id);
  return [job?.webhookAttempts ?? -1, job?.webhookNextAt !== null];
}

describe.each(['sqlite', 'postgres'] as const)('a webhook pending across a gateway restart (%s)', (backend: TestBackend) => {
  it('the next gateway sends only the remaining attempts, with the same webhook-id', async () => {
    const hook = await startReceiver(Array(10).fill(500) as number[]);
    const dataDir = mkdtempSync(join(tmpdir(), 'gantry-restart-'));
    const schema = backend === 'postgres' ? await createTestSchema('restart') : undefined;
    const where: TestGantryOptions = { backend, dataDir, ...(schema ? { databaseUrl: schema.url } : {}) };
    try {
      const ep = uniqueId('restart');
      // A long retry interval: the second attempt is not due before the first gateway stops.
      const first = await startTestGantry({ webhookRetryMs: 600_000, outboundAllow: ['127.0.0.1'] }, where);
      let id: string;
      try {
        await first.createEndpoint(ep);
        const c = clientFor(first, ep, await first.createKey(['run']));
        const w = workerFor(first, ep, await first.createKey(['worker']));
        id = await c.submit({ input: {}, webhook: hook.url });
        expect((await w.takeJob()).id).toBe(id);
        expect((await w.done(id, { output: 'x' })).status).toBe(200);
        expect(await eventually(async () => ((await delivery(first, ep, id))[0] === 1 ? delivery(first, ep, id) : undefined), 10_000, 'the first attempt')).toEqual([1, true]);
      } finally {
        await first.close();
      }
      expect(hook.calls).toHaveLength(1);

      // The next gateway starts 11 minutes later (its clock): the second attempt is due.
      const later: Clock = { now: () => Date.now() + 660_000, after: systemClock.after };
      const second = await startTestGantry({ webhookRetryMs: 50, outboundAllow: ['127.0.0.1'] }, { ...where, clock: later });
      try {
        const settled = await eventually(async () => {
          const state = await delivery(second, ep, id);
          return state[1] ? undefined : state;
        }, 15_000, 'the delivery to give up');
        expect(settled).toEqual([3, false]);
      } finally {
        await second.close();
      }
      expect(hook.calls).toHaveLength(3);
      expect(hook.calls.map((call) => call.headers['webhook-id'])).toEqual([`${id}.0`, `${id}.0`, `${id}.0`]);
      expect(hook.calls.map((call) => call.body.id)).toEqual([id, id, id]);
    } finally {
      await hook.close();
      await schema?.drop();
      rmSync(dataDir, { recursive: true, force: true });
    }
  }, 60_000);
});
