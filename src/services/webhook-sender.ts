import { createHmac } from 'node:crypto';
import type { Logger } from 'pino';
import type { GantryConfig } from '../config/config.js';
import type { EndpointService } from '../jobs/endpoint-service.js';
import { renderJob } from '../jobs/job-view.js';
import type { Notifier } from '../model/events.js';
import { AppError } from '../model/errors.js';
import { checkOutboundUrl, createOutboundFetch, createOutboundPolicy, OutboundRefusedError, type OutboundPolicy } from '../security/outbound.js';
import { openIfSealed, type SecretBox } from '../security/secret-box.js';
import type { JobStore } from '../store/store.js';
import type { Clock } from '../util/clock.js';
import { periodic, type Periodic } from '../util/periodic.js';
import type { JobRecord } from '../model/records.js';

/** One delivery and two retries (spec, Events). */
export const WEBHOOK_ATTEMPTS = 3;
const BATCH = 50;
const POLL_MS = 1_000;
/**
 * Most deliveries in flight at once (each holds one connection): past it due deliveries wait
 * in the store, unleased, so receivers that never answer cannot pile up sockets.
 */
export const WEBHOOK_CONCURRENCY = 32;
/**
 * Most deliveries of one key's jobs in flight at once (half the pool): a key whose receiver
 * never answers holds at most these, and the other keys' deliveries start at once in the rest
 * (docs/security.md, "Shared limits").
 */
export const WEBHOOK_KEY_SHARE = WEBHOOK_CONCURRENCY / 2;
/** Reads of due deliveries one pass makes at most when it leaves some for their key's share. */
const READS_A_PASS = 4;

/** The key a job's deliveries are counted under ('' for jobs without one). */
function keyOf(job: JobRecord): string {
  return job.keyId ?? '';
}

/**
 * Webhook sender: POSTs the job object (what GET /status returns) to the job's `webhook` URL
 * when the job ends; 2xx acknowledges; otherwise it retries up to 2 more times,
 * `webhookRetryMs` apart. The pending delivery lives on the job row (webhookNextAt), set in
 * the same write that ended the job, so a restart loses none. Before a call the row is leased
 * (nextAt pushed past the call's timeout) so a second pass never sends it twice at once.
 * Delivery is at-least-once; receivers can de-duplicate on the `webhook-id` header (job id
 * and retry count: the same for every attempt). Endpoints with a `webhookSecret` get signed
 * calls (signWebhook). What each attempt met (the HTTP status, or a short error class: see
 * webhookErrorClass) is recorded with the job by the same write that schedules the next one,
 * for the console's job page (store.listWebhookAttempts).
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

const BLOCKED = 'blocked by outbound policy';

/**
 * What a webhook call that got no answer met, as a short class kept with the attempt (never the
 * error's message, which may quote the URL): `blocked by outbound policy`, `timeout`,
 * `refused`, `DNS lookup failed`, `connection reset`, `TLS error` or `network error`.
 *
 * @example webhookErrorClass(Object.assign(new Error('connect ECONNREFUSED 127.0.0.1:9'), { code: 'ECONNREFUSED' })) === 'refused'
 */
export function webhookErrorClass(err: unknown): string {
  if (err instanceof OutboundRefusedError || (err instanceof AppError && err.code === 'INVALID_PARAMETER')) return BLOCKED;
  const e = err as { name?: unknown; code?: unknown; cause?: { code?: unknown } } | null;
  const code = String(e?.code ?? e?.cause?.code ?? '');
  if (code === 'EOUTBOUND') return BLOCKED;
  if (e?.name === 'TimeoutError' || e?.name === 'AbortError' || code === 'ABORT_ERR' || code === 'ETIMEDOUT' || code === 'UND_ERR_CONNECT_TIMEOUT') return 'timeout';
  if (code === 'ECONNREFUSED') return 'refused';
  if (code === 'ENOTFOUND' || code === 'EAI_AGAIN') return 'DNS lookup failed';
  if (code === 'ECONNRESET' || code === 'EPIPE' || code === 'UND_ERR_SOCKET') return 'connection reset';
  if (code.startsWith('ERR_TLS') || code.startsWith('ERR_SSL') || code.includes('CERT') || code.includes('SELF_SIGNED')) return 'TLS error';
  return 'network error';
}

