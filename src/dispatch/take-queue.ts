import type { JobRecord } from '../store/store.js';

/**
 * Waiting job-take long-polls of each endpoint, first come first served. A 'pump' claims jobs
 * from the store for the waiter at the head until the store has no more; it runs whenever jobs
 * may have arrived (a submit, a requeue) and right after a new waiter joins, so a job inserted
 * between a waiter's arrival and its registration is never stranded.
 */
export interface TakeWaiter {
  workerId: string;
  limit: number;
  signal: AbortSignal;
  resolve(jobs: JobRecord[]): void;
}

export type ClaimFn = (endpointId: string, workerId: string, limit: number) => Promise<JobRecord[]>;

export interface TakeQueue {
  /** Waits up to `timeoutMs` for jobs; resolves [] on timeout or abort. */
  take(endpointId: string, workerId: string, limit: number, timeoutMs: number, signal: AbortSignal): Promise<JobRecord[]>;
  /** Jobs may be available on this endpoint. */
  poke(endpointId: string): void;
  /** Workers with an open long-poll (they count as alive). */
  waitingWorkers(): { endpointId: string; workerId: string }[];
  closeAll(): void;
}

export function createTakeQueue(claim: ClaimFn, onError: (err: unknown) => void): TakeQueue {
  const queues = new Map<string, TakeWaiter[]>();
  const pumping = new Set<string>();
  const again = new Set<string>();

  async function pump(endpointId: string): Promise<void> {
    if (pumping.has(endpointId)) {
      again.add(endpointId);
      return;
    }
    pumping.add(endpointId);
    try {
      do {
        again.delete(endpointId);
        const queue = queues.get(endpointId);
        while (queue && queue.length > 0) {
          const waiter = queue[0]!;
          if (waiter.signal.aborted) {
            queue.shift();
            continue;
          }
          const jobs = await claim(endpointId, waiter.workerId, waiter.limit);
          if (jobs.length === 0) break;
          queue.shift();
          waiter.resolve(jobs);
        }
        if (queue && queue.length === 0) queues.delete(endpointId);
      } while (again.has(endpointId));
    } catch (err) {
      onError(err);
    } finally {
      pumping.delete(endpointId);
    }
  }

  return {
    take(endpointId, workerId, limit, timeoutMs, signal) {
      return new Promise<JobRecord[]>((resolve) => {
        let settled = false;
        const finish = (jobs: JobRecord[]): void => {
          if (settled) return;
          settled = true;
          clearTimeout(timer);
          signal.removeEventListener('abort', onAbort);
          const queue = queues.get(endpointId);
          const at = queue?.indexOf(waiter) ?? -1;
          if (queue && at >= 0) queue.splice(at, 1);
          resolve(jobs);
        };
        const onAbort = (): void => finish([]);
        const timer = setTimeout(finish, timeoutMs, []);
        const waiter: TakeWaiter = { workerId, limit, signal, resolve: finish };
        signal.addEventListener('abort', onAbort, { once: true });
        let queue = queues.get(endpointId);
        if (!queue) queues.set(endpointId, (queue = []));
        queue.push(waiter);
        void pump(endpointId);
      });
    },
    poke(endpointId) {
      if (queues.has(endpointId)) void pump(endpointId);
    },
    waitingWorkers() {
      const waiting: { endpointId: string; workerId: string }[] = [];
      for (const [endpointId, queue] of queues) for (const w of queue) waiting.push({ endpointId, workerId: w.workerId });
      return waiting;
    },
    closeAll() {
      for (const queue of [...queues.values()]) for (const w of [...queue]) w.resolve([]);
      queues.clear();
    },
  };
}
