import type { GantryConfig } from '../config/config.js';
import type { JobWaiters } from '../dispatch/job-waiters.js';
import { isRetryable, isTerminal, type JobStatus } from '../model/job-states.js';
import { textOf, utf8Length, type JsonTextOrBytes } from '../model/json.js';
import type { EndpointRecord, JobCounts, JobRecord, JobWithInput } from '../model/records.js';
import type { ShownJob } from './job-view.js';
import type { PoolView } from './pool-view.js';
import { checkOutboundUrl, type OutboundPolicy } from '../security/outbound.js';
import { openIfSealed, type SecretBox } from '../security/secret-box.js';
import type { IdempotentJob, JobStore, WebhookAttempt, WorkerStore } from '../store/store.js';
import type { EndpointService } from './endpoint-service.js';
import type { IdempotencyKey } from './idempotency.js';
import { uuidv7 } from './job-ids.js';
import type { SubmitRequest } from './policy.js';
import type { QueueGauge } from './queue-gauge.js';
import type { KeyQuotas } from './key-quotas.js';
import { runOf, StreamReads, type StreamRead } from './stream-reads.js';
import type { SubmitTracer } from './job-observer.js';
import { initialJob, type JobTransitions } from './transitions.js';

/** Who submits, and how: a runsync job, the submitting key, the client's W3C `traceparent` header (read only while tracing is on). */
export interface SubmitOptions {
  sync: boolean;
  keyId: string | null;
  traceparent?: string | undefined;
}

/** What a cancel did: the cancelled job, or why nothing changed. */
export type CancelResult = { ok: true; job: JobRecord } | { ok: false; reason: 'not-found' } | { ok: false; reason: 'wrong-state'; job: JobRecord };
/** What a retry did: the requeued job, or why nothing changed (expired: the result is past its retention). */
export type RetryResult = CancelResult | { ok: false; reason: 'expired'; job: JobRecord };
/** What redeliverWebhook did: the job's delivery is due again, or why not. */
export type RedeliverResult = { ok: true; job: JobRecord } | { ok: false; reason: 'not-found' } | { ok: false; reason: 'no-webhook' | 'not-ended' | 'pending'; job: JobRecord };

export type { StreamRead } from './stream-reads.js';

/** What a stream reader last saw of its job: a status or run (runOf) other than these ends its wait. */
export interface SeenJob {
  status: JobStatus;
  run: number;
}

/**
 * What a submission under an Idempotency-Key did: `created` the job; found the job an earlier
 * submission of the same request made (`replayed`); or found that the key made a job from
 * another request (`conflict`: nothing was submitted).
 */
export interface IdempotentSubmit {
  outcome: 'created' | 'replayed' | 'conflict';
  job: JobRecord;
}

