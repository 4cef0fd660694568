/**
 * Long-polls waiting on one job (runsync, status-sync, stream): each waits for the job's next
 * 'job-updated' event, its own timeout, or its client going away, whichever comes first.
 */
export interface JobWaiters {
  /** Resolves true when the job was updated, false on timeout or abort. */
  wait(jobId: string, timeoutMs: number, signal?: AbortSignal): Promise<boolean>;
  wake(jobId: string): void;
  /** Number of waiting calls (for metrics and tests). */
  size(): number;
  /** Wakes every waiter with false (shutdown). */
  closeAll(): void;
}

/** @example const waiters = createJobWaiters(); const updated = await waiters.wait(jobId, 1_000, signal); */
export function createJobWaiters(): JobWaiters {
  const byJob = new Map<string, Set<(updated: boolean) => void>>();
  let count = 0;

  function remove(jobId: string, done: (updated: boolean) => void): void {
    const set = byJob.get(jobId);
    if (set?.delete(done)) {
      count--;
      if (set.size === 0) byJob.delete(jobId);
    }
  }

  return {
    wait(jobId, timeoutMs, signal) {
      if (signal?.aborted || timeoutMs <= 0) return Promise.resolve(false);
      return new Promise<boolean>((resolve) => {
        const done = (updated: boolean): void => {
          clearTimeout(timer);
          signal?.removeEventListener('abort', onAbort);
          remove(jobId, done);
          resolve(updated);
        };
        const onAbort = (): void => done(false);
        const timer = setTimeout(done, timeoutMs, false);
        signal?.addEventListener('abort', onAbort, { once: true });
        let set = byJob.get(jobId);
        if (!set) byJob.set(jobId, (set = new Set()));
        set.add(done);
        count++;
      });
    },
    wake(jobId) {
      const set = byJob.get(jobId);
      if (!set) return;
      for (const done of [...set]) done(true);
    },
    size: () => count,
    closeAll() {
      for (const set of [...byJob.values()]) for (const done of [...set]) done(false);
    },
  };
}
