import type { Logger } from 'pino';
import type { GantryConfig } from '../config.js';
import { AppError } from '../errors.js';
import type { JobWaiters } from '../dispatch/job-waiters.js';
import type { Notifier } from '../dispatch/notifier.js';
import type { PoolView } from '../pool/pool-view.js';
import type { EndpointRecord, JobCounts, JobRecord, NewJob, Store } from '../store/store.js';
import type { SubmitRequest } from './policy.js';
import type { SecretBox } from './secrets.js';
import { uuidv7 } from './job-ids.js';
import { isRetryable, isTerminal } from './states.js';

/** What the job service needs from the rest of the gateway. */
export interface JobServiceDeps {
  store: Store;
  notifier: Notifier;
  waiters: JobWaiters;
  config: GantryConfig;
  secrets: SecretBox;
  logger: Logger;
  /** The clock; tests move it. */
  now: () => number;
  /** The worker pool's view when this gateway runs the autoscaler (initializing, throttled, crash-looping workers). */
  pool?: { view: PoolView | null };
}

export type CancelResult = { ok: true; job: JobRecord } | { ok: false; reason: 'not-found' } | { ok: false; reason: 'wrong-state'; job: JobRecord };
export type RetryResult = CancelResult | { ok: false; reason: 'expired'; job: JobRecord };

/** How long an endpoint's settings are cached (another gateway's change shows within this). */
const ENDPOINT_CACHE_MS = 2_000;
/** How often the queue-overload check refreshes its count from the store. */
const QUEUE_COUNT_REFRESH_MS = 1_000;

/**
 * The client side of the job state machine (docs/states.md): submit, read, wait, cancel,
 * retry, purge, health. Every transition is one store call; after it the service publishes
 * the event that wakes the waiters concerned.
 */