/** Delivers the webhooks of finished jobs (a singleton on the leader). */
export interface WebhookSender {
  /** One pass: leases and starts the due deliveries; returns how many. */
  runOnce(): Promise<number>;
  start(): void;
  /** Stops polling and waits for the deliveries in flight. */
  stop(): Promise<void>;
}

/** What the webhook sender uses. */
export interface WebhookSenderDeps {
  store: Pick<JobStore, 'dueWebhooks' | 'markWebhook'>;
  /** The endpoint of a job, for its webhook signing secret. */
  endpoints: Pick<EndpointService, 'get'>;
  secrets: Pick<SecretBox, 'open'>;
  notifier: Pick<Notifier, 'subscribe'>;
  config: Pick<GantryConfig, 'webhookRetryMs' | 'webhookTimeoutMs'>;
  logger: Logger;
  clock: Clock;
  /** Where webhooks may point (security/outbound.ts); default: the policy with nothing allowed. */
  outbound?: OutboundPolicy;
  /** The transport (default: createOutboundFetch: keep-alive connections, guarded DNS lookups, no redirects). */
  fetch?: typeof fetch;
}

/** @example const sender = createWebhookSender({ store, endpoints, secrets, notifier, config, logger, clock: systemClock }); sender.start(); */
export function createWebhookSender(deps: WebhookSenderDeps): WebhookSender {
  return new Sender(deps);
}

class Sender implements WebhookSender {
  private readonly loop: Periodic;
  private stopped = true;
  private unsubscribe: (() => void) | undefined;
  private readonly inFlight = new Set<Promise<void>>();
  /** Deliveries in flight per key (keyOf); a key leaves the map when its last one ends. */
  private readonly inFlightByKey = new Map<string, number>();
  /** True when the last pass left due deliveries for want of room: the next delivery to end starts a pass. */
  private capped = false;
  private readonly fetch: typeof fetch;
  private readonly outbound: OutboundPolicy;

  constructor(private readonly deps: WebhookSenderDeps) {
    this.outbound = deps.outbound ?? createOutboundPolicy([]);
    this.fetch = deps.fetch ?? createOutboundFetch(this.outbound, { maxSockets: WEBHOOK_CONCURRENCY });
    // A full batch means more are due: the next pass runs at once.
    this.loop = periodic({ name: 'webhook', everyMs: POLL_MS, pass: async () => (await this.runOnce()) === BATCH, logger: deps.logger, clock: deps.clock, runAtStart: true });
  }

  /**
   * Leases and starts due deliveries while there is room, no key past WEBHOOK_KEY_SHARE: the
   * keys at their share are left out of the read, and a read that brings more of one key than
   * its share leaves the rest due (unleased) and reads again without that key.
   */
  async runOnce(): Promise<number> {
    const { store, clock, config } = this.deps;
    let started = 0;
    let leftForShare = false;
    for (let read = 0; read < READS_A_PASS; read++) {
      const room = Math.min(BATCH - started, WEBHOOK_CONCURRENCY - this.inFlight.size);
      if (room <= 0) break;
      const full = [...this.inFlightByKey].filter(([, n]) => n >= WEBHOOK_KEY_SHARE).map(([key]) => key);
      const due = await store.dueWebhooks({ now: clock.now(), limit: room, skipKeys: full });
      leftForShare = false;
      for (const job of due) {
        const key = keyOf(job);
        const held = this.inFlightByKey.get(key) ?? 0;
        if (held >= WEBHOOK_KEY_SHARE) {
          leftForShare = true;
          continue;
        }
        // Lease: nobody else picks it up while this call may still be running.
        await store.markWebhook({ id: job.id, attempts: job.webhookAttempts, nextAt: clock.now() + config.webhookTimeoutMs + 5_000 });
        this.inFlightByKey.set(key, held + 1);
        const p: Promise<void> = this.deliver(job)
          .catch((err: unknown) => this.deps.logger.error({ err, jobId: job.id }, 'webhook bookkeeping failed'))
          .finally(() => {
            this.inFlight.delete(p);
            const left = (this.inFlightByKey.get(key) ?? 1) - 1;
            if (left > 0) this.inFlightByKey.set(key, left);
            else this.inFlightByKey.delete(key);
            if (this.capped && !this.stopped) {
              this.capped = false;
              this.loop.kick();
            }
          });
        this.inFlight.add(p);
        started++;
      }
      if (!leftForShare) {
        // A read shorter than the room: nothing more is due now.
        this.capped = due.length >= room;
        break;
      }
    }
    // Due deliveries left for want of room (or of their key's share) start when one ends.
    if (leftForShare || this.inFlight.size >= WEBHOOK_CONCURRENCY) this.capped = true;
    return started;
  }

