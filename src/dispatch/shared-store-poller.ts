import type { App } from '../app.js';

export interface SharedStorePollerOptions {
  /** How often waiting job-take long-polls re-check the store (default 1 s). */
  pumpMs?: number;
  /** How often workers long-polling here are marked alive (default 5 s; must stay well under workerLostMs). */
  touchMs?: number;
}

/**
 * For gateways sharing a database: notifications are wake-ups that may be lost, so this
 * gateway's waiting job-takes re-try the store every `pumpMs` (a lost 'jobs-available' only
 * delays). It also marks workers long-polling here as alive, which the reaper does only on
 * the leader. start/stop; a second stop does nothing.
 */
export function createSharedStorePoller(app: App, options: SharedStorePollerOptions = {}) {
  const pumpMs = options.pumpMs ?? 1_000;
  const touchMs = options.touchMs ?? 5_000;
  let pumpTimer: NodeJS.Timeout | undefined;
  let touchTimer: NodeJS.Timeout | undefined;

  function pump(): void {
    for (const endpointId of new Set(app.takeQueue.waitingWorkers().map((w) => w.endpointId))) app.takeQueue.poke(endpointId);
  }

  function touch(): void {
    for (const { endpointId, workerId } of app.takeQueue.waitingWorkers()) {
      app.workers.touch(endpointId, workerId).catch((err: unknown) => app.logger.warn({ err, workerId }, 'worker liveness write failed'));
    }
  }

  return {
    start(): void {
      if (pumpTimer) return;
      pumpTimer = setInterval(pump, pumpMs);
      touchTimer = setInterval(touch, touchMs);
      pumpTimer.unref();
      touchTimer.unref();
    },
    stop(): void {
      clearInterval(pumpTimer);
      clearInterval(touchTimer);
      pumpTimer = undefined;
      touchTimer = undefined;
    },
  };
}
