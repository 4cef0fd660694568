/**
 * Per-worker lists of jobs to stop (cancelled, timed out), handed out through the job-stop
 * long-poll. A list is kept until a poll takes it, so a worker between polls loses nothing.
 */
export interface StopSignals {
  add(workerId: string, jobIds: string[]): void;
  /** Resolves with the pending ids at once, or waits up to `timeoutMs` for some ([] on timeout). */
  take(workerId: string, timeoutMs: number, signal: AbortSignal): Promise<string[]>;
  /** Answers `workerId`'s parked poll now, with what is pending (often nothing): the worker is stopping. */
  release(workerId: string): void;
  waitingWorkers(): string[];
  /** What is kept: lists untaken, and job ids in them (bounded, see STOP_LIST_MAX_IDS). */
  size(): { workers: number; ids: number };
  closeAll(): void;
}

/**
 * With gateways sharing a database every gateway receives every stop list, also for workers
 * that never poll it: lists untaken for this long are dropped (a worker's ping re-derives
 * what it must stop, see worker-service.ts).
 */
const PENDING_MAX_AGE_MS = 60_000;

/**
 * Bounds in size as well as in age: a ping adds every job id it lists that the store does not
 * know, so one worker key could otherwise grow memory by its request rate times the age bound.
 * Past a bound the oldest entries go (the oldest ids of a list, the oldest lists); what a worker
 * still holds and must stop is listed again by its next ping and added back.
 */
export const STOP_LIST_MAX_IDS = 1_024;
/** Untaken stop lists kept at most (one per worker id); see STOP_LIST_MAX_IDS. */
export const STOP_LISTS_MAX = 10_000;
/** Job ids kept at most over all lists; see STOP_LIST_MAX_IDS. */
export const STOP_IDS_MAX = 100_000;

/** The untaken lists, bounded in age and size (see STOP_LIST_MAX_IDS). */
class PendingStops {
  private readonly lists = new Map<string, Set<string>>();
  private readonly addedAt = new Map<string, number>();
  private ids = 0;
  private adds = 0;

  size(): { workers: number; ids: number } {
    return { workers: this.lists.size, ids: this.ids };
  }

  add(workerId: string, jobIds: string[]): void {
    if (++this.adds % 256 === 0) this.prune();
    let set = this.lists.get(workerId);
    if (!set) {
      this.lists.set(workerId, (set = new Set()));
      this.addedAt.set(workerId, Date.now());
    }
    for (const id of jobIds) {
      if (set.has(id)) continue;
      set.add(id);
      this.ids++;
      if (set.size > STOP_LIST_MAX_IDS) {
        set.delete(set.values().next().value!);
        this.ids--;
      }
    }
  }

  /** Drops the oldest lists other than `keep`'s until both totals are within their bounds. */
  bound(keep: string): void {
    for (const workerId of this.lists.keys()) {
      if (this.lists.size <= STOP_LISTS_MAX && this.ids <= STOP_IDS_MAX) return;
      if (workerId !== keep) this.drain(workerId);
    }
  }

  /** The list of `workerId`, removed. */
  drain(workerId: string): string[] {
    const set = this.lists.get(workerId);
    if (!set) return [];
    this.lists.delete(workerId);
    this.addedAt.delete(workerId);
    this.ids -= set.size;
    return [...set];
  }

  private prune(): void {
    const cutoff = Date.now() - PENDING_MAX_AGE_MS;
    for (const [workerId, at] of this.addedAt) {
      if (at < cutoff) this.drain(workerId);
    }
  }
}

/** @example const stops = createStopSignals(); stops.add('w1', ['job-1']); await stops.take('w1', 30_000, signal); // ['job-1'] */
export function createStopSignals(): StopSignals {
  const pending = new PendingStops();
  const waiters = new Map<string, (ids: string[]) => void>();
  const drain = (workerId: string): string[] => pending.drain(workerId);

  return {
    add(workerId, jobIds) {
      if (jobIds.length === 0) return;
      pending.add(workerId, jobIds);
      const waiter = waiters.get(workerId);
      if (waiter) waiter(drain(workerId));
      else pending.bound(workerId);
    },
    take(workerId, timeoutMs, signal) {
      const ready = drain(workerId);
      if (ready.length > 0 || timeoutMs <= 0 || signal.aborted) return Promise.resolve(ready);
      // A newer poll from the same worker replaces an older one (the old one answers empty).
      waiters.get(workerId)?.([]);
      return new Promise<string[]>((resolve) => {
        const finish = (ids: string[]): void => {
          clearTimeout(timer);
          signal.removeEventListener('abort', onAbort);
          if (waiters.get(workerId) === finish) waiters.delete(workerId);
          resolve(ids);
        };
        const onAbort = (): void => finish([]);
        const timer = setTimeout(finish, timeoutMs, []);
        signal.addEventListener('abort', onAbort, { once: true });
        waiters.set(workerId, finish);
      });
    },
    release(workerId) {
      waiters.get(workerId)?.(drain(workerId));
    },
    waitingWorkers: () => [...waiters.keys()],
    size: () => pending.size(),
    closeAll() {
      for (const finish of [...waiters.values()]) finish([]);
    },
  };
}
