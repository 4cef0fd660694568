import { randomBytes } from 'node:crypto';
import { join } from 'node:path';
import type { Logger } from 'pino';
import type { GantryConfig } from './config.js';
import { createJobWaiters } from './dispatch/job-waiters.js';
import { createLocalNotifier, type Notifier } from './dispatch/notifier.js';
import { createStopSignals } from './dispatch/stop-signals.js';
import { createTakeQueue } from './dispatch/take-queue.js';
import { createAuth } from './http/auth.js';
import { createRateLimiter } from './http/rate-limit.js';
import { createJobService } from './jobs/job-service.js';
import type { SecretBox } from './jobs/secrets.js';
import { createWorkerService } from './jobs/worker-service.js';
import type { PoolView } from './pool/pool-view.js';
import type { Store } from './store/store.js';

export interface AppOptions {
  config: GantryConfig;
  store: Store;
  logger: Logger;
  secrets: SecretBox;
  notifier?: Notifier;
  now?: () => number;
  /** Signs the URLs of the local image store (default: a random key, URLs valid for this process only). */
  fileSigningKey?: Buffer;
}

/**
 * Wires the parts of one gateway (DESIGN.md §3) and the events between them. No I/O of its
 * own: src/server.ts opens the store, listens and starts the background services.
 */
export function createApp(options: AppOptions) {
  const { config, store, logger, secrets } = options;
  const now = options.now ?? Date.now;
  const notifier = options.notifier ?? createLocalNotifier();
  const waiters = createJobWaiters();
  const stopSignals = createStopSignals();
  const takeQueue = createTakeQueue(
    (endpointId, workerId, limit) => store.claimJobs({ endpointId, workerId, limit, now: now() }),
    async (workerId, jobs) => {
      const returned = await store.returnJobs({ ids: jobs.map((j) => j.id), workerId });
      logger.debug({ workerId, jobs: returned }, 'worker went away during a take; jobs returned to the queue');
    },
    (err) => logger.error({ err }, 'dispatch failed'),
  );
  /** The worker pool's view, set by the autoscaler while it runs on this gateway. */
  const pool: { view: PoolView | null } = { view: null };
  const deps = { store, notifier, waiters, config, secrets, logger, now, pool };
  const jobs = createJobService(deps);
  const workers = createWorkerService({ ...deps, jobs, takeQueue, stopSignals });
  const auth = createAuth(store, now);
  const rateLimiter = createRateLimiter(config.rateLimits, now);

  const unsubscribe = notifier.subscribe((event) => {
    switch (event.type) {
      case 'jobs-available':
        return takeQueue.poke(event.endpointId);
      case 'job-updated':
        return waiters.wake(event.jobId);
      case 'stop-jobs':
        return stopSignals.add(event.workerId, event.jobIds);
      case 'endpoint-changed':
        jobs.invalidateEndpoint(event.endpointId);
        return;
      default:
        return;
    }
  });

  return {
    config,
    store,
    logger,
    secrets,
    notifier,
    now,
    waiters,
    takeQueue,
    stopSignals,
    jobs,
    workers,
    auth,
    rateLimiter,
    pool,
    /** The local object store served at /files (src/http/files.ts). */
    files: { dir: join(config.dataDir, 'files'), signingKey: options.fileSigningKey ?? randomBytes(32) },
    /** Ends every open long-poll (shutdown). */
    closeWaits() {
      unsubscribe();
      takeQueue.closeAll();
      stopSignals.closeAll();
      waiters.closeAll();
    },
  };
}

export type App = ReturnType<typeof createApp>;
