import type { Logger } from 'pino';
import { workerPingIntervalMs, type GantryConfig } from './config/config.js';
import { createJobWaiters, type JobWaiters } from './dispatch/job-waiters.js';
import { createStopSignals, type StopSignals } from './dispatch/stop-signals.js';
import { createTakeQueue, type TakeQueue } from './dispatch/take-queue.js';
import { createWorkerLiveness, type WorkerLiveness } from './dispatch/worker-liveness.js';
import { createClientAddress } from './http/client-address.js';
import { createRateLimiter } from './http/rate-limit.js';
import { adminRoutes } from './http/admin-routes.js';
import { clientRoutes } from './http/client-routes.js';
import type { FileLinks } from './http/file-links.js';
import { createRouteTable, type RouteTable } from './http/route-table.js';
import { createLogFeed } from './http/log-feed.js';
import type { HttpServices } from './http/server.js';
import { workerRoutes } from './http/worker-routes.js';
import { createEndpointService, type EndpointService } from './jobs/endpoint-service.js';
import type { WorkerSettings } from './jobs/endpoint-settings.js';
import { joinJobObservers, observeTransitions, type JobObserver, type SubmitTracer } from './jobs/job-observer.js';
import { createJobService, type JobService } from './jobs/job-service.js';
import type { PoolView } from './jobs/pool-view.js';
import { QueueGauge, type SpaceCheck } from './jobs/queue-gauge.js';
import { createMeterOf } from './jobs/job-meters.js';
import { createKeyQuotas } from './jobs/key-quotas.js';
import { createJobTransitions, type JobTransitions } from './jobs/transitions.js';
import { createWorkerService, type WorkerService } from './jobs/worker-service.js';
import type { Notifier } from './model/events.js';
import { dockerInstance } from './config/docker-config.js';
import { createDockerDriver } from './pool/docker/docker-driver.js';
import { createDriverSet } from './pool/driver-set.js';
import { createLocalProcessDriver } from './pool/local-process-driver.js';
import type { WorkerDriver } from './pool/driver.js';
import { createKeyService, type KeyService } from './security/keys.js';
import { createAuditLog, type AuditLog } from './security/audit-log.js';
import { createRegistryCredentials, type RegistryCredentials } from './security/registry-credentials.js';
import type { SecretBox } from './security/secret-box.js';
import { createWorkerMeters } from './pool/worker-meters.js';
import { createJobHolders } from './pool/job-holders.js';
import { createLogWriter, type LogWriter } from './pool/log-writer.js';
import { createAutoscaler, type Autoscaler } from './services/autoscaler.js';
import { createImagePrepuller, type ImagePrepuller } from './services/image-prepuller.js';
import { createReaper, type Reaper } from './services/reaper.js';
import { createOutboundPolicy } from './security/outbound.js';
import { createWebhookSender, type WebhookSender } from './services/webhook-sender.js';
import type { Store } from './store/store.js';
import { systemClock, type Clock } from './util/clock.js';
import { join } from 'node:path';

/** What a gateway is made of: its settings, store, event carrier, logger, secrets and clock. */
export interface GatewayOptions {
  config: GantryConfig;
  store: Store;
  notifier: Notifier;
  logger: Logger;
  secrets: SecretBox;
  /** Time for the services (default: the real clock). */
  clock?: Clock;
  /** How pool workers are started (default: local processes with pid files under `<dataDir>/pool`, and containers on the Docker hosts of config.docker). */
  driver?: WorkerDriver;
  /** The gateway's URL as workers reach it; known once the server listens. */
  baseUrl(): string;
  /** Who is told what happens (the metrics feature); none by default, and then nothing is wrapped. */
  observers?: GatewayObservers;
  /** The gateway's own file links as each client reached it (http/file-links.ts); none: answers as stored. */
  fileLinks?: FileLinks;
  /** The data directory's free space, checked before a job is queued (store/disk-space.ts); none: not checked. */
  disk?: SpaceCheck;
}

/** What a feature may watch in a gateway without the core importing it (docs/metrics.md). */
export interface GatewayObservers {
  /** Told of every committed job transition. */
  jobs?: JobObserver;
  /** The fetch the webhook sender calls webhooks with (a wrapper that counts outcomes, one that traces deliveries). */
  webhookFetch?: typeof fetch;
  /** Makes each new job's submit span and trace context (the tracing feature); none: nothing traced, nothing stored. */
  submits?: SubmitTracer;
}

