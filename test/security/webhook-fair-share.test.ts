// Issue 24, item 4: webhook deliveries are shared between keys. One key's jobs whose receiver
// never answers hold at most WEBHOOK_KEY_SHARE of the WEBHOOK_CONCURRENCY connections, so another
// key's webhook goes out at once instead of after the first key's calls time out.
import { afterAll, describe, expect, it } from 'vitest';
import { WEBHOOK_CONCURRENCY, WEBHOOK_KEY_SHARE } from '../../src/services/webhook-sender.js';
import { eventually, startTestGantry, type TestBackend, type TestGantry } from '../helpers/gantry.js';
import { uniqueId } from '../http/http-helpers.js';
import { finishJobsWithWebhook, countingReceiver as receiver } from '../helpers/webhook-receiver.js';

/** Submits `n` jobs with `webhook` under `key` and finishes them through one worker. */
const finishJobs = (t: TestGantry, ep: string, key: string, worker: string, n: number, webhook: string): Promise<void> =>
  finishJobsWithWebhook(t, ep, { run: key, worker }, n, webhook);

describe.each<TestBackend>(['sqlite', 'postgres'])('webhook deliveries shared between keys (%s)', (backend) => {
  let t: TestGantry;
  afterAll(() => t?.close());

  it(`a key whose receiver never answers holds at most ${WEBHOOK_KEY_SHARE} of ${WEBHOOK_CONCURRENCY} connections; another key's webhook goes out before any of its calls times out`, async () => {
    // Calls time out after 60 s: a delivery of B that waited for A's calls to end would come after that.
    t = await startTestGantry({ jobTakeWaitMs: 200, webhookTimeoutMs: 60_000, webhookRetryMs: 600_000, outboundAllow: ['127.0.0.1'] }, { backend });
    const silent = await receiver(false);
    const ok = await receiver(true);
    try {
      const ep = uniqueId('hooks');
      await t.createEndpoint(ep);
      const keyA = await t.createKey(['run'], [ep]);
      const keyB = await t.createKey(['run'], [ep]);
      const worker = await t.createKey(['worker'], [ep]);
      // Every delivery due at once, A's first (they ended first): the sender is paused meanwhile.
      await t.gantry.gateway.webhooks.stop();
      await finishJobs(t, ep, keyA, worker, 2 * WEBHOOK_CONCURRENCY + 16, silent.url);
      await finishJobs(t, ep, keyB, worker, 1, ok.url);
      t.gantry.gateway.webhooks.start();
      await eventually(async () => (ok.stats.requests >= 1 ? true : undefined), 50_000, "key B's webhook to be delivered");
      // None of A's calls has ended (each is held until its 60 s timeout): B did not wait for them.
      expect(silent.stats.closed).toBe(0);
      await eventually(async () => (silent.stats.requests >= WEBHOOK_KEY_SHARE ? true : undefined), 30_000, "A's share of calls to be open");
      expect(silent.stats.maxOpen).toBeLessThanOrEqual(WEBHOOK_KEY_SHARE);
      expect(silent.stats.requests).toBe(WEBHOOK_KEY_SHARE);
    } finally {
      await ok.close();
      await silent.close();
    }
  }, 120_000);
});
