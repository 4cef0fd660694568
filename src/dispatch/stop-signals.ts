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

export function createStopSignals(): StopSignals {
  const pending = new Map<string, Set<string>>();
  const waiters = new Map<string, (ids: string[]) => void>();

  function drain(workerId: string): string[] {
    const set = pending.get(workerId);
    pending.delete(workerId);
    return set ? [...set] : [];
  }

  return {
    add(workerId, jobIds) {
      if (jobIds.length === 0) return;
      let set = pending.get(workerId);
      if (!set) pending.set(workerId, (set = new Set()));
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
