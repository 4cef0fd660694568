/**
 * Per-worker lists of jobs to stop (cancelled, timed out), handed out through the job-stop
 * long-poll. A list is kept until a poll takes it, so a worker between polls loses nothing.
 */
export interface StopSignals {
  add(workerId: string, jobIds: string[]): void;
  /** Resolves with the pending ids at once, or waits up to `timeoutMs` for some ([] on timeout). */
  take(workerId: string, timeoutMs: number, signal: AbortSignal): Promise<string[]>;
  waitingWorkers(): string[];
  closeAll(): void;
}

/**
 * With gateways sharing a database every gateway receives every stop list, also for workers
 * that never poll it: lists untaken for this long are dropped (a worker's ping re-derives
 * what it must stop, see worker-service.ts).
 */
const PENDING_MAX_AGE_MS = 60_000;

/** @example const stops = createStopSignals(); stops.add('w1', ['job-1']); await stops.take('w1', 30_000, signal); // ['job-1'] */
export function createStopSignals(): StopSignals {
  const pending = new Map<string, Set<string>>();
  const addedAt = new Map<string, number>();
  const waiters = new Map<string, (ids: string[]) => void>();
  let adds = 0;

  function prune(): void {
    const cutoff = Date.now() - PENDING_MAX_AGE_MS;
    for (const [workerId, at] of addedAt) {
      if (at >= cutoff) continue;
      addedAt.delete(workerId);
      pending.delete(workerId);
    }
  }

  function drain(workerId: string): string[] {
    const set = pending.get(workerId);
    pending.delete(workerId);
    addedAt.delete(workerId);
    return set ? [...set] : [];
  }

  return {
    add(workerId, jobIds) {
      if (jobIds.length === 0) return;
      if (++adds % 256 === 0) prune();
      let set = pending.get(workerId);
      if (!set) {
        pending.set(workerId, (set = new Set()));
        addedAt.set(workerId, Date.now());
      }
      for (const id of jobIds) set.add(id);
      const waiter = waiters.get(workerId);
      if (waiter) waiter(drain(workerId));
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
    waitingWorkers: () => [...waiters.keys()],
    closeAll() {
      for (const finish of [...waiters.values()]) finish([]);
    },
  };
}
