import type { JobStatus } from '../jobs/states.js';
import type { JobCounts } from './store.js';

const FIELD: Record<JobStatus, keyof JobCounts> = {
  IN_QUEUE: 'inQueue',
  IN_PROGRESS: 'inProgress',
  COMPLETED: 'completed',
  FAILED: 'failed',
  CANCELLED: 'cancelled',
  TIMED_OUT: 'timedOut',
};

/**
 * Folds the rows of a backend's `GROUP BY status` count (n jobs, of which `retried` were
 * retried or requeued) into the JobCounts of /health. Shared by every backend.
 */
export function tallyJobCounts(rows: { status: JobStatus; n: number; retried: number }[]): JobCounts {
  const counts: JobCounts = { inQueue: 0, inProgress: 0, completed: 0, failed: 0, cancelled: 0, timedOut: 0, retried: 0 };
  for (const row of rows) {
    counts[FIELD[row.status]] += Number(row.n);
    counts.retried += Number(row.retried);
  }
  return counts;
}
