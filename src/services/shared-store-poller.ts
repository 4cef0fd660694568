import type { Logger } from 'pino';
import type { TakeQueue } from '../dispatch/take-queue.js';
import type { WorkerService } from '../jobs/worker-service.js';
import type { Clock } from '../util/clock.js';

/** What the shared-store poller uses. */
export interface SharedStorePollerDeps {
  takeQueue: Pick<TakeQueue, 'pokeAll'>;
  workers: Pick<WorkerService, 'touchWaiting'>;
  logger: Logger;
  clock: Clock;
  /** How often waiting job-take long-polls re-check the store (default 1 s). */
  pumpMs?: number;
  /** How often workers long-polling here are marked alive (default 5 s; must stay well under workerLostMs). */
  touchMs?: number;
}

/** start/stop of the poller; a second stop does nothing. */
export interface SharedStorePoller {
  start(): void;
  stop(): void;
}

/**
 * For gateways sharing a database (every gateway, not only the leader): notifications are
 * wake-ups that may be lost, so this gateway's waiting job-takes re-try the store every
 * `pumpMs` (a lost 'jobs-available' only delays). It also marks workers long-polling here as
 * alive, which the reaper does only on the leader.
 *
 * @example const poller = createSharedStorePoller({ takeQueue, workers, logger, clock: systemClock }); poller.start();
 */
export function createSharedStorePoller(deps: SharedStorePollerDeps): SharedStorePoller {
  const pumpMs = deps.pumpMs ?? 1_000;
  const touchMs = deps.touchMs ?? 5_000;
  /** The pending timer of each loop (index 0: pump, 1: touch). */
  const cancels: (() => void)[] = [];
  let running = false;

  const every = (slot: number, ms: number, fn: () => void): void => {
    const tick = (): void => {
      if (!running) return;
      fn();
      cancels[slot] = deps.clock.after(ms, tick);
    };
    cancels[slot] = deps.clock.after(ms, tick);
  };

  return {
    start(): void {
      if (running) return;
      running = true;
      every(0, pumpMs, () => deps.takeQueue.pokeAll());
      every(1, touchMs, () => {
        deps.workers.touchWaiting().catch((err: unknown) => deps.logger.warn({ err }, 'worker liveness write failed'));
      });
    },
    stop(): void {
      running = false;
      for (const cancel of cancels) cancel();
    },
  };
}