/** A job with what the console's job page shows beside it (read only: nothing is drained). */
export interface JobInspection {
  job: JobWithInput;
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
  submit(endpoint: EndpointRecord, request: SubmitRequest, opts: SubmitOptions): Promise<JobRecord>;
  /**
   * submit under an Idempotency-Key: the job its key already made, while that job exists (not
   * admitted again: a retry during an overload still finds its job), else a new one. Two calls
   * with one key at once make one job.
   */
  submitOnce(endpoint: EndpointRecord, request: SubmitRequest, opts: SubmitOptions & { key: IdempotencyKey }): Promise<IdempotentSubmit>;
  /** The job if it exists on this endpoint. */
  getJob(endpointId: string, id: string): Promise<JobRecord | undefined>;
  /** Status read, with the job's input while it is live (shown then: job-view.ts); `ttlMs` (status?ttl=) shortens the job's retention. */
  status(endpointId: string, id: string, ttlMs: number | null): Promise<ShownJob | undefined>;
  /** Waits until the job is terminal or `waitMs` passes; returns its latest state. */
  waitTerminal(endpointId: string, id: string, waitMs: number, signal?: AbortSignal): Promise<JobRecord | undefined>;
  cancel(endpointId: string, id: string): Promise<CancelResult>;
  /** Delivers a finished job's webhook once more (the console's "Resend webhook"): not while the job runs or a delivery is pending. */
  redeliverWebhook(endpointId: string, id: string): Promise<RedeliverResult>;
  retry(endpointId: string, id: string): Promise<RetryResult>;
  /** Cancels every queued job of the endpoint; returns how many. */
  purgeQueue(endpointId: string): Promise<number>;
  /**
   * Stream poll (JSON /stream): the first page of the job's buffered chunks; when it is empty and
   * the job is live, waits up to `waitMs` for a chunk or the end. Nothing is deleted until
   * `delivered`.
   */
  readStream(endpointId: string, id: string, waitMs: number, signal?: AbortSignal): Promise<StreamRead | undefined>;
  /**
   * Server-sent events: the page after seq `after` (the reader's last); when it is empty and the
   * job's status and attempts are still `last`'s, waits up to `waitMs` for a chunk, another
   * status or hand-out, or the end.
   */
  watchStream(endpointId: string, id: string, last: SeenJob | null, after: number, waitMs: number, signal?: AbortSignal): Promise<StreamRead | undefined>;
  /** A stream page was written out to its reader: its chunks, up to seq `through`, are deleted. */
  delivered(id: string, through: number): Promise<void>;
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
  store: Pick<JobStore, 'getJob' | 'getJobInput' | 'findIdempotentJob' | 'readStream' | 'deleteStream' | 'peekStream' | 'listWebhookAttempts' | 'countJobs' | 'queueStats' | 'listJobs'> &
    Pick<WorkerStore, 'listWorkers'>;
  transitions: JobTransitions;
  endpoints: Pick<EndpointService, 'hooksOf'>;
  gauge: QueueGauge;
  waiters: JobWaiters;
  /** The worker pool of this gateway, when it runs one (initializing, throttled, crash-looping workers). */
  pool: PoolView;
  /** Seals a job's s3Config and webhook URL for storage; opens the URL for the job page. */
  secrets: Pick<SecretBox, 'seal' | 'open'>;
  config: Pick<GantryConfig, 'syncRetentionMs' | 'asyncRetentionMs' | 'workerLostMs'>;
  /** Where a webhook may point (security/outbound.ts); checked when the job is submitted. */
  outbound?: OutboundPolicy;
  /** The submitting key's budget and job cap (key-quotas.ts); checked when the job is submitted. */
  quotas?: Pick<KeyQuotas, 'admit'>;
  /** The tracing feature's submit spans (job-observer.ts); none: no trace context is made or stored. */
  tracer?: SubmitTracer;
  now(): number;
}

/** @example const jobs = createJobService({ store, transitions, endpoints, gauge, waiters, pool, secrets, config, now: Date.now }); */
export function createJobService(deps: JobServiceDeps): JobService {
  return new Jobs(deps);
}

/** The job a key already made: a replay of the same request, or a conflict with another. */
function replayOf(held: IdempotentJob, key: IdempotencyKey): IdempotentSubmit {
  return { outcome: held.requestDigest === key.requestDigest ? 'replayed' : 'conflict', job: held.job };
}

class Jobs implements JobService {
  private readonly streams: StreamReads;

  constructor(private readonly deps: JobServiceDeps) {
    this.streams = new StreamReads(deps);
  }

  async submit(endpoint: EndpointRecord, request: SubmitRequest, opts: SubmitOptions): Promise<JobRecord> {
    const inputBytes = utf8Length(request.inputJson);
    const checking = this.admit(endpoint, request, inputBytes, opts.keyId);
    if (checking) await checking;
    const quota = this.deps.quotas?.admit(opts.keyId);
    if (quota) await quota;
    // The record holds no input: what the caller keeps of it (runsync, for its whole wait) is small.
    const job = this.newJob(endpoint, request, opts, inputBytes);
    // Tracing off: no tracer, nothing made or called (docs/observability.md).
    if (this.deps.tracer === undefined) await this.deps.transitions.submit(job, request.inputJson);
    else await this.submitTraced(this.deps.tracer, job, request.inputJson, opts.traceparent);
    return job;
  }

