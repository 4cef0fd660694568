import type { LogLine, PoolWorkerInfo } from '../jobs/pool-view.js';
import type { WorkerLog } from './worker-log.js';

/** How many stopped workers an endpoint's pool remembers, and for how long. */
export interface StoppedWorkerLimits {
  /** At most this many per endpoint (the oldest stop is forgotten first); 0 keeps none (GANTRY_STOPPED_WORKERS_KEPT). */
  max: number;
  /** A stopped worker is forgotten this long after it stopped; 0 keeps none (GANTRY_STOPPED_WORKERS_KEPT_MS). */
  keepMs: number;
}

/** Defaults: the last 20 stopped workers of each endpoint, for 30 minutes. */
export const STOPPED_WORKER_DEFAULTS: StoppedWorkerLimits = { max: 20, keepMs: 30 * 60_000 };

/** One pool's stopped workers (createStoppedWorkers). */
export interface StoppedWorkers {
  /** Remembers a worker that just stopped (`info.state` is `stopped`, `info.stoppedAt` set). */
  add(info: PoolWorkerInfo & { stoppedAt: number }, log: WorkerLog): void;
  /** The remembered workers, the most recently stopped first. */
  list(): PoolWorkerInfo[];
  /** The last `lines` log lines of a remembered worker; undefined once it is forgotten. */
  logs(workerId: string, lines: number): LogLine[] | undefined;
  /** How many workers are remembered now. */
  readonly size: number;
}

/**
 * The workers of one pool that are gone (scaled down, drained after a settings change, crashed
 * and then stopped): what the listing showed of them when they stopped, and their log ring, so
 * their last lines stay readable after the process is gone. Bounded in number and age; each
 * ring is as bounded as a live worker's, so this holds at most `max` rings per endpoint.
 *
 * @example
 * const stopped = createStoppedWorkers({ max: 20, keepMs: 1_800_000 }, Date.now);
 * stopped.add({ ...info, state: 'stopped', stoppedAt: Date.now() }, log);
 * stopped.logs(info.id, 100); // the last 100 lines, until it is forgotten
 */
export function createStoppedWorkers(limits: StoppedWorkerLimits, now: () => number): StoppedWorkers {
  // Insertion order is stop order: the first entry is always the oldest.
  const kept = new Map<string, { info: PoolWorkerInfo & { stoppedAt: number }; log: WorkerLog }>();

  function prune(): void {
    const cutoff = now() - limits.keepMs;
    for (const [id, entry] of kept) {
      if (kept.size > limits.max || entry.info.stoppedAt <= cutoff) kept.delete(id);
      else break;
    }
  }

  return {
    add(info: PoolWorkerInfo & { stoppedAt: number }, log: WorkerLog): void {
      kept.delete(info.id);
      if (limits.max > 0 && limits.keepMs > 0) kept.set(info.id, { info, log });
      prune();
    },
    list(): PoolWorkerInfo[] {
      prune();
      return [...kept.values()].reverse().map((e) => ({ ...e.info }));
    },
    logs(workerId: string, lines: number): LogLine[] | undefined {
      prune();
      return kept.get(workerId)?.log.tail(lines);
    },
    get size(): number {
      return kept.size;
    },
  };
}
