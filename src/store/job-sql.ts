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
 * retry; the queue deadline restored to `queued_at + ttl_ms`. `counted` is an SQL boolean
 * expression: true keeps the hand-out in `attempts`, false takes it back; `preempted` (an SQL
 * boolean too) adds one to `preemptions` (the allocator took the worker away).
 *
 * @example `UPDATE jobs SET ${requeuedColumns('$3', '$6')} WHERE worker_id = $1`
 */
export function requeuedColumns(counted: string, preempted: string): string {
  return `status = 'IN_QUEUE', worker_id = NULL, started_at = NULL, output_json = NULL,
  deadline_at = queued_at + ttl_ms, attempts = CASE WHEN ${counted} THEN attempts ELSE attempts - 1 END,
  preemptions = CASE WHEN ${preempted} THEN preemptions + 1 ELSE preemptions END`;
}