/** The parts of one gateway, wired: what src/server.ts runs and serves. */
export interface Gateway {
  readonly keys: KeyService;
  readonly endpoints: EndpointService;
  /** Registry logins saved once and named by endpoints' `worker.registryCredentials`. */
  readonly registry: RegistryCredentials;
  /** Who changed what through the admin API, and every console sign-in. */
  readonly audit: AuditLog;
  readonly transitions: JobTransitions;
  readonly jobs: JobService;
  readonly workers: WorkerService;
  readonly takeQueue: TakeQueue;
  /** The singletons, run by the leader only (src/server.ts starts and stops them). */
  readonly autoscaler: Autoscaler;
  readonly reaper: Reaper;
  readonly webhooks: WebhookSender;
  /** Pulls the images of endpoints with `worker.prepull` onto the hosts ahead of need. */
  readonly prepuller: ImagePrepuller;
  /** Stores the pool workers' lines in batches (docs/logs.md): its counts of lines written and dropped. */
  readonly logs: Pick<LogWriter, 'flush' | 'stats'>;
  /** Worker settings features provide for their endpoints (the image workers). */
  readonly builtIns: Map<string, WorkerSettings>;
  /** The one route table: the client, worker and admin routes, and those features add (/files, OpenAI, …). */
  readonly routes: RouteTable;
  /** What the HTTP layer calls. */
  readonly http: HttpServices;
  /** Ends every open long-poll and stops listening to events (shutdown). */
  closeWaits(): void;
}

/**
 * Wires the parts of one gateway (docs/architecture.md) and the events between them. No I/O of
 * its own: src/server.ts opens the store, listens and runs the background services.
 *
 * @example const gateway = createGateway({ config, store, notifier, logger, secrets, baseUrl: () => url });
 */
export function createGateway(options: GatewayOptions): Gateway {
  const { config, store, notifier, logger, secrets } = options;
  const clock = options.clock ?? systemClock;
  const now = clock.now;
  const keys = createKeyService({ store, now });
  const endpoints = createEndpointService({ store, notifier, secrets, now });
  const registry = createRegistryCredentials({ store, secrets, now });
  const plainTransitions = createJobTransitions({ store, notifier, logger, now, meterOf: createMeterOf({ endpoints, store }) });
  // Worker logs (docs/logs.md): which job each pool worker holds, and the batched writer of their lines.
  const holders = createJobHolders(now);
  const logs = createLogWriter({ store, clock, logger, notifier, limits: { linesPerSecond: config.logLinesPerSecond, burstLines: config.logBurstLines } });
  const transitions = observeTransitions(plainTransitions, joinJobObservers(holders.observer, options.observers?.jobs));
  // Which workers may still be handed jobs: not those the pool is stopping, nor silent ones (docs/worker-protocol.md).
  const liveness = createWorkerLiveness({ now, defaultPingIntervalMs: workerPingIntervalMs(config) });
  const takeQueue = workerTakeQueue(transitions, liveness, logger, now);
  const builtIns = new Map<string, WorkerSettings>();
  const driver = options.driver ?? createDrivers(options, clock, registry);
  // meters: the pools' worker seconds (docs/api.md, "Usage").
  const autoscaler = createAutoscaler({ store, endpoints, keys, transitions, notifier, driver, builtIns, baseUrl: options.baseUrl, config, logger, clock, meters: createWorkerMeters({ store, clock, logger }), logs, holders });
  const pool: PoolView = autoscaler.view;
  const prepuller = createImagePrepuller({ endpoints, driver, notifier, everyMs: Math.max(config.autoscalerIntervalMs, 1_000), logger, clock });
  const waiters = createJobWaiters();
  const stopSignals = createStopSignals();
  const gauge = new QueueGauge({ store, factor: config.queueLimitFactor, maxInputBytes: config.queueMaxInputBytes, ...(options.disk ? { space: options.disk } : {}), logger, now });
  const outbound = createOutboundPolicy(config.outboundAllow);
  const quotas = createKeyQuotas({ store, now }); // budgets and job caps per key, checked at each submit
  const tracer = options.observers?.submits;
  const jobs = createJobService({ store, transitions, endpoints, gauge, waiters, pool, secrets, config, outbound, quotas, ...(tracer ? { tracer } : {}), now });
  const workers = createWorkerService({ store, transitions, takeQueue, stopSignals, liveness, notifier, secrets, config, logger, now });
  const rateLimiter = createRateLimiter(config.rateLimits, now);
  const audit = createAuditLog({ store, logger, now }); // admin changes and console sign-ins (docs/security.md)
  const reaper = createReaper({ transitions, workers, store, config, logger, clock });
  const webhooks = createWebhookSender({ store, endpoints, secrets, notifier, config, logger, clock, outbound, ...(options.observers?.webhookFetch ? { fetch: options.observers.webhookFetch } : {}) });
  const unsubscribe = subscribeDispatch(notifier, { takeQueue, waiters, stopSignals, endpoints, liveness, workers });
  const http: HttpServices = { jobs, workers, endpoints, keys, quotas, registry, rateLimiter, pool, workerRows: store, usage: store, logs: store, logFeed: createLogFeed({ store, clock, logger, notifier }), config, logger, now, clientAddress: createClientAddress(config.trustedProxies), audit, ...(options.fileLinks ? { fileLinks: options.fileLinks } : {}) };
  const routes = coreRoutes(http);
  return {
    keys,
    endpoints,
    registry,
    audit,
    transitions,
    jobs,
    workers,
    takeQueue,
    autoscaler,
    reaper,
    webhooks,
    prepuller,
    logs,
    builtIns,
    routes,
    http,
    closeWaits() {
      unsubscribe();
      takeQueue.closeAll();
      stopSignals.closeAll();
      waiters.closeAll();
    },
  };
}

