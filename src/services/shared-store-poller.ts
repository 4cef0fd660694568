import type { Logger } from 'pino';
import type { TakeQueue } from '../dispatch/take-queue.js';
import type { WorkerService } from '../jobs/worker-service.js';
import type { Clock } from '../util/clock.js';
import { periodic } from '../util/periodic.js';

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
  const { logger, clock } = deps;
  const loops = [
    periodic({ name: 'job-take pump', everyMs: deps.pumpMs ?? 1_000, pass: () => deps.takeQueue.pokeAll(), logger, clock }),
    periodic({
      name: 'worker liveness',
      everyMs: deps.touchMs ?? 5_000,
      pass: async () => {
        await deps.workers.touchWaiting().catch((err: unknown) => logger.warn({ err }, 'worker liveness write failed'));
      },
      logger,
      clock,
    }),
  ];
  return {
    start: () => loops.forEach((loop) => loop.start()),
    stop: () => loops.forEach((loop) => void loop.stop()),
  };
}
