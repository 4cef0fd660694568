import type { ColdStartKind, ColdStartStats, ColdStartSummary } from '../jobs/pool-view.js';
import type { StoredColdStarts, UsageStore } from '../store/store.js';

/**
 * The cold starts of one endpoint's pool (docs/scaling.md, "Cold starts"): a worker started
 * while a job of the endpoint waited in the queue, timed from the start request (the pool's
 * decision to start it, or to resume it from the warm pool) to its first job-take. Kept as
 * plain numbers: a count and histogram buckets per kind since the pool was made (for
 * /metrics), and the last WINDOW durations per kind (for p70/p90/p98, as RunPod's console
 * shows them). Bounded: 2 × WINDOW numbers and 2 × (bounds + 1) bucket counts, whatever the
 * traffic.
 *
 * Kept in the store as well (`ColdStartLedger`: the cold_start_* tables, bounded the same way),
 * so a gateway that becomes the leader reports what its predecessor counted: a pool made with
 * a ledger reads it once, and writes each cold start to it as it records it.
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
  private sumMs = 0;
  last: number | null = null;

  add(ms: number): void {
    this.count++;
    this.last = ms;
    this.ring[this.next % WINDOW] = ms;
    this.next++;
    this.buckets.counts[bucketOf(ms)]! += 1;
    // Summed in ms, then divided: the same figure as the store's sum gives a new leader (seconds added one by one round differently).
    this.sumMs += ms;
    this.buckets.sum = this.sumMs / 1000;
    this.buckets.count += 1;
  }

  /** Takes the stored counts, histogram and ring in place of its own (those of a predecessor). */
  restore(stored: StoredColdStarts): void {
    this.count = stored.count;
    this.last = stored.lastMs;
    this.buckets.counts.fill(0);
    for (const b of stored.buckets) if (b.bucket >= 0 && b.bucket < this.buckets.counts.length) this.buckets.counts[b.bucket] = b.count;
    this.sumMs = stored.sumMs;
    this.buckets.sum = stored.sumMs / 1000;
    this.buckets.count = stored.count;
    this.ring.fill(0);
    for (const r of stored.recent) if (r.slot >= 0 && r.slot < WINDOW) this.ring[r.slot] = r.ms;
    this.next = stored.count;
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

/** The histogram bucket of a duration: the first bound (seconds) it does not pass; the last is +Inf. */
function bucketOf(ms: number): number {
  const seconds = ms / 1000;
  let i = 0;
  while (i < COLD_START_BOUNDS.length && seconds > COLD_START_BOUNDS[i]!) i++;
  return i;
}

/** Where an endpoint's cold starts are kept beyond one leader (the store's cold_start_* tables). */
export type ColdStartLedger = Pick<UsageStore, 'recordColdStart' | 'readColdStarts'>;

/** A ledger for one pool, and where its faults go (a write or read that fails costs the figures, never a worker). */
export interface ColdStartKeeping {
  ledger: ColdStartLedger;
  endpointId: string;
  now: () => number;
  onError: (err: unknown, what: 'read' | 'write') => void;
}

/**
 * One pool's cold starts.
 *
 * @example const c = new ColdStarts(); c.record('start', 850); c.stats().p90Ms // 850
 * @example const c = new ColdStarts({ ledger: store, endpointId: 'sd', now: Date.now, onError }); await c.loaded; // the stored ones
 */
export class ColdStarts {
  private readonly kinds = new Map<ColdStartKind, KindRecord>(COLD_START_KINDS.map((k) => [k, new KindRecord()]));
  private last: number | null = null;
  /** Cold starts recorded before the stored ones were read: added again on top of them (at most WINDOW kept). */
  private early: [ColdStartKind, number][] | null = null;
  /** Writes in order, after the read. */
  private writes: Promise<void>;
  /** Settles once the stored cold starts are read (at once without a ledger; a failed read leaves the pool's own). */
  readonly loaded: Promise<void>;

  constructor(private readonly keeping?: ColdStartKeeping) {
    if (!keeping) {
      this.loaded = this.writes = Promise.resolve();
      return;
    }
    this.early = [];
    this.loaded = this.writes = keeping.ledger.readColdStarts(keeping.endpointId).then(
      (stored) => this.restore(stored),
      (err: unknown) => {
        this.early = null;
        keeping.onError(err, 'read');
      },
    );
  }

  /** A worker of `kind` polled for its first job `ms` after it was asked to start. */
  record(kind: ColdStartKind, ms: number): void {
    const at = this.keeping?.now() ?? 0;
    this.add(kind, Math.max(0, ms));
    if (this.early && this.early.length < WINDOW) this.early.push([kind, Math.max(0, ms)]);
    const k = this.keeping;
    if (!k) return;
    const args = { endpointId: k.endpointId, kind, ms: Math.max(0, ms), bucket: bucketOf(Math.max(0, ms)), at, window: WINDOW };
    this.writes = this.writes.then(() => k.ledger.recordColdStart(args)).catch((err: unknown) => k.onError(err, 'write'));
  }

  /** Settles when every cold start recorded so far is written (or its write failed). */
  flushed(): Promise<void> {
    return this.writes;
  }

  private add(kind: ColdStartKind, ms: number): void {
    this.last = ms;
    this.kinds.get(kind)!.add(ms);
  }

  /** The stored figures in place of the pool's own, then the pool's own recorded meanwhile on top (their writes follow the read). */
  private restore(stored: StoredColdStarts[]): void {
    const early = this.early ?? [];
    this.early = null;
    for (const kind of COLD_START_KINDS) {
      const s = stored.find((x) => x.kind === kind);
      const record = new KindRecord();
      if (s) record.restore(s);
      this.kinds.set(kind, record);
    }
    const latest = stored.reduce<StoredColdStarts | null>((a, b) => (a === null || b.lastAt > a.lastAt ? b : a), null);
    this.last = latest?.lastMs ?? null;
    for (const [kind, ms] of early) this.add(kind, ms);
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
