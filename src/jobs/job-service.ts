import type { GantryConfig } from '../config/config.js';
import type { JobWaiters } from '../dispatch/job-waiters.js';
import { isRetryable, isTerminal, type JobStatus } from '../model/job-states.js';
import type { EndpointRecord, JobCounts, JobRecord } from '../model/records.js';
import type { PoolView } from './pool-view.js';
import { checkOutboundUrl, type OutboundPolicy } from '../security/outbound.js';
import type { SecretBox } from '../security/secret-box.js';
import type { JobStore, WebhookAttempt, WorkerStore } from '../store/store.js';
import type { EndpointService } from './endpoint-service.js';
import { uuidv7 } from './job-ids.js';
import type { SubmitRequest } from './policy.js';
import type { QueueGauge } from './queue-gauge.js';
import { initialJob, type JobTransitions } from './transitions.js';

/** What a cancel did: the cancelled job, or why nothing changed. */
export type CancelResult = { ok: true; job: JobRecord } | { ok: false; reason: 'not-found' } | { ok: false; reason: 'wrong-state'; job: JobRecord };
/** What a retry did: the requeued job, or why nothing changed (expired: the result is past its retention). */
export type RetryResult = CancelResult | { ok: false; reason: 'expired'; job: JobRecord };

/** The reason a stream read's own wait is called off: a constant, so no DOMException is built each time. */
const CALLED_OFF = new Error('stream read ended');

/** Chunks drained from a job's stream, with the job as read just before. */
export interface StreamRead {
  job: JobRecord;
  chunks: string[];
}

/** A job with what the console's job page shows beside it (read only: nothing is drained). */
export interface JobInspection {
  job: JobRecord;
  /** The first buffered stream chunks (JSON text), oldest first, still there for the client to read. */
  chunks: string[];
  /** How many chunks are buffered in all. */
  totalChunks: number;
  /** The recorded webhook delivery attempts, oldest first. */
  webhookAttempts: WebhookAttempt[];
}

/** /health's answer: job counts and workers by state (RunPod's names). */
export interface EndpointHealth {
  jobs: JobCounts;
  workers: { idle: number; initializing: number; ready: number; running: number; throttled: number; unhealthy: number };
}

/**
 * The client side of the job API (docs/api.md): submit, read, wait, cancel, retry, purge,
 * health. A job of another endpoint is "not found" everywhere. State changes go through
 * JobTransitions; this service adds what clients see: endpoint checks, waiting, health.
 */
export interface JobService {
  /** Admits (queue-overload check, the endpoint's input hook), creates and queues a job. */
  submit(endpoint: EndpointRecord, request: SubmitRequest, opts: { sync: boolean; keyId: string | null }): Promise<JobRecord>;
  /** The job if it exists on this endpoint. */
  getJob(endpointId: string, id: string): Promise<JobRecord | undefined>;
  /** Status read; `ttlMs` (status?ttl=) shortens the job's retention. */
  status(endpointId: string, id: string, ttlMs: number | null): Promise<JobRecord | undefined>;
  /** Waits until the job is terminal or `waitMs` passes; returns its latest state. */
  waitTerminal(endpointId: string, id: string, waitMs: number, signal?: AbortSignal): Promise<JobRecord | undefined>;
  cancel(endpointId: string, id: string): Promise<CancelResult>;
  retry(endpointId: string, id: string): Promise<RetryResult>;
  /** Cancels every queued job of the endpoint; returns how many. */
  purgeQueue(endpointId: string): Promise<number>;
  /** Stream poll: drains buffered chunks; when none, waits up to `waitMs` for one or the end. */
  readStream(endpointId: string, id: string, waitMs: number, signal?: AbortSignal): Promise<StreamRead | undefined>;
  /**
   * Server-sent events: drains buffered chunks; when none and the job's status is still
   * `lastStatus`, waits up to `waitMs` for a chunk, another status or the end.
   */
  watchStream(endpointId: string, id: string, lastStatus: JobStatus | null, waitMs: number, signal?: AbortSignal): Promise<StreamRead | undefined>;
  health(endpointId: string): Promise<EndpointHealth>;
  /** Most recent jobs of the endpoint, newest first. */
  listRequests(endpointId: string, limit: number): Promise<JobRecord[]>;
  /**
   * The job with its first buffered chunks (not drained; bounded as store.peekStream) and its
   * webhook attempts; undefined when it is not a job of this endpoint.
   */
  inspect(endpointId: string, id: string, chunks: { limit: number; maxChars: number }): Promise<JobInspection | undefined>;
}

