import { isRetryable, JOB_STATUSES, TERMINAL_STATUSES, type JobStatus } from '../model/job-states.js';

/**
 * SQL fragments of the job state machine that both backends' queries share, built from
 * src/model/job-states.ts so a state added there reaches every query. The status names are
 * constants of this code, never input: quoting them inline is safe, and a partial index
 * predicate written the same way (`status = 'IN_QUEUE'`) still matches.
 */

/** `('A', 'B')`: an SQL list of status literals for `status IN …`. */
function statusList(statuses: readonly JobStatus[]): string {
  return `(${statuses.map((status) => `'${status}'`).join(', ')})`;
}

/** `('COMPLETED', 'FAILED', 'CANCELLED', 'TIMED_OUT')`: the terminal states. */
export const TERMINAL_STATUS_LIST = statusList(TERMINAL_STATUSES);

/** `('IN_QUEUE', 'IN_PROGRESS')`: the live states, those a cancel may end. */
export const LIVE_STATUS_LIST = statusList(JOB_STATUSES.filter((status) => !TERMINAL_STATUSES.includes(status)));

/** `('FAILED', 'TIMED_OUT')`: the states a retry may requeue. */
export const RETRYABLE_STATUS_LIST = statusList(JOB_STATUSES.filter(isRetryable));

/**
 * The columns a job gets when it reaches a terminal state, `now` being the parameter (or
 * column) that holds the time: finished now, expiring after its retention, no deadline, and
 * its webhook due at once when it has one.
 *
 * @example `UPDATE jobs SET status = 'CANCELLED', ${finishedColumns('$2')} WHERE id = $1`
 */
export function finishedColumns(now: string): string {
  return `finished_at = ${now}, expires_at = ${now} + retention_ms, deadline_at = NULL,
  webhook_next_at = CASE WHEN webhook IS NOT NULL THEN ${now} ELSE NULL END`;
}

/**
 * The columns of a requeued job (store.requeueJobs), the one place they are written for every
 * backend and every cause: back to IN_QUEUE without a worker, its run's start and progress
 * output; `queued_at` untouched, so delayTime and queue order count from the submit or the last
 * retry; the queue deadline restored to `queued_at + ttl_ms`; the stream's byte count and cut
 * reset (the caller deletes the abandoned run's chunks in the same write). `counted` is an SQL
 * boolean expression: true keeps the hand-out in `attempts`, false takes it back; `preempted`
 * (an SQL boolean too) adds one to `preemptions` (the allocator took the worker away).
 *
 * @example `UPDATE jobs SET ${requeuedColumns('$3', '$6')} WHERE worker_id = $1`
 */
export function requeuedColumns(counted: string, preempted: string): string {
  return `status = 'IN_QUEUE', worker_id = NULL, started_at = NULL, output_json = NULL,
  deadline_at = queued_at + ttl_ms, attempts = CASE WHEN ${counted} THEN attempts ELSE attempts - 1 END,
  preemptions = CASE WHEN ${preempted} THEN preemptions + 1 ELSE preemptions END,
  stream_bytes = 0, stream_cut = 0`;
}

/**
 * A queued job's place in its endpoint's queue (`fair_at`, docs/scaling.md "Dispatch order"),
 * for a job of endpoint `endpoint` and key `key` (SQL expressions) queued at `queuedAt`: one
 * past the key's newest queued job; for a key with nothing queued, its `queuedAt`, or the
 * queue's head (the smallest place queued: the job goes in right behind it) when that is
 * earlier. Claims take the smallest place first (ties in insertion order), so each key's jobs
 * keep their order, keys take turns (a key with 10,000 queued takes one place in each round),
 * and an endpoint used by one key stays FIFO. Both lookups are one seek of a partial index
 * (jobs_fair, jobs_claim). `jobs` is aliased `q` here, so `endpoint`/`key` may name the outer row.
 * @example `INSERT INTO jobs (…, fair_at) VALUES (…, ${fairPlace('sqlite', '?', '?', '?')})`
 */
export function fairPlace(dialect: 'sqlite' | 'postgres', endpoint: string, key: string, queuedAt: string): string {
  const least = dialect === 'sqlite' ? 'MIN' : 'LEAST';
  return `COALESCE(
    (SELECT MAX(q.fair_at) + 1 FROM jobs q WHERE q.endpoint_id = ${endpoint} AND COALESCE(q.key_id, '') = COALESCE(${key}, '') AND q.status = 'IN_QUEUE'),
    ${least}(COALESCE((SELECT MIN(q.fair_at) FROM jobs q WHERE q.endpoint_id = ${endpoint} AND q.status = 'IN_QUEUE'), ${queuedAt}), ${queuedAt}))`;
}
