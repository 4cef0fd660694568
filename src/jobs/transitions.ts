import type { Logger } from 'pino';
import type { Notifier } from '../model/events.js';
import { withoutNul, type JsonTextOrBytes } from '../model/json.js';
import type { JobRecord, JobWithInput, PurgedJob, Taker } from '../model/records.js';
import type { IdempotentJob, JobStore, UsageStore, WorkerStore } from '../store/store.js';
import type { IdempotencyKey } from './idempotency.js';
import type { MeterOf } from './job-meters.js';

/** Jobs a purge cancels per store call: the most it holds in memory (ids and trace contexts), and one statement's size. */
const PURGE_BATCH = 1_000;
/** The error of a job that ran out of hand-outs because its worker never had it or forgot it. */
const LOST_HAND_OUT_ERROR =
  'job was handed to a worker {attempts} time(s) (its maxAttempts) and never finished: the worker lost it or its result was refused';

/** What a new job is made from: the validated request, the endpoint's limits and the clock. */
export type NewJobArgs = Pick<
  JobRecord,
  'id' | 'endpointId' | 'webhook' | 's3Config' | 'executionTimeoutMs' | 'lowPriority' | 'ttlMs' | 'retentionMs' | 'maxAttempts' | 'sync' | 'keyId' | 'inputBytes'
> & { now: number };

/**
 * A job's initial state, the one place it is written (docs/states.md): IN_QUEUE since `now`,
 * its queue deadline `now + ttlMs`, never taken, no output. The store writes it as given, and
 * its input (`inputBytes` of it, measured by the caller) beside it: the record holds no input.
 *
 * @example initialJob({ ...args, now: 1000, ttlMs: 60000 }).deadlineAt === 61000
 */
export function initialJob(a: NewJobArgs): JobRecord {
  // Plain literal, no object spread: this runs for every submitted job (V8 copies spreads slowly).
  return {
    id: a.id,
    endpointId: a.endpointId,
    status: 'IN_QUEUE',
    outputJson: null,
    error: null,
    webhook: a.webhook,
    s3Config: a.s3Config,
    executionTimeoutMs: a.executionTimeoutMs,
    lowPriority: a.lowPriority,
    ttlMs: a.ttlMs,
    retentionMs: a.retentionMs,
    maxAttempts: a.maxAttempts,
    sync: a.sync,
    keyId: a.keyId,
    createdAt: a.now,
    queuedAt: a.now,
    startedAt: null,
    finishedAt: null,
    deadlineAt: a.now + a.ttlMs,
    expiresAt: null,
    workerId: null,
    attempts: 0,
    retries: 0,
    webhookAttempts: 0,
    webhookNextAt: null,
    inputBytes: a.inputBytes,
    preemptions: 0,
    // Set by the tracing feature's SubmitTracer before the job is written (job-observer.ts).
    traceparent: null,
  };
}

/** What the transitions need: the job table (plus deleting lost workers' rows and job meters), events and the clock. */
export interface TransitionDeps {
  store: JobStore & Pick<WorkerStore, 'deleteWorkers'> & Pick<UsageStore, 'recordJobMeter'>;
  notifier: Pick<Notifier, 'publish'>;
  /** The meter of a job run that ended (job-meters.ts), or null when it never ran. */
  meterOf: MeterOf;
  logger: Logger;
  now(): number;
}

/** A worker's result or progress for a job it holds. */
export interface WorkerWrite {
  id: string;
  workerId: string;
  /** The job must belong to this endpoint (the worker's key may be limited to it). */
  endpointId: string;
}

/**
 * Every change of a job's state (docs/states.md), each one store call followed by the events
 * that wake whoever waits for it: long-polls of the job, job-take waiters of its endpoint, the
 * worker that must stop it, the webhook sender. The job service, the worker protocol, the
 * reaper and the worker pool change jobs only through here.
 */
