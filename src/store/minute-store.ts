/**
 * Per-minute aggregates of an endpoint's jobs, for the console's charts (docs/console.md):
 * counts, the deepest queue seen, and histograms of queue delay and execution time in the
 * fixed buckets of {@link MINUTE_BUCKETS_MS}, so percentiles of any span are read by adding
 * buckets. Writes are additive (several gateways add to the same minute). Rows are kept for
 * GANTRY_MINUTES_KEEP_DAYS and deleted with their endpoint.
 */
export interface MinuteStore {
  /** Adds each delta to its (endpoint, minute) row; queueDepth keeps the larger value. */
  addMinutes(deltas: readonly MinuteDelta[]): Promise<void>;
  /** The rows of an endpoint with from <= minute < to, oldest first. */
  readMinutes(args: { endpointId: string; from: number; to: number }): Promise<MinuteDelta[]>;
  /**
   * Deletes up to `limit` rows with minute < `before`, oldest first, with their buckets (the
   * reaper's retention, GANTRY_MINUTES_KEEP_DAYS). Returns how many rows were deleted.
   */
  deleteMinutesBefore(args: { before: number; limit: number }): Promise<number>;
}

/** One endpoint's minute: what happened in it (a delta when written, the sum when read). */
export interface MinuteDelta {
  endpointId: string;
  /** Epoch ms of the minute's start (a multiple of 60,000). */
  minute: number;
  submitted: number;
  completed: number;
  /** FAILED, TIMED_OUT and CANCELLED. */
  failed: number;
  /** The deepest queue seen in the minute. */
  queueDepth: number;
  /** Counts per bucket of MINUTE_BUCKETS_MS (length MINUTE_BUCKETS_MS.length + 1: the last is "more"). */
  delay: number[];
  execution: number[];
}

/** Upper bounds (ms) of the histogram buckets; one more bucket holds everything above. */
export const MINUTE_BUCKETS_MS: readonly number[] = [5, 10, 25, 50, 100, 250, 500, 1_000, 2_500, 5_000, 10_000, 30_000, 60_000, 120_000, 300_000, 600_000];

/** Histogram kinds as stored in job_minute_buckets.kind. */
export const BUCKET_KINDS = { delay: 0, execution: 1 } as const;

/** An empty histogram. */
export const emptyBuckets = (): number[] => new Array<number>(MINUTE_BUCKETS_MS.length + 1).fill(0);
