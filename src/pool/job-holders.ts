import type { JobObserver } from '../jobs/job-observer.js';
import type { JobRecord } from '../model/records.js';

/** More jobs than this held by one worker are not tracked (a line is then no single job's anyway). */
const MAX_TRACKED = 256;

/**
 * Which jobs each pool worker of this gateway holds, as the job transitions committed here tell
 * (claims, results, cancels, timeouts, requeues): so a line a worker prints while it holds
 * exactly one job is filed under that job (docs/logs.md). Only workers the pool registered are
 * tracked, so the maps stay as small as the pools. Transitions made on another gateway are not
 * seen; `settle` (the autoscaler's view of the store) clears what they left behind.
 */
export interface JobHolders {
  /** Fed every committed job transition (joined into the gateway's observers). */
  readonly observer: JobObserver;
  /** Starts tracking a pool worker. */
  track(workerId: string): void;
  /** Stops tracking a worker that is gone. */
  untrack(workerId: string): void;
  /** The one job the worker holds now; null when it holds none or several. */
  soleJob(workerId: string): string | null;
  /**
   * The store says the worker holds `held` jobs as of `asOf`: when that is none, jobs this
   * gateway saw it claim before then are forgotten (preempted, or ended on another gateway).
   */
  settle(workerId: string, held: number, asOf: number): void;
}

/** @example const holders = createJobHolders(Date.now); holders.track('w1'); holders.observer.started([job]); holders.soleJob('w1'); */
export function createJobHolders(now: () => number): JobHolders {
  // workerId → jobId → when this gateway saw the claim.
  const held = new Map<string, Map<string, number>>();
  const drop = (job: JobRecord): void => {
    if (job.workerId) held.get(job.workerId)?.delete(job.id);
  };
  const dropEverywhere = (jobs: readonly JobRecord[]): void => {
    for (const jobs_ of held.values()) for (const job of jobs) jobs_.delete(job.id);
  };
  const observer: JobObserver = {
    submitted: () => undefined,
    started: (jobs) => {
      for (const job of jobs) {
        const mine = job.workerId ? held.get(job.workerId) : undefined;
        if (mine && mine.size < MAX_TRACKED) mine.set(job.id, now());
      }
    },
    ended: drop,
    purged: () => undefined,
    // A requeued job no longer names the worker that lost it.
    requeued: (jobs) => dropEverywhere(jobs),
  };
  return {
    observer,
    track: (workerId) => {
      if (!held.has(workerId)) held.set(workerId, new Map());
    },
    untrack: (workerId) => {
      held.delete(workerId);
    },
    soleJob: (workerId) => {
      const mine = held.get(workerId);
      if (mine?.size !== 1) return null;
      return mine.keys().next().value ?? null;
    },
    settle: (workerId, count, asOf) => {
      const mine = held.get(workerId);
      if (!mine || count > 0) return;
      for (const [jobId, since] of mine) if (since < asOf) mine.delete(jobId);
    },
  };
}