/** The queue of workers' takes: claims jobs for them, and returns those a worker gone mid-take did not get. */
function workerTakeQueue(transitions: JobTransitions, liveness: WorkerLiveness, logger: Logger, now: () => number): TakeQueue {
  return createTakeQueue({
    liveness,
    now,
    claim: (endpointId, takers) => transitions.claim(endpointId, takers),
    unclaim: async (endpointId, workerId, jobs) => {
      const returned = await transitions.returnUntaken(endpointId, workerId, jobs.map((j) => j.id));
      logger.debug({ workerId, jobs: returned }, 'worker went away during a take; jobs returned to the queue');
    },
    onError: (err) => logger.error({ err }, 'dispatch failed'),
  });
}

/** The route table with the client, worker and admin routes; features add theirs later. */
function coreRoutes(http: HttpServices): RouteTable {
  const routes = createRouteTable();
  routes.add(...clientRoutes(http), ...workerRoutes(http), ...adminRoutes(http));
  return routes;
}

/**
 * The default drivers: local processes, with pid files under the data folder so the next
 * start stops workers a killed gateway left behind; and containers on the Docker hosts of
 * config.docker, labelled with this installation, so the same holds for them.
 */
function createDrivers(options: GatewayOptions, clock: Clock, registry: RegistryCredentials): WorkerDriver {
  const { config, logger } = options;
  const container = createDockerDriver({
    config: config.docker,
    instance: config.docker.instance ?? dockerInstance({}, config.dataDir),
    publicUrl: config.publicUrl,
    localUrl: options.baseUrl,
    registryLogin: (id) => registry.login(id),
    logger,
    clock,
  });
  return createDriverSet({ process: createLocalProcessDriver({ stateDir: join(config.dataDir, 'pool') }), container });
}

/** Events → the waiting parts of this gateway: job-take long-polls, job waiters, stop lists, caches. */
function subscribeDispatch(
  notifier: Notifier,
  parts: { takeQueue: TakeQueue; waiters: JobWaiters; stopSignals: StopSignals; endpoints: EndpointService; liveness: WorkerLiveness; workers: Pick<WorkerService, 'resumed'> },
): () => void {
  return notifier.subscribe((event) => {
    switch (event.type) {
      case 'jobs-available':
        return parts.takeQueue.poke(event.endpointId);
      case 'job-updated':
        return parts.waiters.wake(event.jobId);
      case 'stop-jobs':
        return parts.stopSignals.add(event.workerId, event.jobIds);
      case 'endpoint-changed':
        return parts.endpoints.forget(event.endpointId);
      case 'worker-stopping':
        // Marked first, so a take arriving between the two answers at once too.
        parts.liveness.markStopping(event.workerId);
        parts.takeQueue.release(event.endpointId, event.workerId);
        return parts.stopSignals.release(event.workerId);
      case 'worker-resuming':
        parts.workers.resumed(event.workerId);
        return parts.liveness.resumed(event.workerId);
      default:
        return;
    }
  });
}