  /** submit's write inside the job's submit span. */
  private async submitTraced(tracer: SubmitTracer, job: JobRecord, inputJson: JsonTextOrBytes, parent: string | undefined): Promise<void> {
    const span = tracer.begin(job, parent);
    try {
      await this.deps.transitions.submit(job, inputJson);
    } catch (error) {
      span.end({ error });
      throw error;
    }
    span.end('stored');
  }

  async submitOnce(endpoint: EndpointRecord, request: SubmitRequest, opts: SubmitOptions & { key: IdempotencyKey }): Promise<IdempotentSubmit> {
    const held = await this.deps.store.findIdempotentJob(opts.key.keyDigest);
    if (held) return replayOf(held, opts.key);
    const inputBytes = utf8Length(request.inputJson);
    await this.admit(endpoint, request, inputBytes, opts.keyId);
    await this.deps.quotas?.admit(opts.keyId);
    const job = this.newJob(endpoint, request, opts, inputBytes);
    const span = this.deps.tracer?.begin(job, opts.traceparent);
    let written: Awaited<ReturnType<JobTransitions['submitOnce']>>;
    try {
      written = await this.deps.transitions.submitOnce(job, request.inputJson, opts.key);
    } catch (error) {
      span?.end({ error });
      throw error;
    }
    span?.end(written.created ? 'stored' : 'replayed');
    // Another call with the key got there between the read and the write.
    return written.created ? { outcome: 'created', job } : replayOf(written.existing, opts.key);
  }

  /**
   * The checks before a job exists, each throwing its 4xx: the endpoint's input hook, the
   * webhook's address (a promise only then: a submission without a webhook awaits nothing
   * here), the queue's overload (jobs and input bytes of the endpoint, free space of the disk).
   */
  private admit(endpoint: EndpointRecord, request: SubmitRequest, inputBytes: number, keyId: string | null): Promise<void> | undefined {
    const validate = this.deps.endpoints.hooksOf(endpoint.id)?.validateInput;
    // An input that came as text (a large body parsed off the event loop) is parsed only for an endpoint that checks it.
    if (validate) validate(request.input ?? (JSON.parse(textOf(request.inputJson)) as Record<string, unknown>));
    if (request.webhook !== null && this.deps.outbound) return this.admitWithWebhook(endpoint, request.webhook, inputBytes, keyId);
    this.deps.gauge.admit(endpoint, inputBytes, keyId ?? '');
    return undefined;
  }

  private async admitWithWebhook(endpoint: EndpointRecord, webhook: string, inputBytes: number, keyId: string | null): Promise<void> {
    if (this.deps.outbound) await checkOutboundUrl(this.deps.outbound, webhook, 'webhook', this.deps.now());
    this.deps.gauge.admit(endpoint, inputBytes, keyId ?? '');
  }

  /** The new job's record (initialJob), with its id and retention. */
  private newJob(endpoint: EndpointRecord, request: SubmitRequest, opts: SubmitOptions, inputBytes: number): JobRecord {
    const t = this.deps.now();
    // Kept this long after it ends, however it ends (a queue ttl too): policy.ttl bounds the
    // job's wait, never the life of its result (docs/states.md, Retention).
    const retention = opts.sync ? this.deps.config.syncRetentionMs : this.deps.config.asyncRetentionMs;
    return initialJob({
      id: opts.sync ? `sync-${uuidv7(t)}` : uuidv7(t),
      endpointId: endpoint.id,
      // Sealed like s3Config: a webhook URL may carry a token (docs/security.md).
      webhook: request.webhook === null ? null : this.deps.secrets.seal(request.webhook),
      s3Config: request.s3Config ? this.deps.secrets.seal(JSON.stringify(request.s3Config)) : null,
      executionTimeoutMs: request.executionTimeoutMs,
      lowPriority: request.lowPriority,
      ttlMs: request.ttlMs,
      retentionMs: retention,
      maxAttempts: endpoint.maxAttempts,
      sync: opts.sync,
      keyId: opts.keyId,
      now: t,
      inputBytes,
    });
  }