  start(): void {
    if (!this.stopped) return;
    this.stopped = false;
    this.unsubscribe = this.deps.notifier.subscribe((event) => {
      if (event.type === 'webhook-due') this.loop.kick();
    });
    this.loop.start();
  }

  async stop(): Promise<void> {
    this.stopped = true;
    this.unsubscribe?.();
    this.unsubscribe = undefined;
    await this.loop.stop();
    await Promise.all([...this.inFlight]);
  }

  private async deliver(job: JobRecord): Promise<void> {
    const { clock, config } = this.deps;
    const attempt = job.webhookAttempts + 1;
    let httpStatus: number | null = null;
    let error: string | null = null;
    try {
      // Checked again at send time: the policy may have changed since the job was submitted.
      const url = openIfSealed(this.deps.secrets, job.webhook ?? '');
      await checkOutboundUrl(this.outbound, url, 'webhook', clock.now());
      httpStatus = await this.post(job, url);
    } catch (err) {
      error = webhookErrorClass(err);
    }
    const ok = httpStatus !== null && httpStatus >= 200 && httpStatus < 300;
    const last = ok || error === BLOCKED || attempt >= WEBHOOK_ATTEMPTS;
    const now = clock.now();
    await this.deps.store.markWebhook({
      id: job.id,
      attempts: attempt,
      nextAt: last ? null : now + config.webhookRetryMs,
      attempt: { retries: job.retries, attempt, at: now, httpStatus, error },
    });
    if (!ok) this.deps.logger.warn({ jobId: job.id, endpointId: job.endpointId, attempt, detail: error ?? `HTTP ${httpStatus}`, gaveUp: last }, 'webhook delivery failed');
  }

  /** POSTs the job object to its webhook (signed when the endpoint has a secret); returns the HTTP status. */
  private async post(job: JobRecord, url: string): Promise<number> {
    const body = renderJob(job);
    // One id per delivery of one outcome: the same across its attempts, new after a retry of the job.
    const id = `${job.id}.${job.retries}`;
    const headers: Record<string, string> = { 'content-type': 'application/json', 'user-agent': 'gantry-webhook', 'webhook-id': id };
    const sealed = (await this.deps.endpoints.get(job.endpointId))?.webhookSecret ?? null;
    if (sealed !== null) Object.assign(headers, signWebhook(this.deps.secrets.open(sealed), id, Math.floor(this.deps.clock.now() / 1000), body));
    // The job's trace context (docs/observability.md): the tracing feature's fetch puts the delivery's own span in its place.
    if (job.traceparent !== null) headers.traceparent = job.traceparent;
    const response = await this.fetch(url, {
      method: 'POST',
      headers,
      body,
      signal: AbortSignal.timeout(this.deps.config.webhookTimeoutMs),
      redirect: 'manual',
    });
    await response.body?.cancel();
    return response.status;
  }
}