/** What the job service uses. */
export interface JobServiceDeps {
  store: Pick<JobStore, 'getJob' | 'drainStream' | 'peekStream' | 'listWebhookAttempts' | 'countJobs' | 'queueStats' | 'listJobs'> &
    Pick<WorkerStore, 'listWorkers'>;
  transitions: JobTransitions;
  endpoints: Pick<EndpointService, 'hooksOf'>;
  gauge: QueueGauge;
  waiters: JobWaiters;
  /** The worker pool of this gateway, when it runs one (initializing, throttled, crash-looping workers). */
  pool: PoolView;
  /** Seals a job's s3Config for storage. */
  secrets: Pick<SecretBox, 'seal'>;
  config: Pick<GantryConfig, 'syncRetentionMs' | 'asyncRetentionMs' | 'workerLostMs'>;
  /** Where a webhook may point (security/outbound.ts); checked when the job is submitted. */
  outbound?: OutboundPolicy;
  now(): number;
}

/** @example const jobs = createJobService({ store, transitions, endpoints, gauge, waiters, pool, secrets, config, now: Date.now }); */
export function createJobService(deps: JobServiceDeps): JobService {
  return new Jobs(deps);
}

class Jobs implements JobService {
  constructor(private readonly deps: JobServiceDeps) {}

  async submit(endpoint: EndpointRecord, request: SubmitRequest, opts: { sync: boolean; keyId: string | null }): Promise<JobRecord> {
    this.deps.endpoints.hooksOf(endpoint.id)?.validateInput?.(request.input);
    if (request.webhook !== null && this.deps.outbound) await checkOutboundUrl(this.deps.outbound, request.webhook, 'webhook', this.deps.now());
    this.deps.gauge.admit(endpoint);
    const t = this.deps.now();
    // Kept this long after it ends, however it ends (a queue ttl too): policy.ttl bounds the
    // job's wait, never the life of its result (docs/states.md, Retention).
    const retention = opts.sync ? this.deps.config.syncRetentionMs : this.deps.config.asyncRetentionMs;
    const job = initialJob({
      id: opts.sync ? `sync-${uuidv7(t)}` : uuidv7(t),
      endpointId: endpoint.id,
      inputJson: request.inputJson,
      webhook: request.webhook,
      s3Config: request.s3Config ? this.deps.secrets.seal(JSON.stringify(request.s3Config)) : null,
      executionTimeoutMs: request.executionTimeoutMs,
      lowPriority: request.lowPriority,
      ttlMs: request.ttlMs,
      retentionMs: retention,
      maxAttempts: endpoint.maxAttempts,
      sync: opts.sync,
      keyId: opts.keyId,
      now: t,
    });
    await this.deps.transitions.submit(job);
    return job;
  }

  async getJob(endpointId: string, id: string): Promise<JobRecord | undefined> {
    const job = await this.deps.store.getJob(id);
    return job && job.endpointId === endpointId ? job : undefined;
  }

  async status(endpointId: string, id: string, ttlMs: number | null): Promise<JobRecord | undefined> {
    const job = await this.getJob(endpointId, id);
    if (job && ttlMs !== null) {
      await this.deps.transitions.shortenRetention(id, ttlMs);
      job.retentionMs = Math.min(job.retentionMs, ttlMs);
    }
    return job;
  }

  async waitTerminal(endpointId: string, id: string, waitMs: number, signal?: AbortSignal): Promise<JobRecord | undefined> {
    const deadline = this.deps.now() + waitMs;
    for (;;) {
      const job = await this.getJob(endpointId, id);
      if (!job || isTerminal(job.status)) return job;
      const left = deadline - this.deps.now();
      if (left <= 0 || signal?.aborted) return job;
      // Re-read at least every second: a wake-up lost between gateways only delays.
      await this.deps.waiters.wait(id, Math.min(left, 1_000), signal);
    }
  }

  async cancel(endpointId: string, id: string): Promise<CancelResult> {
    const job = await this.getJob(endpointId, id);
    if (!job) return { ok: false, reason: 'not-found' };
    const cancelled = await this.deps.transitions.cancel(id);
    if (cancelled) return { ok: true, job: cancelled };
    return { ok: false, reason: 'wrong-state', job: (await this.getJob(endpointId, id)) ?? job };
  }