export interface JobTransitions {
  /** A new job (see initialJob) with its input (JSON text) → IN_QUEUE. */
  submit(job: JobRecord, inputJson: JsonTextOrBytes): Promise<void>;
  /** submit under an idempotency key, unless a job already holds it: then nothing changes and that job is returned. */
  submitOnce(job: JobRecord, inputJson: JsonTextOrBytes, key: IdempotencyKey): Promise<{ created: true } | { created: false; existing: IdempotentJob }>;
  /**
   * Queued jobs of the endpoint → IN_PROGRESS for several waiting takers in one store call:
   * each taker gets up to its `limit`, in queue order, the first taker first. Returns each
   * taker's jobs (with their inputs), by the takers' positions.
   */
  claim(endpointId: string, takers: readonly Taker[]): Promise<JobWithInput[][]>;
  /**
   * Jobs claimed for a worker that never received them → back in the queue, the hand-out
   * uncounted (store.requeueJobs: delayTime still counts from the submit). Returns the ids requeued.
   */
  returnUntaken(endpointId: string, workerId: string, ids: string[]): Promise<string[]>;
  /**
   * Jobs handed out to a worker that says it does not hold them (lost on the way, or forgotten
   * after a refused result): the hand-out counts as an attempt; back in the queue, or FAILED once
   * the job has had maxAttempts hand-outs. Returns the jobs requeued and the jobs failed.
   */
  returnLost(endpointId: string, workerId: string, ids: string[]): Promise<{ requeued: JobRecord[]; failed: JobRecord[] }>;
  /** IN_PROGRESS under the worker → COMPLETED or FAILED; undefined when it does not hold the job. */
  finish(write: WorkerWrite & { status: 'COMPLETED' | 'FAILED'; outputJson: string | null; error: string | null }): Promise<JobRecord | undefined>;
  /** The latest progress output of a job the worker holds; false when it does not hold it. */
  progress(write: WorkerWrite & { outputJson: string }): Promise<boolean>;
  /**
   * Appends stream chunks (`bytes` in all) to a job the worker holds, under the job's cap of
   * `maxBytes` undelivered bytes (store.appendStream: 'appended', 'not-held', or 'full', which
   * cuts the run's stream). Readers are woken unless nothing changed.
   */
  appendStream(write: WorkerWrite & { chunks: string[]; bytes: number; maxBytes: number }): Promise<'appended' | 'not-held' | 'full'>;
  /** IN_QUEUE or IN_PROGRESS → CANCELLED (its worker is told to stop); undefined when not live. */
  cancel(id: string): Promise<JobRecord | undefined>;
  /** FAILED or TIMED_OUT, not expired → IN_QUEUE again with the same id; undefined otherwise. */
  retry(id: string): Promise<JobRecord | undefined>;
  /**
   * Every job queued when the purge began → CANCELLED, in batches of at most PURGE_BATCH (the
   * memory it holds is one batch, however long the queue); `onBatch` is handed each batch once
   * committed. Returns how many were cancelled.
   */
  purge(endpointId: string, onBatch?: (jobs: readonly PurgedJob[]) => void): Promise<number>;
  /** Running jobs past their execution timeout → TIMED_OUT (their workers are told to stop). */
  timeOutRunning(limit: number): Promise<JobRecord[]>;
  /** Queued jobs past their ttl → TIMED_OUT. */
  expireQueued(limit: number): Promise<JobRecord[]>;
  /** The jobs of workers that are gone (lost, or pool workers that exited) → requeued, or FAILED past maxAttempts ('worker lost'); the workers' rows are deleted. */
  releaseWorkers(workerIds: string[]): Promise<{ requeued: JobRecord[]; failed: JobRecord[] }>;
  /**
   * The jobs of a worker the allocator stops for a higher-priority endpoint (docs/scaling.md,
   * preemption) → back in the queue, the hand-out uncounted and `preemptions` + 1; the worker
   * is told to stop them (job-stop). Returns the jobs requeued.
   */
  preempt(workerId: string): Promise<JobRecord[]>;
  /** A finished job's webhook, delivered or given up → due again (store.redeliverWebhook); false when it is live, has none, or a delivery is pending. */
  redeliverWebhook(id: string): Promise<boolean>;
  /** Deletes up to `limit` jobs whose retention ended; returns how many. */
  deleteExpired(limit: number): Promise<number>;
  /** Shortens a job's retention (status?ttl=). */
  shortenRetention(id: string, ttlMs: number): Promise<void>;
}

