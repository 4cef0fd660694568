// Issue 9, item 8: webhook deliveries have a concurrency cap (WEBHOOK_CONCURRENCY connections
// at most, however many jobs end at once and however slow the receiver) and reuse connections.
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, describe, expect, it } from 'vitest';
import { WEBHOOK_CONCURRENCY } from '../../src/services/webhook-sender.js';
import { eventually, startTestGantry, type TestBackend, type TestGantry } from '../helpers/gantry.js';
import { call, uniqueId } from '../http/http-helpers.js';

/** A receiver that counts requests and connections: open now, most open at once, made in all. */
async function receiver(answer: boolean) {
  const stats = { requests: 0, open: 0, maxOpen: 0, connections: 0 };
  const server: Server = createServer((req, res) => {
    stats.requests++;
    req.resume();
    if (answer) res.end('ok'); // else: never answers
  });
  server.on('connection', (socket) => {
    stats.connections++;
    stats.open++;
    stats.maxOpen = Math.max(stats.maxOpen, stats.open);
    socket.on('close', () => stats.open--);
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/hook`,
    stats,
    close: () => {
      server.closeAllConnections();
      return new Promise<void>((r) => server.close(() => r()));
    },
  };
}

/** Submits `n` jobs with `webhook` and finishes them all through one worker. */
async function finishJobs(t: TestGantry, n: number, webhook: string): Promise<void> {
  const ep = uniqueId('hooks');
  await t.createEndpoint(ep);
  const run = await t.createKey(['run'], [ep]);
  const worker = await t.createKey(['worker'], [ep]);
  for (let i = 0; i < n; i++) expect((await call(t.url, 'POST', `/v2/${ep}/run`, { key: run, body: { input: { i }, webhook } })).status).toBe(200);
  const w = uniqueId('w');
  let done = 0;
  while (done < n) {
    const taken = await call(t.url, 'GET', `/v2/${ep}/job-take-batch/${w}?batch_size=100`, { key: worker });
    const jobs = (taken.status === 200 ? taken.json : []) as unknown as { id: string }[];
    for (const job of jobs) {
      expect((await call(t.url, 'POST', `/v2/${ep}/job-done/${w}/${job.id}`, { key: worker, body: { output: 'ok' } })).status).toBe(200);
      done++;
    }
  }
}

describe.each<TestBackend>(['sqlite', 'postgres'])('webhook deliveries (%s)', (backend) => {
  let t: TestGantry;
  afterAll(() => t?.close());

  it(`hold at most ${WEBHOOK_CONCURRENCY} connections to a receiver that never answers`, async () => {
    t = await startTestGantry({ jobTakeWaitMs: 200, webhookTimeoutMs: 1_000, webhookRetryMs: 600_000, outboundAllow: ['127.0.0.1'] }, { backend });
    const silent = await receiver(false);
    try {
      const jobs = 2 * WEBHOOK_CONCURRENCY + 16;
      // Every delivery due at once: the sender is paused while the jobs end.
      await t.gantry.gateway.webhooks.stop();
      await finishJobs(t, jobs, silent.url);
      t.gantry.gateway.webhooks.start();
      await eventually(async () => (silent.stats.requests >= jobs ? true : undefined), 60_000, 'every webhook to be tried once');
      expect(silent.stats.maxOpen).toBeGreaterThan(1);
      expect(silent.stats.maxOpen).toBeLessThanOrEqual(WEBHOOK_CONCURRENCY);
    } finally {
      await silent.close();
    }
  }, 90_000);

  it('reuse connections to a receiver that answers', async () => {
    const ok = await receiver(true);
    try {
      const jobs = 60;
      await finishJobs(t, jobs, ok.url);
      await eventually(async () => (ok.stats.requests >= jobs ? true : undefined), 30_000, 'every webhook to be delivered');
      expect(ok.stats.connections).toBeLessThan(jobs);
      expect(ok.stats.maxOpen).toBeLessThanOrEqual(WEBHOOK_CONCURRENCY);
    } finally {
      await ok.close();
    }
  }, 60_000);
});
