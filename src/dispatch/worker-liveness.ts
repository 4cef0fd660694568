/**
 * What this gateway knows, in memory, of whether a worker can still run what it is handed:
 *
 * - **Stopping.** The worker pool decided to stop the worker (idle, stopPod, a rolling update,
 *   a drain, shutdown) or to pause it (flashboot): from then on it is handed nothing, until
 *   the pool resumes a paused one. Pool worker ids are never reused, so
 *   the mark is kept until it ages out (STOPPING_KEEP_MS) or the bound on marks pushes it out.
 * - **Silent.** A worker that pinged this gateway and then stopped pinging for a couple of its
 *   own ping intervals is handed nothing through a take it parked before it went quiet.
 *   runpod-python 1.12 on SIGTERM stops its heartbeat but keeps its 30 s job-take open, and
 *   exits without running what that take returns (docs/worker-protocol.md). The interval is
 *   learned per worker from the gaps between its pings; a take's own arrival counts as a sign
 *   of life, so a live worker whose pings go elsewhere (another gateway) is at worst answered
 *   empty and asks again at once. A worker never heard pinging here is never judged silent.
 *
 * Every check is a map lookup: the take path stays O(1) and touches no store.
 */
export interface WorkerLiveness {
  /** A ping of `workerId` arrived here. */
  pinged(workerId: string): void;
  /** The pool is stopping `workerId`: nothing more is handed to it. */
  markStopping(workerId: string): void;
  isStopping(workerId: string): boolean;
  /** The pool resumes `workerId` from the warm pool (flashboot): its stopping mark goes, and it is handed jobs again. */
  resumed(workerId: string): void;
  /** Whether jobs may go to a take of `workerId` parked here since `parkedAt` (ms on this clock). */
  mayReceive(workerId: string, parkedAt: number): boolean;
  /** The workers pinging this gateway now (none of them silent), e.g. whose jobs a shutdown waits for. */
  pinging(): string[];
  /** Records kept (both are bounded, see MAX_PINGING and MAX_STOPPING). */
  size(): { pinging: number; stopping: number };
}

/** What the liveness records use. */
export interface WorkerLivenessOptions {
  now(): number;
  /** The ping interval assumed for a worker until the gap between two of its pings is seen (the interval Gantry gives its pool workers). */
  defaultPingIntervalMs: number;
}

/** A worker is silent once its last sign of life is older than this many of its ping intervals, plus SILENT_SLACK_MS. */
export const SILENT_AFTER_INTERVALS = 2;
/** Slack for a ping delayed by a busy worker or network. */
export const SILENT_SLACK_MS = 1_000;
/** Learned intervals are kept within these bounds (runpod-python pings in whole seconds). */
const MIN_INTERVAL_MS = 1_000;
const MAX_INTERVAL_MS = 60_000;
/** A ping record older than this is dropped (the worker is then unknown here, never judged silent). */
const PING_RECORD_MAX_AGE_MS = 5 * 60_000;
/**
 * Workers tracked at most: a record is a worker id (≤ 256 characters) and two numbers, so the
 * map stays under about 15 MB however many ids one key pings with; past the bound the oldest
 * record goes.
 */
export const MAX_PINGING = 20_000;
/** Stopping marks kept at most, and for how long (longer than any stop grace a pool may use, bounded by GANTRY_WORKER_STOP_GRACE_MS's maximum). */
export const MAX_STOPPING = 10_000;
const STOPPING_KEEP_MS = 2 * 3_600_000;
/** Expired records are looked for once every this many writes (each look is O(expired)). */
const PRUNE_EVERY = 256;

interface PingRecord {
  at: number;
  intervalMs: number;
  /** Whether intervalMs was measured (false: still the default). */
  measured: boolean;
}

/** How long after its last sign of life a worker with this ping record counts as silent. */
function silentAfter(record: PingRecord): number {
  return SILENT_AFTER_INTERVALS * record.intervalMs + SILENT_SLACK_MS;
}

/** @example const liveness = createWorkerLiveness({ now: Date.now, defaultPingIntervalMs: 10_000 }); liveness.pinged('w1'); liveness.mayReceive('w1', Date.now()); // true */
export function createWorkerLiveness(options: WorkerLivenessOptions): WorkerLiveness {
  return new Liveness(options);
}

class Liveness implements WorkerLiveness {
  /** Insertion order is age order: a ping moves its record to the end. */
  private readonly pings = new Map<string, PingRecord>();
  private readonly stopping = new Map<string, number>();
  private writes = 0;

  constructor(private readonly options: WorkerLivenessOptions) {}

  pinged(workerId: string): void {
    const now = this.options.now();
    const last = this.pings.get(workerId);
    let record: PingRecord = { at: now, intervalMs: this.options.defaultPingIntervalMs, measured: false };
    if (last) {
      this.pings.delete(workerId);
      const gap = Math.min(MAX_INTERVAL_MS, Math.max(MIN_INTERVAL_MS, now - last.at));
      // The first gap replaces the default; later ones raise the estimate at once and lower it
      // halfway, so a ping that comes early (a retry) cannot make a live worker look silent.
      const intervalMs = !last.measured || gap >= last.intervalMs ? gap : (gap + last.intervalMs) / 2;
      record = { at: now, intervalMs, measured: true };
    }
    this.pings.set(workerId, record);
    this.bound(this.pings, MAX_PINGING);
    this.prune(now);
  }

  markStopping(workerId: string): void {
    this.stopping.delete(workerId);
    this.stopping.set(workerId, this.options.now());
    this.bound(this.stopping, MAX_STOPPING);
    this.prune(this.options.now());
  }

  isStopping(workerId: string): boolean {
    return this.stopping.has(workerId);
  }

  resumed(workerId: string): void {
    this.stopping.delete(workerId);
  }

  mayReceive(workerId: string, parkedAt: number): boolean {
    if (this.stopping.has(workerId)) return false;
    const record = this.pings.get(workerId);
    if (!record) return true;
    const lastSign = Math.max(record.at, parkedAt);
    return this.options.now() - lastSign <= silentAfter(record);
  }

  pinging(): string[] {
    const now = this.options.now();
    const ids: string[] = [];
    for (const [id, record] of this.pings) if (now - record.at <= silentAfter(record)) ids.push(id);
    return ids;
  }

  size(): { pinging: number; stopping: number } {
    return { pinging: this.pings.size, stopping: this.stopping.size };
  }

  /** Drops the oldest entries past `max`. */
  private bound<V>(map: Map<string, V>, max: number): void {
    for (const key of map.keys()) {
      if (map.size <= max) return;
      map.delete(key);
    }
  }

  /** Now and then drops the records too old to matter; both maps are in age order, so this stops at the first young one. */
  private prune(now: number): void {
    if (++this.writes % PRUNE_EVERY !== 0) return;
    for (const [id, record] of this.pings) {
      if (now - record.at < PING_RECORD_MAX_AGE_MS) break;
      this.pings.delete(id);
    }
    for (const [id, at] of this.stopping) {
      if (now - at < STOPPING_KEEP_MS) break;
      this.stopping.delete(id);
    }
  }
}
