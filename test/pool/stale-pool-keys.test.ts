import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { poolKeyName } from '../../src/pool/worker-pool.js';
import { eventually, startTestGantry, type TestGantry } from '../helpers/gantry.js';

describe('autoscaler start after a killed gateway', () => {
  let t: TestGantry;
  beforeAll(async () => {
    t = await startTestGantry();
  });
  afterAll(async () => {
    await t.close();
  });

  it('deletes the pool keys an earlier gateway process left behind, and only those', async () => {
    const { keys, autoscaler } = t.gantry.gateway;
    // What a gateway killed with -9 leaves: its pool's worker key (the process never closed the pool).
    await autoscaler.stop();
    const stale = await keys.create({ name: poolKeyName('echo'), scopes: ['worker'], endpoints: ['echo'] });
    const other = await keys.create({ name: 'my worker key', scopes: ['worker'], endpoints: null });
    // Leadership comes back (or the next gateway process starts): the autoscaler cleans up first.
    autoscaler.start();
    {
      await eventually(async () => ((await keys.list()).some((k) => k.id === stale.id) ? undefined : true), 5_000, 'the stale key to go');
      const ids = (await keys.list()).map((k) => k.id);
      expect(ids).toContain(other.id);
      // The stale key no longer authenticates.
      const res = await fetch(`${t.url}/v2/echo/job-take/w1`, { headers: { authorization: stale.key } });
      expect(res.status).toBe(401);
    }
  });
});