  async retry(endpointId: string, id: string): Promise<RetryResult> {
    const job = await this.getJob(endpointId, id);
    if (!job) return { ok: false, reason: 'not-found' };
    if (!isRetryable(job.status)) return { ok: false, reason: 'wrong-state', job };
    const retried = await this.deps.transitions.retry(id);
    if (retried) return { ok: true, job: retried };
    const current = await this.getJob(endpointId, id);
    if (!current) return { ok: false, reason: 'not-found' };
    return isRetryable(current.status) ? { ok: false, reason: 'expired', job: current } : { ok: false, reason: 'wrong-state', job: current };
  }

  async purgeQueue(endpointId: string): Promise<number> {
    return (await this.deps.transitions.purge(endpointId)).length;
  }

  readStream(endpointId: string, id: string, waitMs: number, signal?: AbortSignal): Promise<StreamRead | undefined> {
    return this.drainOrWait(endpointId, id, waitMs, signal, (job) => isTerminal(job.status));
  }

  watchStream(endpointId: string, id: string, lastStatus: JobStatus | null, waitMs: number, signal?: AbortSignal): Promise<StreamRead | undefined> {
    return this.drainOrWait(endpointId, id, waitMs, signal, (job) => job.status !== lastStatus || isTerminal(job.status));
  }

  /** Drains the job's chunks; when none and `settled(job)` is false, waits for the next update (at most `waitMs`). */
  private async drainOrWait(endpointId: string, id: string, waitMs: number, signal: AbortSignal | undefined, settled: (job: JobRecord) => boolean): Promise<StreamRead | undefined> {
    const deadline = this.deps.now() + waitMs;
    // One controller per call ends a wait still pending on return (or when the client leaves).
    const listening = new AbortController();
    const stop = (): void => listening.abort(CALLED_OFF);
    signal?.addEventListener('abort', stop, { once: true });
    let pending = false;
    try {
      for (;;) {
        const left = deadline - this.deps.now();
        // Listen before reading: a chunk posted while this reads wakes the wait at once
        // instead of at the next re-read. Re-read at least every second all the same.
        const woken = left > 0 && !signal?.aborted ? this.deps.waiters.wait(id, Math.min(left, 1_000), listening.signal) : undefined;
        pending = woken !== undefined;
        // Status first, then drain: chunks are only appended while IN_PROGRESS, so once a
        // terminal status is read, this drain gets the last of them.
        const job = await this.getJob(endpointId, id);
        if (!job) return undefined;
        const chunks = await this.deps.store.drainStream(id);
        if (chunks.length > 0 || settled(job) || !woken) return { job, chunks };
        await woken;
        pending = false;
      }
    } finally {
      signal?.removeEventListener('abort', stop);
      if (pending) stop();
    }
  }

  async health(endpointId: string): Promise<EndpointHealth> {
    const now = this.deps.now();
    const [jobs, workers, stats] = await Promise.all([
      this.deps.store.countJobs(endpointId),
      this.deps.store.listWorkers(endpointId),
      this.deps.store.queueStats({ endpointId, now }),
    ]);
    const cutoff = now - this.deps.config.workerLostMs;
    const polling = new Set<string>();
    let idle = 0;
    let running = 0;
    let unhealthy = 0;
    for (const worker of workers) {
      if (worker.lastSeenAt < cutoff) continue;
      polling.add(worker.id);
      if (!worker.healthy) unhealthy++;
      else if ((stats.heldBy[worker.id] ?? 0) > 0) running++;
      else idle++;
    }
    // A pool worker counts as initializing until the store shows it polling.
    const pool = this.deps.pool.health(endpointId);
    const initializing = pool ? pool.initializing.filter((id) => !polling.has(id)).length : 0;
    unhealthy += pool ? pool.unhealthy.filter((id) => !polling.has(id)).length : 0;
    return { jobs, workers: { idle, initializing, ready: idle + running, running, throttled: pool?.throttled ?? 0, unhealthy } };
  }

  listRequests(endpointId: string, limit: number): Promise<JobRecord[]> {
    return this.deps.store.listJobs({ endpointId, limit });
  }

  async inspect(endpointId: string, id: string, bounds: { limit: number; maxChars: number }): Promise<JobInspection | undefined> {
    const job = await this.getJob(endpointId, id);
    if (!job) return undefined;
    const [stream, webhookAttempts] = await Promise.all([this.deps.store.peekStream({ id, ...bounds }), this.deps.store.listWebhookAttempts(id)]);
    return { job, chunks: stream.chunks, totalChunks: stream.total, webhookAttempts };
  }
}
