import { createHmac } from 'node:crypto';
import type { App } from '../app.js';
import { renderJob } from '../jobs/job-view.js';
import type { JobRecord } from '../store/store.js';

/** One delivery and two retries (spec, Events). */
export const WEBHOOK_ATTEMPTS = 3;
const BATCH = 50;
const POLL_MS = 1_000;

/**
 * Webhook sender: POSTs the job object (what GET /status returns) to the job's `webhook` URL
 * when the job ends; 2xx acknowledges; otherwise it retries up to 2 more times,
 * `webhookRetryMs` apart. The pending delivery lives on the job row (webhookNextAt), set in
 * the same write that ended the job, so a restart loses none. Before a call the row is leased
 * (nextAt pushed past the call's timeout) so a second pass never sends it twice at once.
 * Delivery is at-least-once; receivers can de-duplicate on the `webhook-id` header (job id
 * and retry count: the same for every attempt). Endpoints with a `webhookSecret` get signed
 * calls (signWebhook).
 */
/**
 * Standard Webhooks headers (standardwebhooks.com): `webhook-timestamp` in seconds and
 * `webhook-signature: v1,<base64 HMAC-SHA256 of "id.timestamp.body">`, keyed by the base64
 * bytes after `whsec_`. Receivers verify with any Standard Webhooks library.
 *
 * @example signWebhook('whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw', 'msg_1', 1700000000, '{}')['webhook-signature']
 */
export function signWebhook(secret: string, id: string, timestamp: number, body: string): Record<string, string> {
  const key = Buffer.from(secret.slice('whsec_'.length), 'base64');
  const signature = createHmac('sha256', key).update(`${id}.${timestamp}.${body}`).digest('base64');
  return { 'webhook-timestamp': String(timestamp), 'webhook-signature': `v1,${signature}` };
}

export function createWebhookSender(app: App, fetchImpl: typeof fetch = fetch) {
  let timer: NodeJS.Timeout | undefined;
  let running: Promise<void> | undefined;
  let again = false;
  let stopped = true;
  const inFlight = new Set<Promise<void>>();

  async function deliver(job: JobRecord): Promise<void> {
    const attempt = job.webhookAttempts + 1;
    const url = job.webhook;
    if (url === null) return;
    let ok = false;
    let detail = '';
    try {
      const body = renderJob(job);
      // One id per delivery of one outcome: the same across its attempts, new after a retry of the job.
      const id = `${job.id}.${job.retries}`;
      const headers: Record<string, string> = { 'content-type': 'application/json', 'user-agent': 'gantry-webhook', 'webhook-id': id };
      const sealed = (await app.jobs.getEndpoint(job.endpointId))?.webhookSecret ?? null;
      if (sealed !== null) Object.assign(headers, signWebhook(app.secrets.open(sealed), id, Math.floor(app.now() / 1000), body));
      const response = await fetchImpl(url, {
        method: 'POST',
        headers,
        body,
        signal: AbortSignal.timeout(app.config.webhookTimeoutMs),
        redirect: 'manual',
      });
      ok = response.status >= 200 && response.status < 300;
      detail = `HTTP ${response.status}`;
      await response.body?.cancel();
    } catch (err) {
      detail = (err as Error).message;
    }
    const last = ok || attempt >= WEBHOOK_ATTEMPTS;
    await app.store.markWebhook({ id: job.id, attempts: attempt, nextAt: last ? null : app.now() + app.config.webhookRetryMs });
    if (!ok) app.logger.warn({ jobId: job.id, endpointId: job.endpointId, attempt, detail, gaveUp: last }, 'webhook delivery failed');
  }

  async function runOnce(): Promise<number> {
    const due = await app.store.dueWebhooks({ now: app.now(), limit: BATCH });
    for (const job of due) {
      // Lease: nobody else picks it up while this call may still be running.
      await app.store.markWebhook({ id: job.id, attempts: job.webhookAttempts, nextAt: app.now() + app.config.webhookTimeoutMs + 5_000 });
      const p: Promise<void> = deliver(job)
        .catch((err: unknown) => app.logger.error({ err, jobId: job.id }, 'webhook bookkeeping failed'))
        .finally(() => inFlight.delete(p));
      inFlight.add(p);
    }
    return due.length;
  }

  function pass(): void {
    if (stopped) return;
    if (running) {
      again = true;
      return;
    }
    clearTimeout(timer);
    running = runOnce()
      .then(
        (n) => {
          if (n === BATCH) again = true;
        },
        (err: unknown) => app.logger.error({ err }, 'webhook pass failed'),
      )
      .finally(() => {
        running = undefined;
        if (stopped) return;
        if (again) {
          again = false;
          setImmediate(pass);
        } else {
          timer = setTimeout(pass, POLL_MS);
          timer.unref();
        }
      });
  }

  let unsubscribe: (() => void) | undefined;
  return {
    runOnce,
    start(): void {
      if (!stopped) return;
      stopped = false;
      unsubscribe = app.notifier.subscribe((event) => {
        if (event.type === 'webhook-due') pass();
      });
      pass();
    },
    async stop(): Promise<void> {
      stopped = true;
      unsubscribe?.();
      unsubscribe = undefined;
      clearTimeout(timer);
      await running;
      await Promise.all([...inFlight]);
    },
  };
}

export type WebhookSender = ReturnType<typeof createWebhookSender>;