/** @example const transitions = createJobTransitions({ store, notifier, meterOf: async () => null, logger, now: Date.now }); */
export function createJobTransitions(deps: TransitionDeps): JobTransitions {
  return new Transitions(deps);
}

class Transitions implements JobTransitions {
  constructor(private readonly deps: TransitionDeps) {}

  async submit(job: JobRecord, inputJson: JsonTextOrBytes): Promise<void> {
    await this.deps.store.insertJob({ job, inputJson });
    this.deps.notifier.publish({ type: 'jobs-available', endpointId: job.endpointId });
  }

  async submitOnce(job: JobRecord, inputJson: JsonTextOrBytes, key: IdempotencyKey): Promise<{ created: true } | { created: false; existing: IdempotentJob }> {
    const outcome = await this.deps.store.insertJobOnce({ job, inputJson, ...key });
    if (outcome.created) this.deps.notifier.publish({ type: 'jobs-available', endpointId: job.endpointId });
    return outcome;
  }

  async claim(endpointId: string, takers: readonly Taker[]): Promise<JobWithInput[][]> {
    const claimed = await this.deps.store.claimJobsFor({ endpointId, takers, now: this.deps.now() });
    // The store hands out in taker order: the first takers[0].limit jobs are takers[0]'s, and so on.
    let at = 0;
    return takers.map((t) => {
      const mine = claimed.slice(at, at + t.limit);
      at += mine.length;
      return mine;
    });
  }

  async returnUntaken(_endpointId: string, workerId: string, ids: string[]): Promise<string[]> {
    const { requeued } = await this.requeue({ workerIds: [workerId], ids, counted: false, error: '' });
    return requeued.map((job) => job.id);
  }

  returnLost(_endpointId: string, workerId: string, ids: string[]): Promise<{ requeued: JobRecord[]; failed: JobRecord[] }> {
    return this.requeue({ workerIds: [workerId], ids, counted: true, error: LOST_HAND_OUT_ERROR });
  }

  async finish(write: WorkerWrite & { status: 'COMPLETED' | 'FAILED'; outputJson: string | null; error: string | null }): Promise<JobRecord | undefined> {
    const { id, workerId, endpointId, status, outputJson } = write;
    const error = write.error === null ? null : withoutNul(write.error);
    const finished = await this.deps.store.finishJob({ id, workerId, endpointId, status, outputJson, error, now: this.deps.now() });
    if (!finished) return undefined;
    await this.meter([finished]);
    this.ended(finished);
    return finished;
  }

  async progress(write: WorkerWrite & { outputJson: string }): Promise<boolean> {
    const applied = await this.deps.store.setProgress(write);
    if (applied) this.deps.notifier.publish({ type: 'job-updated', jobId: write.id });
    return applied;
  }

  async appendStream(write: WorkerWrite & { chunks: string[]; bytes: number; maxBytes: number }): Promise<'appended' | 'not-held' | 'full'> {
    const outcome = await this.deps.store.appendStream(write);
    // 'full' may have written the marker that tells readers the stream was cut: wake them too.
    if (outcome !== 'not-held') this.deps.notifier.publish({ type: 'job-updated', jobId: write.id });
    return outcome;
  }

  async cancel(id: string): Promise<JobRecord | undefined> {
    const cancelled = await this.deps.store.cancelJob({ id, now: this.deps.now() });
    if (cancelled) await this.meter([cancelled]);
    // Only a running job keeps a worker id (a requeue or retry clears it): that worker stops.
    if (cancelled) this.ended(cancelled, { stopWorker: true });
    return cancelled;
  }

  async retry(id: string): Promise<JobRecord | undefined> {
    const retried = await this.deps.store.retryJob({ id, now: this.deps.now() });
    if (retried) this.requeued([retried]);
    return retried;
  }

  async purge(endpointId: string, onBatch?: (jobs: readonly PurgedJob[]) => void): Promise<number> {
    const now = this.deps.now();
    let count = 0;
    for (;;) {
      const jobs = await this.deps.store.purgeQueue({ endpointId, now, limit: PURGE_BATCH });
      if (jobs.length === 0) break;
      count += jobs.length;
      for (const job of jobs) this.deps.notifier.publish({ type: 'job-updated', jobId: job.id });
      onBatch?.(jobs);
    }
    if (count > 0) this.deps.notifier.publish({ type: 'webhook-due' });
    return count;
  }

