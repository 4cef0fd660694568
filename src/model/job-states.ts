/**
 * Job states (docs/states.md, with the diagram). The first two are live; the other four are terminal.
 * See docs/states.md for the diagram.
 */
export const JOB_STATUSES = ['IN_QUEUE', 'IN_PROGRESS', 'COMPLETED', 'FAILED', 'CANCELLED', 'TIMED_OUT'] as const;
/** One of JOB_STATUSES. */
export type JobStatus = (typeof JOB_STATUSES)[number];

export const TERMINAL_STATUSES: readonly JobStatus[] = ['COMPLETED', 'FAILED', 'CANCELLED', 'TIMED_OUT'];

/** True for COMPLETED, FAILED, CANCELLED and TIMED_OUT: nothing moves a job out of these but retry. */
export function isTerminal(status: JobStatus): boolean {
  return status !== 'IN_QUEUE' && status !== 'IN_PROGRESS';
}

/** Only failed and timed-out jobs may be retried (spec: "Requeues a job in FAILED or TIMED_OUT"). */
export function isRetryable(status: JobStatus): boolean {
  return status === 'FAILED' || status === 'TIMED_OUT';
}
