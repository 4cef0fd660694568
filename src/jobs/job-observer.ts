import type { JobRecord, PurgedJob } from '../model/records.js';
import type { JobTransitions, WorkerWrite } from './transitions.js';

/**
 * Who wants to know what happened to jobs (the metrics feature, docs/metrics.md). Declared here
 * so the core never imports a feature: src/gateway.ts wires an implementation in with
 * {@link observeTransitions}. Every call comes after the transition was committed, on the
 * gateway that made it; an implementation must be cheap (it runs on the hot path) and must not
 * throw.
 */
export interface JobObserver {
  /** A new job entered the queue. */
  submitted(job: JobRecord): void;
  /** Jobs handed to a worker: their queue delay ends (`startedAt - queuedAt`). */
  started(jobs: readonly JobRecord[]): void;
  /** A job reached a terminal state (COMPLETED, FAILED, CANCELLED, TIMED_OUT). */
  ended(job: JobRecord): void;
  /** Queued jobs of an endpoint cancelled by purge-queue: one call a batch (the store's, at most PURGE_BATCH jobs). */
  purged(endpointId: string, jobs: readonly PurgedJob[]): void;
  /** Jobs back in the queue: a client's retry, or their worker was lost. */
  requeued(jobs: readonly JobRecord[], why: 'retry' | 'worker-lost'): void;
  /** Jobs taken back from a worker the allocator stopped for a higher priority (requeued, no attempt counted). */
  preempted?(jobs: readonly JobRecord[]): void;
}

/**
 * What tracing adds to a submission (the tracing feature, docs/observability.md). Declared here
 * for the same reason as JobObserver. `begin` runs after the job's record is made and before it
 * is written: it starts the submit span (a child of `parent`, the client's `traceparent`
 * header, when valid) and sets `job.traceparent` to it, so the context is written with the job;
 * the returned end is called once the write settled. Without a tracer nothing of this runs.
 */
export interface SubmitTracer {
  begin(job: JobRecord, parent: string | undefined): SubmitSpan;
}

/** The end of a submit span: the job was written (`replayed`: an Idempotency-Key found an earlier one instead), or the write failed. */
export interface SubmitSpan {
  end(outcome: 'stored' | 'replayed' | { error: unknown }): void;
}

/**
 * The transitions, each reported to `observer` once it is committed. Wraps rather than edits
 * JobTransitions so that a gateway without an observer runs the transitions untouched.
 *
 * @example const transitions = observeTransitions(createJobTransitions(deps), metrics.jobs);
 */
export function observeTransitions(inner: JobTransitions, observer: JobObserver): JobTransitions {
  return {
    submit: (job, inputJson) => inner.submit(job, inputJson).then(() => observer.submitted(job)),
    submitOnce: (job, inputJson, key) =>
      inner.submitOnce(job, inputJson, key).then((outcome) => {
        if (outcome.created) observer.submitted(job);
        return outcome;
      }),
    claim: (endpointId, takers) =>
      inner.claim(endpointId, takers).then((perTaker) => {
        for (const jobs of perTaker) if (jobs.length > 0) observer.started(jobs);
        return perTaker;
      }),
    returnUntaken: (endpointId, workerId, ids) => inner.returnUntaken(endpointId, workerId, ids),
    returnLost: (endpointId, workerId, ids) =>
      inner.returnLost(endpointId, workerId, ids).then((lost) => {
        endedAll(observer, lost.failed);
        if (lost.requeued.length > 0) observer.requeued(lost.requeued, 'worker-lost');
        return lost;
      }),
    finish: (write: Parameters<JobTransitions['finish']>[0]) => inner.finish(write).then((job) => ended(observer, job)),
    progress: (write: WorkerWrite & { outputJson: string }) => inner.progress(write),
    appendStream: (write: Parameters<JobTransitions['appendStream']>[0]) => inner.appendStream(write),
    cancel: (id) => inner.cancel(id).then((job) => ended(observer, job)),
    redeliverWebhook: (id) => inner.redeliverWebhook(id),
    retry: (id) =>
      inner.retry(id).then((job) => {
        if (job) observer.requeued([job], 'retry');
        return job;
      }),
    purge: (endpointId, onBatch) =>
      inner.purge(endpointId, (jobs) => {
        observer.purged(endpointId, jobs);
        onBatch?.(jobs);
      }),
    timeOutRunning: (limit) => inner.timeOutRunning(limit).then((jobs) => endedAll(observer, jobs)),
    expireQueued: (limit) => inner.expireQueued(limit).then((jobs) => endedAll(observer, jobs)),
    releaseWorkers: (workerIds) =>
      inner.releaseWorkers(workerIds).then((released) => {
        endedAll(observer, released.failed);
        if (released.requeued.length > 0) observer.requeued(released.requeued, 'worker-lost');
        return released;
      }),
    // Not a requeue (neither a retry nor a lost worker): counted as a preemption, and the job shows it in `preemptions`.
    preempt: (workerId) =>
      inner.preempt(workerId).then((jobs) => {
        if (jobs.length > 0) observer.preempted?.(jobs);
        return jobs;
      }),
    deleteExpired: (limit) => inner.deleteExpired(limit),
    shortenRetention: (id, ttlMs) => inner.shortenRetention(id, ttlMs),
  };
}

function ended(observer: JobObserver, job: JobRecord | undefined): JobRecord | undefined {
  if (job) observer.ended(job);
  return job;
}

function endedAll(observer: JobObserver, jobs: JobRecord[]): JobRecord[] {
  for (const job of jobs) observer.ended(job);
  return jobs;
}

/**
 * One observer that tells `first`, then `second` (when there is one).
 *
 * @example const observer = joinJobObservers(holders.observer, options.observers?.jobs);
 */
export function joinJobObservers(first: JobObserver, second: JobObserver | undefined): JobObserver {
  if (!second) return first;
  return {
    submitted: (job) => (first.submitted(job), second.submitted(job)),
    started: (jobs) => (first.started(jobs), second.started(jobs)),
    ended: (job) => (first.ended(job), second.ended(job)),
    purged: (endpointId, jobs) => (first.purged(endpointId, jobs), second.purged(endpointId, jobs)),
    requeued: (jobs, why) => (first.requeued(jobs, why), second.requeued(jobs, why)),
    preempted: (jobs) => (first.preempted?.(jobs), second.preempted?.(jobs)),
  };
}