  async timeOutRunning(limit: number): Promise<JobRecord[]> {
    const jobs = await this.deps.store.timeOutRunning({ now: this.deps.now(), limit });
    await this.meter(jobs);
    for (const job of jobs) this.ended(job, { stopWorker: true });
    return jobs;
  }

  async expireQueued(limit: number): Promise<JobRecord[]> {
    const jobs = await this.deps.store.expireQueued({ now: this.deps.now(), limit });
    for (const job of jobs) this.ended(job);
    return jobs;
  }

  async releaseWorkers(workerIds: string[]): Promise<{ requeued: JobRecord[]; failed: JobRecord[] }> {
    const released = await this.requeue({ workerIds, counted: true, error: 'worker lost' });
    await this.deps.store.deleteWorkers(workerIds);
    return released;
  }

  async preempt(workerId: string): Promise<JobRecord[]> {
    const { requeued } = await this.requeue({ workerIds: [workerId], counted: false, preempted: true, error: '' });
    if (requeued.length > 0) this.deps.notifier.publish({ type: 'stop-jobs', workerId, jobIds: requeued.map((j) => j.id) });
    return requeued;
  }

  /**
   * Every requeue goes through here and store.requeueJobs (docs/states.md, "Requeues"): one rule
   * for the columns, the attempt count and the failure at maxAttempts, whatever the cause.
   */
  private async requeue(args: { workerIds: string[]; ids?: string[]; counted: boolean; preempted?: boolean; error: string }): Promise<{ requeued: JobRecord[]; failed: JobRecord[] }> {
    if (args.workerIds.length === 0 || args.ids?.length === 0) return { requeued: [], failed: [] };
    const result = await this.deps.store.requeueJobs({ ...args, now: this.deps.now() });
    await this.meter(result.failed);
    for (const job of result.failed) this.ended(job);
    this.requeued(result.requeued);
    return result;
  }

  async redeliverWebhook(id: string): Promise<boolean> {
    const due = await this.deps.store.redeliverWebhook({ id, now: this.deps.now() });
    if (due) this.deps.notifier.publish({ type: 'webhook-due' });
    return due;
  }

  deleteExpired(limit: number): Promise<number> {
    return this.deps.store.deleteExpired({ now: this.deps.now(), limit });
  }

  shortenRetention(id: string, ttlMs: number): Promise<void> {
    return this.deps.store.shortenRetention({ id, ttlMs });
  }

  /** Jobs back in the queue: take waiters of their endpoints try again; their readers see IN_QUEUE. */
  private requeued(jobs: JobRecord[]): void {
    for (const endpointId of new Set(jobs.map((j) => j.endpointId))) this.deps.notifier.publish({ type: 'jobs-available', endpointId });
    for (const job of jobs) this.deps.notifier.publish({ type: 'job-updated', jobId: job.id });
  }

  /** After any transition into a terminal state: tell its worker to stop (when asked), wake readers, queue the webhook. */
  private ended(job: JobRecord, options?: { stopWorker: boolean }): void {
    if (options?.stopWorker && job.workerId !== null) this.deps.notifier.publish({ type: 'stop-jobs', workerId: job.workerId, jobIds: [job.id] });
    this.deps.notifier.publish({ type: 'job-updated', jobId: job.id });
    if (job.webhook !== null) this.deps.notifier.publish({ type: 'webhook-due' });
  }

  /**
   * Meters the runs that just ended (job-meters.ts): each written once per run, whichever
   * gateway ended it. A failed write is logged, never fails the transition.
   */
  private async meter(jobs: readonly JobRecord[]): Promise<void> {
    for (const job of jobs) {
      try {
        const meter = await this.deps.meterOf(job);
        if (meter) await this.deps.store.recordJobMeter(meter);
      } catch (err) {
        this.deps.logger.error({ err, jobId: job.id, endpointId: job.endpointId }, 'job meter write failed');
      }
    }
  }
}
