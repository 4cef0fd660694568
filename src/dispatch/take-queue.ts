import type { JobWithInput, Taker } from '../model/records.js';
import type { WorkerLiveness } from './worker-liveness.js';

/** The most waiters one claim serves, and the most jobs it claims (a full batch take is 100). */
const MAX_TAKERS = 64;
const MAX_CLAIM = 1_000;

/**
 * Waiting job-take long-polls of each endpoint, first come first served. A 'pump' claims jobs
 * from the store for the waiters at the head until the store has no more; it runs whenever jobs
 * may have arrived (a submit, a requeue) and right after a new waiter joins, so a job inserted
 * between a waiter's arrival and its registration is never stranded. One claim serves every
 * waiter at the head (up to MAX_TAKERS waiters, MAX_CLAIM jobs): on PostgreSQL a claim is a
 * round trip and a commit, and claiming for one waiter at a time capped an endpoint at about
 * one claim per round trip however many workers waited (docs/benchmarks-peers.md).
 *
 * A waiter is never settled while a claim for it is in flight: a timeout then waits for the
 * claim and delivers what it got, and a client that went away has its jobs returned to the
 * queue (`unclaim`), so no job is ever claimed for a connection that cannot receive it.
 *
 * Nothing is handed to a worker that cannot run it (WorkerLiveness): a worker the pool is
 * stopping, or one that stopped pinging after its take parked (runpod-python on SIGTERM). Such a
 * waiter is never claimed for, a claim that comes back for one is returned (`unclaim`), and it
 * is answered empty: at once when the pool marks the worker (`release`), within SWEEP_MS when
 * it goes silent. A take from a stopping worker is answered empty without parking.
 */
interface TakeWaiter {
  workerId: string;
  limit: number;
  /** When the take arrived: a sign of life of its worker. */
  parkedAt: number;
  signal: AbortSignal;
  claiming: boolean;
  expired: boolean;
  settle(jobs: JobWithInput[]): void;
}

/**
 * Claims queued jobs of an endpoint for several takers in one store call (each up to its limit,
 * in queue order, the first taker first); returns each taker's jobs by position.
 */
export type ClaimFn = (endpointId: string, takers: readonly Taker[]) => Promise<JobWithInput[][]>;
/** Puts back jobs claimed for a waiter that can no longer receive them. */
export type UnclaimFn = (endpointId: string, workerId: string, jobs: JobWithInput[]) => Promise<void>;

/** The job-take long-polls waiting on this gateway, per endpoint, first come first served. */
export interface TakeQueue {
  /** Waits up to `timeoutMs` for jobs; resolves [] on timeout or abort. */
  take(endpointId: string, workerId: string, limit: number, timeoutMs: number, signal: AbortSignal): Promise<JobWithInput[]>;
  /** Jobs may be available on this endpoint. */
  poke(endpointId: string): void;
  /** Workers with an open long-poll (they count as alive). */
  waitingWorkers(): { endpointId: string; workerId: string }[];
  /** Tries the store for every endpoint with waiters (a wake-up from another gateway may have been lost). */
  pokeAll(): void;
  /** Answers `workerId`'s takes on `endpointId` empty now (the pool is stopping it; see WorkerLiveness). */
  release(endpointId: string, workerId: string): void;
  closeAll(): void;
}

/** How the take queue claims and returns jobs, and where its failures go. */
export interface TakeQueueOptions {
  claim: ClaimFn;
  /** Returns jobs claimed for a waiter whose client went away. */
  unclaim: UnclaimFn;
  onError(err: unknown): void;
  /** Which workers may receive jobs (default: every worker). */
  liveness?: Pick<WorkerLiveness, 'isStopping' | 'mayReceive'>;
  /** The clock `liveness` reads (default Date.now). */
  now?: () => number;
}

/** How often parked takes are checked for workers that went silent. */
const SWEEP_MS = 1_000;

/** @example const queue = createTakeQueue({ claim, unclaim, onError }); const jobs = await queue.take('echo', 'w1', 1, 30_000, signal); */
export function createTakeQueue(options: TakeQueueOptions): TakeQueue {
  return new WaitingTakes(options);
}

class WaitingTakes implements TakeQueue {
  private readonly queues = new Map<string, TakeWaiter[]>();
  private readonly pumping = new Set<string>();
  private readonly again = new Set<string>();
  private readonly now: () => number;
  private sweepTimer: NodeJS.Timeout | undefined;

  constructor(private readonly options: TakeQueueOptions) {
    this.now = options.now ?? Date.now;
  }

