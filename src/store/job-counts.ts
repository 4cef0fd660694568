import type { JobStatus } from '../model/job-states.js';
import type { JobCounts, QueueByKey, QueueStats } from '../model/records.js';

const FIELD: Record<JobStatus, keyof JobCounts> = {
  IN_QUEUE: 'inQueue',
  IN_PROGRESS: 'inProgress',
  COMPLETED: 'completed',
  FAILED: 'failed',
  CANCELLED: 'cancelled',
  TIMED_OUT: 'timedOut',
};

/** A row of a backend's `GROUP BY status` count: n jobs, `retried` of them retried by a client, `reattempted` handed out more than once. */
export interface CountRow {
  status: JobStatus;
  n: number;
  retried: number;
  reattempted: number;
}

/** Folds the rows of a backend's `GROUP BY status` count into the JobCounts of /health. Shared by every backend. */
export function tallyJobCounts(rows: CountRow[]): JobCounts {
  const counts: JobCounts = { inQueue: 0, inProgress: 0, completed: 0, failed: 0, cancelled: 0, timedOut: 0, retried: 0, reattempted: 0 };
  for (const row of rows) {
    counts[FIELD[row.status]] += Number(row.n);
    counts.retried += Number(row.retried);
    counts.reattempted += Number(row.reattempted);
  }
  return counts;
}

/** The row of a backend's count of one endpoint's claimable queued jobs (see queueStats). */
export interface QueuedRow {
  n: number;
  normal: number;
  bytes: number | string | null;
  oldest: number | null;
}

/** A row of a backend's per-key count of one endpoint's queued jobs, with the totals over all keys (see queueByKey). */
export interface KeyQueuedRow {
  key: string;
  n: number | string;
  bytes: number | string | null;
  total_n: number | string;
  total_bytes: number | string | null;
}

/** Folds a backend's per-key queue rows into QueueByKey (no row: nothing queued). Shared by every backend. */
export function toQueueByKey(rows: KeyQueuedRow[]): QueueByKey {
  const first = rows[0];
  return {
    jobs: Number(first?.total_n ?? 0),
    bytes: Number(first?.total_bytes ?? 0),
    keys: rows.map((row) => ({ keyId: row.key, jobs: Number(row.n), bytes: Number(row.bytes ?? 0) })),
  };
}

/** A row of a backend's `GROUP BY worker_id` count of one endpoint's IN_PROGRESS jobs, with the latest start among them. */
export interface HeldRow {
  worker_id: string | null;
  n: number;
  since: number | string | null;
}

/**
 * Folds a backend's two queueStats queries into the QueueStats of the autoscaler: the queued
 * counts as they are (no row: none queued), the running jobs summed and, for those with a
 * holder, counted per worker. Shared by every backend.
 */
export function toQueueStats(queued: QueuedRow | undefined, held: HeldRow[]): QueueStats {
  const heldBy = new Map<string, number>();
  const heldSince = new Map<string, number>();
  let inProgress = 0;
  for (const row of held) {
    const n = Number(row.n);
    inProgress += n;
    if (row.worker_id === null) continue;
    heldBy.set(row.worker_id, n);
    if (row.since !== null) heldSince.set(row.worker_id, Number(row.since));
  }
  return {
    inQueue: Number(queued?.n ?? 0),
    inQueueBytes: Number(queued?.bytes ?? 0),
    inQueueNormal: Number(queued?.normal ?? 0),
    oldestNormalQueuedAt: queued?.oldest ?? null,
    inProgress,
    heldBy,
    heldSince,
  };
}
