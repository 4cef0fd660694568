import type { JobRecord } from '../model/records.js';

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

/** Claims up to `limit` queued jobs of an endpoint for a worker (the store call of a take). */
export type ClaimFn = (endpointId: string, workerId: string, limit: number) => Promise<JobRecord[]>;
/** Puts back jobs claimed for a waiter that can no longer receive them. */
export type UnclaimFn = (endpointId: string, workerId: string, jobs: JobRecord[]) => Promise<void>;

/** The job-take long-polls waiting on this gateway, per endpoint, first come first served. */
export interface TakeQueue {
  /** Waits up to `timeoutMs` for jobs; resolves [] on timeout or abort. */
  take(endpointId: string, workerId: string, limit: number, timeoutMs: number, signal: AbortSignal): Promise<JobRecord[]>;
  /** Jobs may be available on this endpoint. */
  poke(endpointId: string): void;
  /** Workers with an open long-poll (they count as alive). */
  waitingWorkers(): { endpointId: string; workerId: string }[];
  /** Tries the store for every endpoint with waiters (a wake-up from another gateway may have been lost). */
  pokeAll(): void;
  closeAll(): void;
}

/** How the take queue claims and returns jobs, and where its failures go. */
export interface TakeQueueOptions {
  claim: ClaimFn;
  /** Returns jobs claimed for a waiter whose client went away. */
  unclaim: UnclaimFn;
  onError(err: unknown): void;
}

/** @example const queue = createTakeQueue({ claim, unclaim, onError }); const jobs = await queue.take('echo', 'w1', 1, 30_000, signal); */
export function createTakeQueue(options: TakeQueueOptions): TakeQueue {
  return new WaitingTakes(options);
}

class WaitingTakes implements TakeQueue {
  private readonly queues = new Map<string, TakeWaiter[]>();
  private readonly pumping = new Set<string>();
  private readonly again = new Set<string>();

  constructor(private readonly options: TakeQueueOptions) {}

  take(endpointId: string, workerId: string, limit: number, timeoutMs: number, signal: AbortSignal): Promise<JobRecord[]> {
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
      const onEnd = (): void => {
        waiter.expired = true;
        if (waiter.claiming) return; // the claim in flight settles it
        this.remove(endpointId, waiter);
        waiter.settle([]);
      };
      const timer = setTimeout(onEnd, timeoutMs);
      signal.addEventListener('abort', onEnd, { once: true });
      let queue = this.queues.get(endpointId);
      if (!queue) this.queues.set(endpointId, (queue = []));
      queue.push(waiter);
      void this.pump(endpointId);
    });
  }

  poke(endpointId: string): void {
    if (this.queues.has(endpointId)) void this.pump(endpointId);
  }

  pokeAll(): void {
    for (const endpointId of [...this.queues.keys()]) void this.pump(endpointId);
  }

  waitingWorkers(): { endpointId: string; workerId: string }[] {
    const waiting: { endpointId: string; workerId: string }[] = [];
    for (const [endpointId, queue] of this.queues) for (const w of queue) waiting.push({ endpointId, workerId: w.workerId });
    return waiting;
  }

  closeAll(): void {
    for (const [endpointId, queue] of [...this.queues]) {
      for (const w of [...queue]) {
        if (w.claiming) w.expired = true;
        else {
          this.remove(endpointId, w);
          w.settle([]);
        }
      }
    }
  }

  private remove(endpointId: string, waiter: TakeWaiter): void {
    const queue = this.queues.get(endpointId);
    const at = queue?.indexOf(waiter) ?? -1;
    if (queue && at >= 0) queue.splice(at, 1);
    if (queue && queue.length === 0) this.queues.delete(endpointId);
  }

  /** Claims for the waiter at the head; true when it got jobs (or they went back), so the next waiter may try. */
  private async serve(endpointId: string, waiter: TakeWaiter): Promise<boolean> {
    waiter.claiming = true;
    let jobs: JobRecord[];
    try {
      jobs = await this.options.claim(endpointId, waiter.workerId, waiter.limit);
    } catch (err) {
      this.remove(endpointId, waiter);
      waiter.settle([]);
      throw err;
    } finally {
      waiter.claiming = false;
    }
    if (jobs.length > 0 && waiter.signal.aborted) {
      this.remove(endpointId, waiter);
      waiter.settle([]);
      await this.options.unclaim(endpointId, waiter.workerId, jobs);
      return true; // the jobs are back in the queue: try the next waiter
    }
    if (jobs.length > 0 || waiter.expired) {
      this.remove(endpointId, waiter);
      waiter.settle(jobs);
    }
    return jobs.length > 0;
  }

  private async pump(endpointId: string): Promise<void> {
    if (this.pumping.has(endpointId)) {
      this.again.add(endpointId);
      return;
    }
    this.pumping.add(endpointId);
    try {
      do {
        this.again.delete(endpointId);
        for (;;) {
          const head = this.queues.get(endpointId)?.[0];
          if (!head || !(await this.serve(endpointId, head))) break;
        }
      } while (this.again.has(endpointId));
    } catch (err) {
      this.options.onError(err);
    } finally {
      this.pumping.delete(endpointId);
    }
  }
}