  async getJob(endpointId: string, id: string): Promise<JobRecord | undefined> {
    const job = await this.deps.store.getJob(id);
    return job && job.endpointId === endpointId ? job : undefined;
  }

  async status(endpointId: string, id: string, ttlMs: number | null): Promise<ShownJob | undefined> {
    const job: ShownJob | undefined = await this.getJob(endpointId, id);
    if (!job) return undefined;
    if (ttlMs !== null) {
      await this.deps.transitions.shortenRetention(id, ttlMs);
      job.retentionMs = Math.min(job.retentionMs, ttlMs);
    }
    // Read apart, and only for a live job: a finished job's answer has no input (job-view.ts).
    if (!isTerminal(job.status)) job.inputJson = await this.deps.store.getJobInput(id);
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

  async redeliverWebhook(endpointId: string, id: string): Promise<RedeliverResult> {
    const job = await this.getJob(endpointId, id);
    if (!job) return { ok: false, reason: 'not-found' };
    if (job.webhook === null) return { ok: false, reason: 'no-webhook', job };
    if (await this.deps.transitions.redeliverWebhook(id)) return { ok: true, job };
    // Refused by the store: read again to say why (it may have ended, or its delivery started, meanwhile).
    const now = (await this.getJob(endpointId, id)) ?? job;
    return { ok: false, reason: isTerminal(now.status) ? 'pending' : 'not-ended', job: now };
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
    return this.deps.transitions.purge(endpointId);
  }

  readStream(endpointId: string, id: string, waitMs: number, signal?: AbortSignal): Promise<StreamRead | undefined> {
    return this.streams.read(endpointId, id, 0, waitMs, signal, (job) => isTerminal(job.status));
  }

  watchStream(endpointId: string, id: string, last: SeenJob | null, after: number, waitMs: number, signal?: AbortSignal): Promise<StreamRead | undefined> {
    return this.streams.read(endpointId, id, after, waitMs, signal, (job) => job.status !== last?.status || runOf(job) !== last.run || isTerminal(job.status));
  }

  delivered(id: string, through: number): Promise<void> {
    return this.streams.delivered(id, through);
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
    const pool = this.deps.pool.health(endpointId);
    // A paused worker (flashboot) keeps its store row until it ages out: it is not ready.
    const paused = new Set(pool?.paused ?? []);
    for (const worker of workers) {
      if (worker.lastSeenAt < cutoff || paused.has(worker.id)) continue;
      polling.add(worker.id);
      if (!worker.healthy) unhealthy++;
      else if ((stats.heldBy.get(worker.id) ?? 0) > 0) running++;
      else idle++;
    }
    // A pool worker counts as initializing until the store shows it polling.
    const initializing = pool ? pool.initializing.filter((id) => !polling.has(id)).length : 0;
    unhealthy += pool ? pool.unhealthy.filter((id) => !polling.has(id)).length : 0;
    return { jobs, workers: { idle, initializing, ready: idle + running, running, throttled: pool?.throttled ?? 0, unhealthy } };
  }

  listRequests(endpointId: string, limit: number): Promise<JobRecord[]> {
    return this.deps.store.listJobs({ endpointId, limit });
  }

  async inspect(endpointId: string, id: string, bounds: { limit: number; maxChars: number }): Promise<JobInspection | undefined> {
    const found = await this.getJob(endpointId, id);
    if (!found) return undefined;
    const [stream, webhookAttempts, inputJson] = await Promise.all([
      this.deps.store.peekStream({ id, ...bounds }),
      this.deps.store.listWebhookAttempts(id),
      this.deps.store.getJobInput(id),
    ]);
    // Deleted between the reads: as not found.
    if (inputJson === undefined) return undefined;
    const job: JobWithInput = { ...found, inputJson };
    // The page shows the webhook's origin: the URL is opened here, its path and query never leave.
    const shown = job.webhook === null ? job : { ...job, webhook: openIfSealed(this.deps.secrets, job.webhook) };
    return { job: shown, chunks: stream.chunks, totalChunks: stream.total, webhookAttempts };
  }
}