export function createJobService(deps: JobServiceDeps) {
  const { store, notifier, waiters, config, now } = deps;
  const endpointCache = new Map<string, { endpoint: EndpointRecord | undefined; at: number }>();
  /** Per endpoint: the queue length last counted plus the submissions since that count began. */
  const queueCounts = new Map<string, { inQueue: number; since: number; at: number; refreshing: boolean }>();

  async function getEndpoint(id: string): Promise<EndpointRecord | undefined> {
    const hit = endpointCache.get(id);
    const t = now();
    if (hit && t - hit.at < ENDPOINT_CACHE_MS) return hit.endpoint;
    const endpoint = await store.getEndpoint(id);
    endpointCache.set(id, { endpoint, at: t });
    return endpoint;
  }

  /** 429 when the queue is overloaded: inQueue > 50 and inQueue > workersMax × factor (spec, Errors). */
  function checkQueueLoad(endpoint: EndpointRecord): void {
    const t = now();
    let entry = queueCounts.get(endpoint.id);
    if (!entry) queueCounts.set(endpoint.id, (entry = { inQueue: 0, since: 0, at: 0, refreshing: false }));
    if (t - entry.at >= QUEUE_COUNT_REFRESH_MS && !entry.refreshing) {
      const e = entry;
      e.refreshing = true;
      e.since = 0;
      // queueStats walks the queued and running jobs only (partial indexes), not the retained ones.
      store.queueStats({ endpointId: endpoint.id, now: t }).then(
        (counts) => Object.assign(e, { inQueue: counts.inQueue + e.since, at: now(), refreshing: false }),
        (err: unknown) => {
          e.refreshing = false;
          deps.logger.error({ err, endpointId: endpoint.id }, 'queue count failed');
        },
      );
    }
    const limit = Math.max(50, endpoint.workersMax * config.queueLimitFactor);
    if (entry.inQueue > limit) {
      throw new AppError(429, 'QUEUE_FULL', `Queue is full: ${entry.inQueue} jobs waiting on endpoint ${endpoint.id}`, undefined, { 'retry-after': '1' });
    }
    entry.inQueue++;
    entry.since++;
  }

  async function submit(endpoint: EndpointRecord, request: SubmitRequest, opts: { sync: boolean; keyId: string | null }): Promise<JobRecord> {
    checkQueueLoad(endpoint);
    const t = now();
    const retention = opts.sync ? config.syncRetentionMs : config.asyncRetentionMs;
    // Plain literals, no object rest/spread: V8 copies spread objects slowly, and this is the
    // hottest function of /run (it was 40% of its CPU with spreads).
    const job: JobRecord = {
      id: opts.sync ? `sync-${uuidv7(t)}` : uuidv7(t),
      endpointId: endpoint.id,
      status: 'IN_QUEUE',
      inputJson: request.inputJson,
      outputJson: null,
      error: null,
      webhook: request.webhook,
      s3Config: request.s3Config ? deps.secrets.seal(JSON.stringify(request.s3Config)) : null,
      executionTimeoutMs: request.executionTimeoutMs,
      lowPriority: request.lowPriority,
      ttlMs: request.ttlMs,
      retentionMs: Math.min(retention, request.ttlMs),
      maxAttempts: endpoint.maxAttempts,
      sync: opts.sync,
      keyId: opts.keyId,
      createdAt: t,
      queuedAt: t,
      startedAt: null,
      finishedAt: null,
      deadlineAt: t + request.ttlMs,
      expiresAt: null,
      workerId: null,
      attempts: 0,
      retries: 0,
      webhookAttempts: 0,
      webhookNextAt: null,
    };
    const row: NewJob = {
      id: job.id,
      endpointId: job.endpointId,
      inputJson: job.inputJson,
      webhook: job.webhook,
      s3Config: job.s3Config,
      executionTimeoutMs: job.executionTimeoutMs,
      lowPriority: job.lowPriority,
      ttlMs: job.ttlMs,
      retentionMs: job.retentionMs,
      maxAttempts: job.maxAttempts,
      sync: job.sync,
      keyId: job.keyId,
      now: t,
    };
    await store.insertJob(row);
    notifier.publish({ type: 'jobs-available', endpointId: endpoint.id });
    return job;
  }

  /** The job if it exists on this endpoint (a job of another endpoint is "not found"). */
  async function getJob(endpointId: string, id: string): Promise<JobRecord | undefined> {
    const job = await store.getJob(id);
    return job && job.endpointId === endpointId ? job : undefined;
  }

  /** Status read; `ttlMs` (status?ttl=) shortens the job's retention. */
  async function status(endpointId: string, id: string, ttlMs: number | null): Promise<JobRecord | undefined> {
    const job = await getJob(endpointId, id);
    if (job && ttlMs !== null) {
      await store.shortenRetention({ id, ttlMs });
      job.retentionMs = Math.min(job.retentionMs, ttlMs);
    }
    return job;
  }

  /** Waits until the job is terminal or `waitMs` passes; returns its latest state. */
  async function waitTerminal(endpointId: string, id: string, waitMs: number, signal?: AbortSignal): Promise<JobRecord | undefined> {
    const deadline = now() + waitMs;
    for (;;) {
      const job = await getJob(endpointId, id);
      if (!job || isTerminal(job.status)) return job;
      const left = deadline - now();
      if (left <= 0 || signal?.aborted) return job;
      // Re-read at least every second: a wake-up lost between gateways only delays.
      await waiters.wait(id, Math.min(left, 1_000), signal);
    }
  }

  async function cancel(endpointId: string, id: string): Promise<CancelResult> {
    const job = await getJob(endpointId, id);
    if (!job) return { ok: false, reason: 'not-found' };
    const cancelled = await store.cancelJob({ id, now: now() });
    if (!cancelled) {
      const current = (await getJob(endpointId, id)) ?? job;
      return { ok: false, reason: 'wrong-state', job: current };
    }
    if (job.status === 'IN_PROGRESS' && cancelled.workerId) {
      notifier.publish({ type: 'stop-jobs', workerId: cancelled.workerId, jobIds: [id] });
    }
    jobEnded(cancelled);
    return { ok: true, job: cancelled };
  }

  async function retry(endpointId: string, id: string): Promise<RetryResult> {
    const job = await getJob(endpointId, id);
    if (!job) return { ok: false, reason: 'not-found' };
    if (!isRetryable(job.status)) return { ok: false, reason: 'wrong-state', job };
    const retried = await store.retryJob({ id, now: now() });
    if (!retried) {
      const current = await getJob(endpointId, id);
      if (!current) return { ok: false, reason: 'not-found' };
      return isRetryable(current.status) ? { ok: false, reason: 'expired', job: current } : { ok: false, reason: 'wrong-state', job: current };
    }
    notifier.publish({ type: 'jobs-available', endpointId });
    notifier.publish({ type: 'job-updated', jobId: id });
    return { ok: true, job: retried };
  }

  async function purgeQueue(endpointId: string): Promise<number> {
    const ids = await store.purgeQueue({ endpointId, now: now() });
    for (const jobId of ids) notifier.publish({ type: 'job-updated', jobId });
    if (ids.length > 0) notifier.publish({ type: 'webhook-due' });
    return ids.length;
  }

  /** Stream poll: drains buffered chunks; when none, waits up to `waitMs` for one or the end. */
  async function readStream(endpointId: string, id: string, waitMs: number, signal?: AbortSignal): Promise<{ job: JobRecord; chunks: string[] } | undefined> {
    const deadline = now() + waitMs;
    for (;;) {
      // Status first, then drain: chunks are only appended while IN_PROGRESS, so once a
      // terminal status is read, this drain gets the last of them.
      const job = await getJob(endpointId, id);
      if (!job) return undefined;
      const chunks = await store.drainStream(id);
      const left = deadline - now();
      if (chunks.length > 0 || isTerminal(job.status) || left <= 0 || signal?.aborted) {
        return { job, chunks };
      }
      await waiters.wait(id, Math.min(left, 1_000), signal);
    }
  }

  async function health(endpointId: string): Promise<{ jobs: JobCounts; workers: Record<string, number> }> {
    const [jobs, workers] = await Promise.all([store.countJobs(endpointId), store.listWorkers(endpointId)]);
    const cutoff = now() - config.workerLostMs;
    const pool = deps.pool?.view?.health(endpointId);
    const polling = new Set<string>();
    let idle = 0;
    let running = 0;
    let unhealthy = 0;
    for (const worker of workers) {
      if (worker.lastSeenAt < cutoff) continue;
      polling.add(worker.id);
      if (!worker.healthy) {
        unhealthy++;
        continue;
      }
      const held = await store.jobsHeldBy(worker.id);
      if (held.length > 0) running++;
      else idle++;
    }
    // A pool worker counts as initializing until the store shows it polling.
    const initializing = pool ? pool.initializing.filter((id) => !polling.has(id)).length : 0;
    unhealthy += pool ? pool.unhealthy.filter((id) => !polling.has(id)).length : 0;
    return { jobs, workers: { idle, initializing, ready: idle + running, running, throttled: pool?.throttled ?? 0, unhealthy } };
  }

  /** After any transition into a terminal state: wake readers, queue the webhook. */
  function jobEnded(job: JobRecord): void {
    notifier.publish({ type: 'job-updated', jobId: job.id });
    if (job.webhook !== null) notifier.publish({ type: 'webhook-due' });
  }

  return {
    getEndpoint,
    invalidateEndpoint: (id: string) => endpointCache.delete(id),
    submit,
    getJob,
    status,
    waitTerminal,
    cancel,
    retry,
    purgeQueue,
    readStream,
    health,
    jobEnded,
    listRequests: (endpointId: string, limit: number) => store.listJobs({ endpointId, limit }),
  };
}

export type JobService = ReturnType<typeof createJobService>;
