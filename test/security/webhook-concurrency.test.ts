// Issue 9, item 8: webhook deliveries have a concurrency cap (WEBHOOK_CONCURRENCY connections
// at most, however many jobs end at once and however slow the receiver) and reuse connections.
import { afterAll, describe, expect, it } from 'vitest';
import { WEBHOOK_CONCURRENCY } from '../../src/services/webhook-sender.js';
import { eventually, startTestGantry, type TestBackend, type TestGantry } from '../helpers/gantry.js';
import { uniqueId } from '../http/http-helpers.js';
import { finishJobsWithWebhook, countingReceiver as receiver } from '../helpers/webhook-receiver.js';

/** Submits `n` jobs with `webhook` to a new endpoint and finishes them all through one worker. */
async function finishJobs(t: TestGantry, n: number, webhook: string): Promise<void> {
  const ep = uniqueId('hooks');
  await t.createEndpoint(ep);
  await finishJobsWithWebhook(t, ep, { run: await t.createKey(['run'], [ep]), worker: await t.createKey(['worker'], [ep]) }, n, webhook);
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