  take(endpointId: string, workerId: string, limit: number, timeoutMs: number, signal: AbortSignal): Promise<JobWithInput[]> {
    if (this.options.liveness?.isStopping(workerId)) return Promise.resolve([]);
    return new Promise<JobWithInput[]>((resolve) => {
      let settled = false;
      const waiter: TakeWaiter = {
        workerId,
        limit,
        parkedAt: this.now(),
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
      this.startSweeping();
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

  release(endpointId: string, workerId: string): void {
    for (const w of [...(this.queues.get(endpointId) ?? [])]) if (w.workerId === workerId) this.answerEmpty(endpointId, w);
  }

  closeAll(): void {
    for (const [endpointId, queue] of [...this.queues]) {
      for (const w of [...queue]) this.answerEmpty(endpointId, w);
    }
  }

  /** Answers a waiter with no job now, or (a claim for it in flight) once the claim is back. */
  private answerEmpty(endpointId: string, w: TakeWaiter): void {
    if (w.claiming) w.expired = true;
    else {
      this.remove(endpointId, w);
      w.settle([]);
    }
  }

  private mayReceive(w: TakeWaiter): boolean {
    return this.options.liveness?.mayReceive(w.workerId, w.parkedAt) ?? true;
  }

  /** While takes are parked, answers those whose worker went silent (see WorkerLiveness) every SWEEP_MS. */
  private startSweeping(): void {
    if (this.sweepTimer || !this.options.liveness) return;
    this.sweepTimer = setTimeout(() => {
      this.sweepTimer = undefined;
      for (const [endpointId, queue] of [...this.queues]) {
        for (const w of [...queue]) if (!w.claiming && !this.mayReceive(w)) this.answerEmpty(endpointId, w);
      }
      if (this.queues.size > 0) this.startSweeping();
    }, SWEEP_MS);
    this.sweepTimer.unref();
  }

  private remove(endpointId: string, waiter: TakeWaiter): void {
    const queue = this.queues.get(endpointId);
    const at = queue?.indexOf(waiter) ?? -1;
    if (queue && at >= 0) queue.splice(at, 1);
    if (queue && queue.length === 0) this.queues.delete(endpointId);
  }

  /**
   * Claims for the waiters at the head in one call and settles those that got jobs (or gave up
   * meanwhile); true when every one of them got all it asked for, so the store may hold more.
   */
  private async serve(endpointId: string): Promise<boolean> {
    const queue = this.queues.get(endpointId);
    if (!queue || queue.length === 0) return false;
    const batch: TakeWaiter[] = [];
    let wanted = 0;
    for (let i = 0; i < queue.length; ) {
      const w = queue[i]!;
      if (batch.length === MAX_TAKERS || (batch.length > 0 && wanted + w.limit > MAX_CLAIM)) break;
      // A worker that cannot run what it gets (stopping, silent) is answered empty (it leaves
      // the queue, so `i` stays), never claimed for.
      if (!w.claiming && !this.mayReceive(w)) {
        this.answerEmpty(endpointId, w);
        continue;
      }
      batch.push(w);
      wanted += w.limit;
      i++;
    }
    if (batch.length === 0) return false;
    for (const w of batch) w.claiming = true;
    let claimed: JobWithInput[][];
    try {
      claimed = await this.options.claim(endpointId, batch.map((w) => ({ workerId: w.workerId, limit: w.limit })));
    } catch (err) {
      for (const w of batch) {
        w.claiming = false;
        this.remove(endpointId, w);
        w.settle([]);
      }
      throw err;
    }
    let got = 0;
    const unclaims: Promise<void>[] = [];
    batch.forEach((w, i) => {
      w.claiming = false;
      const jobs = claimed[i] ?? [];
      got += jobs.length;
      if (jobs.length > 0 && (w.signal.aborted || !this.mayReceive(w))) {
        // The client went away during the claim, or its worker is stopping or went silent: its jobs go back to the queue.
        this.remove(endpointId, w);
        w.settle([]);
        unclaims.push(this.options.unclaim(endpointId, w.workerId, jobs));
      } else if (jobs.length > 0 || w.expired) {
        this.remove(endpointId, w);
        w.settle(jobs);
      }
    });
    await Promise.all(unclaims);
    // Jobs that went back must reach the waiters still queued: claim again.
    return got === wanted || unclaims.length > 0;
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
        while (await this.serve(endpointId));
      } while (this.again.has(endpointId));
    } catch (err) {
      this.options.onError(err);
    } finally {
      this.pumping.delete(endpointId);
    }
  }
}
