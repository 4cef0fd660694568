// Store faults answer "try again", not 500 (issue 22.5). A `gantry serve` process on a
// PostgreSQL server of this test alone; the server is shut down under it, then started again.
// While it is down: every client call that needs it answers 503 STORE_UNAVAILABLE with
// Retry-After, a worker's job-take 429 WORKER_BACK_OFF (runpod-python waits out a 429 but asks
// again at once after a 5xx), /readyz 503 naming the store, /healthz 200; the log has one line
// for the episode, no stack per request. Once the server is back, the gateway is ready again
// without a restart, says so once in its log, and every acknowledged job is there.
// The full-disk side (SQLite on a small filesystem) is test/e2e/disk-full.test.ts.
import { randomBytes } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { eventually } from '../helpers/gantry.js';
import { newKey, submitJobs } from '../helpers/jobs.js';
import { startEmbedded } from '../helpers/postgres.js';
import { startGateway } from '../helpers/serve-process.js';
import { call } from '../http/http-helpers.js';

describe('store faults', { timeout: 180_000 }, () => {
  it('PostgreSQL shut down under the gateway: 503 with Retry-After, job-take 429, /readyz not ready, one log line; back without a restart, every acknowledged job kept', async () => {
    const pg = await startEmbedded();
    try {
      // The test kit kills it with its process group if the test fails half-way.
      const gw = await startGateway({ env: { DATABASE_URL: pg.url, GANTRY_SECRET_KEY: randomBytes(32).toString('base64'), GANTRY_JOB_TAKE_WAIT_MS: '500' } });
      await gw.admin.createEndpoint({ id: 'sf' });
      const runKey = await newKey(gw, ['run', 'read']);
      const workerKey = await newKey(gw, ['worker']);
      const acknowledged = await submitJobs(gw.client(runKey), 'sf', 20, 1);

      await pg.halt();
      const refusals = [];
      for (let i = 0; i < 30; i++) refusals.push(await call(gw.url, 'POST', '/v2/sf/run', { key: runKey, body: { input: { late: i } } }));
      refusals.push(await call(gw.url, 'GET', `/v2/sf/status/${acknowledged[0]}`, { key: runKey }));
      for (const r of refusals) {
        expect([r.status, r.json.code, r.json.reason]).toEqual([503, 'STORE_UNAVAILABLE', 'unreachable']);
        expect(Number(r.headers.get('retry-after'))).toBeGreaterThan(0);
      }
      const take = await call(gw.url, 'GET', '/v2/sf/job-take/w1', { key: workerKey, rawAuth: true });
      expect([take.status, take.json.code]).toEqual([429, 'WORKER_BACK_OFF']);
      expect(Number(take.headers.get('retry-after'))).toBeGreaterThan(0);
      const notReady = await call(gw.url, 'GET', '/readyz');
      expect(notReady.status).toBe(503);
      expect(notReady.json).toMatchObject({ ready: false, checks: { store: 'failing (unreachable)' } });
      expect((await call(gw.url, 'GET', '/healthz')).status).toBe(200);

      await pg.resume();
      await eventually(async () => ((await call(gw.url, 'GET', '/readyz')).status === 200 ? true : undefined), 60_000, 'the gateway to be ready again');
      const after = await call(gw.url, 'POST', '/v2/sf/run', { key: runKey, body: { input: { after: true } } });
      expect(after.status).toBe(200);
      acknowledged.push(after.json.id as string);
      for (const id of acknowledged) expect((await call(gw.url, 'GET', `/v2/sf/status/${id}`, { key: runKey })).json).toMatchObject({ id, status: 'IN_QUEUE' });

      const lines = gw.logs();
      expect(lines.filter((l) => String(l.msg).startsWith('store unavailable'))).toHaveLength(1);
      expect(lines.filter((l) => l.msg === 'store available again')).toHaveLength(1);
      expect(lines.filter((l) => l.msg === 'request failed')).toEqual([]);
      // What else the outage logs (the notifier's and the leader lock's own connections) is a few lines, not one per request.
      expect(lines.filter((l) => (l.level as number) >= 50).length).toBeLessThan(10);
      expect(await gw.stop()).toBe(0);
    } finally {
      await pg.stop();
    }
  });
});
