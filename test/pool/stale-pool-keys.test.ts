import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createApiKey } from '../../src/http/admin-routes.js';
import { poolKeyName } from '../../src/pool/worker-pool.js';
import { createAutoscaler } from '../../src/services/autoscaler.js';
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
    const app = t.gantry.app;
    // What a gateway killed with -9 leaves: its pool's worker key (the process never closed the pool).
    const stale = await createApiKey(app, { name: poolKeyName('echo'), scopes: ['worker'], endpoints: ['echo'] });
    const other = await createApiKey(app, { name: 'my worker key', scopes: ['worker'], endpoints: null });
    const autoscaler = createAutoscaler(app, { baseUrl: t.url });
    autoscaler.start();
    try {
      await eventually(async () => ((await app.store.listKeys()).some((k) => k.id === stale.id) ? undefined : true), 5_000, 'the stale key to go');
      const ids = (await app.store.listKeys()).map((k) => k.id);
      expect(ids).toContain(other.id);
      // The stale key no longer authenticates.
      const res = await fetch(`${t.url}/v2/echo/job-take/w1`, { headers: { authorization: stale.key } });
      expect(res.status).toBe(401);
    } finally {
      await autoscaler.stop();
    }
  });
});
