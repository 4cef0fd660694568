// Issue 9, item 15: the per-worker last-contact record (it throttles liveness writes) is pruned:
// a gateway does not keep one for every worker id it was ever sent. Worker requests over HTTP;
// the gateway's clock is moved past the sweep interval instead of sleeping.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createOffsetClock } from '../helpers/clock.js';
import { startTestGantry, type TestBackend, type TestGantry } from '../helpers/gantry.js';
import { call, uniqueId } from '../http/http-helpers.js';

describe.each<TestBackend>(['sqlite', 'postgres'])('last-contact records of workers (%s)', (backend) => {
  const clock = createOffsetClock();
  let t: TestGantry;
  let ep: string;
  let key: string;

  beforeAll(async () => {
    t = await startTestGantry({ jobTakeWaitMs: 200 }, { backend, clock });
    ep = uniqueId('ep');
    await t.createEndpoint(ep);
    key = await t.createKey(['worker'], [ep]);
  });
  afterAll(() => t?.close());

  it('are forgotten once their workers go quiet, so 200 worker ids leave no trace', async () => {
    const workers = t.gantry.gateway.workers;
    const base = workers.trackedWorkers();
    for (let i = 0; i < 200; i++) expect((await call(t.url, 'GET', `/v2/${ep}/ping/${uniqueId('w')}`, { key })).status).toBe(200);
    expect(workers.trackedWorkers()).toBeGreaterThanOrEqual(base + 200);
    // A minute later one worker is still talking; the 200 are not.
    const still = uniqueId('alive');
    await clock.ahead(60_000, async () => {
      expect((await call(t.url, 'GET', `/v2/${ep}/ping/${still}`, { key })).status).toBe(200);
    });
    expect(workers.trackedWorkers()).toBe(1);
  });
});
