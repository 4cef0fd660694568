import type { JobRecord } from './records.js';

/**
 * A job's two durations, RunPod's `delayTime` and `executionTime`, computed here only: /status,
 * /requests, the console, the metrics and the per-minute charts all read them from these.
 *
 * The rule (docs/states.md, "Requeues"): `queuedAt` is when a client put the job in the queue,
 * by submitting it or by `/retry`, and nothing else moves it. A requeue after a lost worker, a
 * pool worker's exit or a hand-out that never reached its worker leaves it alone, so
 * `delayTime` is the whole wait before the run that is going on or that produced the result,
 * time spent on workers that never finished it included.
 */

/**
 * Milliseconds from entering the queue (submit or /retry) to the start of the current or last
 * run; null until a worker has it.
 *
 * @example delayTimeOf({ queuedAt: 1000, startedAt: 27000 }) === 26000
 */
export function delayTimeOf(job: Pick<JobRecord, 'queuedAt' | 'startedAt'>): number | null {
  return job.startedAt === null ? null : Math.max(0, job.startedAt - job.queuedAt);
}

/**
 * Milliseconds the run that ended the job took (from its hand-out to its end); null while it
 * runs or when it ended without one.
 *
 * @example executionTimeOf({ startedAt: 27000, finishedAt: 27500 }) === 500
 */
export function executionTimeOf(job: Pick<JobRecord, 'startedAt' | 'finishedAt'>): number | null {
  return job.startedAt === null || job.finishedAt === null ? null : Math.max(0, job.finishedAt - job.startedAt);
}
