import type { ColdStartKind, ColdStartStats, ColdStartSummary } from '../jobs/pool-view.js';

/**
 * The cold starts of one endpoint's pool (docs/scaling.md, "Cold starts"): a worker started
 * while a job of the endpoint waited in the queue, timed from the start request (the pool's
 * decision to start it, or to resume it from the warm pool) to its first job-take. Kept as
 * plain numbers: a count and histogram buckets per kind since the pool was made (for
 * /metrics), and the last WINDOW durations per kind (for p70/p90/p98, as RunPod's console
 * shows them). Bounded: 2 × WINDOW numbers and 2 × (bounds + 1) bucket counts, whatever the
 * traffic.
 */

/** Durations kept per kind for the quantiles. */
export const WINDOW = 256;
/** Histogram bounds in seconds: a resume (tens of ms) to a large image's pull and load (minutes). */
export const COLD_START_BOUNDS = [0.05, 0.1, 0.25, 0.5, 1, 2, 5, 10, 20, 30, 60, 120, 300, 600];
export const COLD_START_KINDS: readonly ColdStartKind[] = ['start', 'resume'];

/** Histogram buckets as plain numbers; the same shape as the metrics feature's `Buckets`. */
export interface ColdStartBuckets {
  readonly counts: Float64Array;
  sum: number;
  count: number;
}

class KindRecord {
  count = 0;
  readonly buckets: ColdStartBuckets = { counts: new Float64Array(COLD_START_BOUNDS.length + 1), sum: 0, count: 0 };
  /** A ring of the last WINDOW durations (ms); `next` is where the next one goes. */
  private readonly ring = new Float64Array(WINDOW);
  private next = 0;
  last: number | null = null;

  add(ms: number): void {
    this.count++;
    this.last = ms;
    this.ring[this.next % WINDOW] = ms;
    this.next++;
    const seconds = ms / 1000;
    let i = 0;
    while (i < COLD_START_BOUNDS.length && seconds > COLD_START_BOUNDS[i]!) i++;
    this.buckets.counts[i]! += 1;
    this.buckets.sum += seconds;
    this.buckets.count += 1;
  }

  window(): number[] {
    return Array.from(this.ring.subarray(0, Math.min(this.next, WINDOW)));
  }
}

/**
 * The nearest-rank quantile `q` (0–1) of `sorted` (ascending); null when empty.
 *
 * @example quantile([10, 20, 30, 40], 0.7) // 30
 */
export function quantile(sorted: readonly number[], q: number): number | null {
  if (sorted.length === 0) return null;
  return sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil(q * sorted.length) - 1))]!;
}

function summarize(values: number[], count: number, last: number | null): ColdStartSummary {
  const sorted = values.sort((a, b) => a - b);
  const round = (v: number | null): number | null => (v === null ? null : Math.round(v));
  return { count, window: sorted.length, p70Ms: round(quantile(sorted, 0.7)), p90Ms: round(quantile(sorted, 0.9)), p98Ms: round(quantile(sorted, 0.98)), lastMs: round(last) };
}

/** One pool's cold starts. @example const c = new ColdStarts(); c.record('start', 850); c.stats().p90Ms // 850 */
export class ColdStarts {
  private readonly kinds = new Map<ColdStartKind, KindRecord>(COLD_START_KINDS.map((k) => [k, new KindRecord()]));
  private last: number | null = null;

  /** A worker of `kind` polled for its first job `ms` after it was asked to start. */
  record(kind: ColdStartKind, ms: number): void {
    this.last = Math.max(0, ms);
    this.kinds.get(kind)!.add(this.last);
  }

  /** Counts and quantiles over the window, all kinds together and per kind, with the histograms. */
  stats(): ColdStartStats {
    const start = this.kinds.get('start')!;
    const resume = this.kinds.get('resume')!;
    return {
      ...summarize([...start.window(), ...resume.window()], start.count + resume.count, this.last),
      start: summarize(start.window(), start.count, start.last),
      resume: summarize(resume.window(), resume.count, resume.last),
      buckets: { start: start.buckets, resume: resume.buckets },
    };
  }
}
