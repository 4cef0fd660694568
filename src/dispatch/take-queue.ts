import type { JobRecord } from '../store/store.js';

/**
 * Waiting job-take long-polls of each endpoint, first come first served. A 'pump' claims jobs
 * from the store for the waiter at the head until the store has no more; it runs whenever jobs
 * may have arrived (a submit, a requeue) and right after a new waiter joins, so a job inserted
 * between a waiter's arrival and its registration is never stranded.
 *
 * A waiter is never settled while a claim for it is in flight: a timeout then waits for the
 * claim and delivers what it got, and a client that went away has its jobs returned to the
 * queue (`unclaim`), so no job is ever claimed for a connection that cannot receive it.
 */
interface TakeWaiter {
  workerId: string;
  limit: number;
  signal: AbortSignal;
  claiming: boolean;
  expired: boolean;
  settle(jobs: JobRecord[]): void;
}

export type ClaimFn = (endpointId: string, workerId: string, limit: number) => Promise<JobRecord[]>;
export type UnclaimFn = (workerId: string, jobs: JobRecord[]) => Promise<void>;

export interface TakeQueue {
  /** Waits up to `timeoutMs` for jobs; resolves [] on timeout or abort. */
  take(endpointId: string, workerId: string, limit: number, timeoutMs: number, signal: AbortSignal): Promise<JobRecord[]>;
  /** Jobs may be available on this endpoint. */
  poke(endpointId: string): void;
  /** Workers with an open long-poll (they count as alive). */
  waitingWorkers(): { endpointId: string; workerId: string }[];
  closeAll(): void;
}

export function createTakeQueue(claim: ClaimFn, unclaim: UnclaimFn, onError: (err: unknown) => void): TakeQueue {
  const queues = new Map<string, TakeWaiter[]>();
  const pumping = new Set<string>();
  const again = new Set<string>();

  function remove(endpointId: string, waiter: TakeWaiter): void {
    const queue = queues.get(endpointId);
    const at = queue?.indexOf(waiter) ?? -1;
    if (queue && at >= 0) queue.splice(at, 1);
    if (queue && queue.length === 0) queues.delete(endpointId);
  }

  async function serve(endpointId: string, waiter: TakeWaiter): Promise<boolean> {
    waiter.claiming = true;
    let jobs: JobRecord[];
    try {
      jobs = await claim(endpointId, waiter.workerId, waiter.limit);
    } catch (err) {
      remove(endpointId, waiter);
      waiter.settle([]);
      throw err;
    } finally {
      waiter.claiming = false;
    }
    if (jobs.length > 0 && waiter.signal.aborted) {
      remove(endpointId, waiter);
      waiter.settle([]);
      await unclaim(waiter.workerId, jobs);
      return true; // the jobs are back in the queue: try the next waiter
    }
    if (jobs.length > 0 || waiter.expired) {
      remove(endpointId, waiter);
      waiter.settle(jobs);
    }
    return jobs.length > 0;
  }

  async function pump(endpointId: string): Promise<void> {
    if (pumping.has(endpointId)) {
      again.add(endpointId);
      return;
    }
    pumping.add(endpointId);
    try {
      do {
        again.delete(endpointId);
        for (;;) {
          const head = queues.get(endpointId)?.[0];
          if (!head) break;
          if (!(await serve(endpointId, head))) break;
        }
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
        const waiter: TakeWaiter = {
          workerId,
          limit,
          signal,
          claiming: false,
          expired: false,
          settle(jobs) {
            if (settled) return;
            settled = true;
            clearTimeout(timer);
            signal.removeEventListener('abort', onEnd);
            resolve(jobs);
          },
        };
        function onEnd(): void {
          waiter.expired = true;
          if (waiter.claiming) return; // the claim in flight settles it
          remove(endpointId, waiter);
          waiter.settle([]);
        }
        const timer = setTimeout(onEnd, timeoutMs);
        signal.addEventListener('abort', onEnd, { once: true });
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
      for (const [endpointId, queue] of [...queues]) {
        for (const w of [...queue]) {
          if (w.claiming) w.expired = true;
          else {
            remove(endpointId, w);
            w.settle([]);
          }
        }
      }
    },
  };
}
