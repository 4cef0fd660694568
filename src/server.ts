import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Logger } from 'pino';
import { loadConfig, poolStopGraceMs, type GantryConfig } from './config/config.js';
import { createGateway, type Gateway, type GatewayObservers } from './gateway.js';
import { createFileLinks } from './http/file-links.js';
import { createBodyBudget, type BodyBudget } from './http/body.js';
import { connectionCap, guardConnections, type KeyConnections } from './http/connection-guard.js';
import { createReadiness, probeRoutes } from './http/readiness.js';
import { createRequestListener, type GatewayListener } from './http/server.js';
import { setUpImageFeature } from './images/image-feature.js';
import { deriveFileSigningKey, verifyFileSignature } from './images/object-store.js';
import { setUpOpenAiFeature } from './openai/openai-feature.js';
import { setUpConsole } from './console/console-feature.js';
import { createMinuteRecorder, joinObservers } from './console/minute-recorder.js';
import { loadMetricsConfig, type MetricsConfig } from './metrics/metrics-config.js';
import { createMetrics, type Metrics } from './metrics/metrics-feature.js';
import type { JobObserver } from './jobs/job-observer.js';
import { loadTracingConfig } from './tracing/tracing-config.js';
import { createTracing, type Tracing } from './tracing/tracing-feature.js';
import type { KeyService } from './security/keys.js';
import { createSecretBox, loadSecretKey } from './security/secret-box.js';
import { createOutboundFetch, createOutboundPolicy } from './security/outbound.js';
import { WEBHOOK_CONCURRENCY } from './services/webhook-sender.js';
import { createSharedStorePoller } from './services/shared-store-poller.js';
import { openStore } from './store/open-store.js';
import { createDiskSpace } from './store/disk-space.js';
import { createStoreHealth, guardStore } from './store/store-faults.js';
import type { LeaderLock } from './store/store.js';
import { systemClock, type Clock } from './util/clock.js';
import { readFileLimit, type FileLimitRaise } from './util/file-limit.js';
import { createJsonThreads, type JsonThreads } from './util/json-threads.js';
import { createLogger, logFormatFrom } from './util/log.js';

/** How startGantry is configured beyond the environment. */
export interface StartOptions {
  /** Settings over the environment's (tests pass port 0 and a temp dataDir). */
  config?: Partial<GantryConfig>;
  env?: NodeJS.ProcessEnv;
  logger?: Logger;
  /** Time for the background services and the store calls (default: the real clock). */
  clock?: Clock;
  /** /metrics settings over the environment's (GANTRY_METRICS, GANTRY_METRICS_TOKEN). */
  metrics?: Partial<MetricsConfig>;
  /** What `gantry serve` did to the open-file limit before the start (util/file-limit.ts); logged with the connection cap derived from the limit. */
  fileLimit?: FileLimitRaise;
}

/** A running gateway. */
export interface Gantry {
  gateway: Gateway;
  server: Server;
  /** http://host:port, as clients on this machine reach it. */
  url: string;
  port: number;
  /** The admin key, when this start created it (first start without GANTRY_ADMIN_KEY) or it was configured. */
  adminKey: string | null;
  /** Whether this gateway runs the singletons (always on SQLite; one gateway at a time on PostgreSQL). */
  leader: LeaderLock;
  /** The bytes of request bodies being read now, in all and per key, and the pace of refused ones' drains (http/body.ts). */
  bodies: Pick<BodyBudget, 'inFlight' | 'byKey' | 'drains'>;
  /** The threads that parse large request bodies; undefined with GANTRY_JSON_THREADS=0. */
  jsonThreads: JsonThreads | undefined;
  close(): Promise<void>;
}

/**
 * Starts a gateway: opens and migrates the store, makes sure an admin key exists, sets up the
 * features (the image endpoints), serves HTTP and runs the background services — the
 * singletons only while this gateway holds the leader lock.
 *
 * @example const gantry = await startGantry({ config: { port: 0, dataDir: '/tmp/g' } }); await gantry.close();
 */
export async function startGantry(options: StartOptions = {}): Promise<Gantry> {
  const env = options.env ?? process.env;
  const config = loadConfig(env, options.config);
  const metricsConfig = { ...loadMetricsConfig(env), ...options.metrics };
  const logger = options.logger ?? createLogger({ level: config.logLevel, format: logFormatFrom(env, Boolean(process.stdout.isTTY)) });
  const clock = options.clock ?? systemClock;
  // PostgreSQL with DATABASE_URL, else the SQLite file `<dataDir>/gantry.db`.
  const { store, notifier, leaderLock: leader, shared } = openStore(config, env, logger);
  // A refused database (a newer schema) must not leave the store's connections holding the process open.
  await store.migrate().catch(async (err: unknown) => {
    await store.close().catch(() => undefined);
    throw err;
  });
  // A passing store fault (full disk, a restarting database) answers 503 with Retry-After and
  // is logged once per episode; a probe write ends the episode (src/store/store-faults.ts).
  const storeHealth = createStoreHealth({ probe: () => store.probeWrite(clock.now()), logger, clock });
  const guarded = guardStore(store, storeHealth);
  // New jobs are refused before the data directory's disk is full, not after (docs/configuration.md, Disk space).
  const disk = createDiskSpace({ dir: config.dataDir, minFreeBytes: config.diskMinFreeBytes, logger, clock });
  disk.start();
  const secretKey = loadSecretKey(config.dataDir, env);
  // Gateways sharing PostgreSQL wake each other through LISTEN/NOTIFY (docs/postgres.md).
  await notifier.start();
  let url = '';
  // With GANTRY_METRICS=off nothing is wrapped or counted (docs/metrics.md).
  const metrics = metricsConfig.access === 'off' ? undefined : createMetrics();
  // OpenTelemetry traces only when the OTEL_* variables ask for them (docs/observability.md): otherwise nothing is made or wrapped.
  const tracing = startTracing(env, clock, logger);
  // Per-minute job aggregates for the console's charts (docs/console.md).
  const minutes = createMinuteRecorder(clock.now);
  const fileSigningKey = deriveFileSigningKey(secretKey);
  const gateway = createGateway({
    config,
    store: metrics ? metrics.store.wrap(guarded) : guarded,
    notifier,
    logger,
    secrets: createSecretBox(secretKey),
    clock,
    baseUrl: () => config.publicUrl ?? url,
    // Links to the image endpoints' files as each client reached the gateway (GANTRY_PUBLIC_URL unset).
    fileLinks: createFileLinks({ publicUrl: config.publicUrl, verify: (key, expires, sig) => verifyFileSignature(fileSigningKey, key, expires, sig, clock.now()) }),
    disk,
    observers: observersOf(config, minutes.observer, metrics, tracing),
  });
  const adminKey = await ensureAdminKey(gateway.keys, config.adminKey);
  const images = await setUpImageFeature({ config, endpoints: gateway.endpoints, routes: gateway.routes, builtIns: gateway.builtIns, fileSigningKey, logger, now: clock.now, ...(shared ? { files: guarded } : {}) });
  const openai = setUpOpenAiFeature({ routes: gateway.routes, ...gateway.http });
  await setUpConsole({ routes: gateway.routes, http: gateway.http, publicUrl: config.publicUrl, now: clock.now, minutes, consolePassword: config.consolePassword, secretKey });
  minutes.start({ store, endpoints: gateway.endpoints, logger, clock });
  metrics?.serve({ config: metricsConfig, routes: gateway.routes, keys: gateway.keys, endpoints: gateway.endpoints, jobs: gateway.jobs, isLeader: () => leader.isLeader(), pool: gateway.autoscaler.view });
  const readiness = createReadiness({ store, health: storeHealth, disk, logger });

  const { bodies, jsonThreads } = bodyReading(config);
  gateway.routes.add(...probeRoutes(readiness));
  const listener = createRequestListener(gateway.http, gateway.routes, { bodies, ...(metrics ? { observer: metrics.http } : {}) });
  const server = createServer({ keepAliveTimeout: 65_000, requestTimeout: 0, headersTimeout: 60_000 }, listener);
  capConnections(server, config, store.kind, logger, options.fileLimit, listener.connections);
  const port = await listen(server, config);
  url = `http://${config.host === '0.0.0.0' || config.host === '::' ? '127.0.0.1' : config.host}:${port}`;
  images.startWorkers(config.publicUrl ?? url);
  const singletons = runOnLeader(leader, gateway, logger);
  const poller = shared ? createSharedStorePoller({ takeQueue: gateway.takeQueue, workers: gateway.workers, logger, clock }) : undefined;
  poller?.start();
  logger.info({ url, dataDir: config.dataDir, store: store.kind, metrics: metricsConfig.access }, 'gantry listening');

  let closing: Promise<void> | undefined;
  const stopGraceMs = poolStopGraceMs(config);
  const close = (): Promise<void> => shutDown({ logger, readiness, listener, gateway, singletons, poller, images, openai, minutes, server, notifier, store, storeHealth, disk, stopGraceMs, jsonThreads, tracing });
  return { gateway, server, url, port, adminKey, leader, bodies, jsonThreads, close: () => (closing ??= close()) };
}

/** The tracing feature when the OTEL_* variables turn it on (tracing/tracing-config.ts); undefined otherwise. */
function startTracing(env: NodeJS.ProcessEnv, clock: Clock, logger: Logger): Tracing | undefined {
  const config = loadTracingConfig(env);
  return config ? createTracing(config, { now: clock.now, logger }) : undefined;
}

/**
 * What the features watch in the gateway: the console's minutes, the metrics and the traces
 * observe the jobs; the webhook sender's fetch is counted by the metrics and traced by the
 * tracing feature (neither: the sender's own); the tracing feature makes each job's submit span.
 */
function observersOf(config: GantryConfig, minutes: JobObserver, metrics: Metrics | undefined, tracing: Tracing | undefined): GatewayObservers {
  const observers: GatewayObservers = { jobs: joinObservers(joinObservers(minutes, metrics?.jobs), tracing?.jobs) };
  if (metrics || tracing) {
    let wrapped = createOutboundFetch(createOutboundPolicy(config.outboundAllow), { maxSockets: WEBHOOK_CONCURRENCY });
    if (metrics) wrapped = metrics.webhooks.wrapFetch(wrapped);
    if (tracing) wrapped = tracing.wrapFetch(wrapped);
    observers.webhookFetch = wrapped;
  }
  if (tracing) observers.submits = tracing.submits;
  return observers;
}

/**
 * Caps the connections by the open-file limit as well as GANTRY_MAX_CONNECTIONS (connection-guard.ts)
 * and logs what was chosen, with the limit and whether `gantry serve` raised it; each key may
 * hold half of it with requests in progress (`shares`).
 */
function capConnections(server: Server, config: GantryConfig, storeKind: string, logger: Logger, raise: FileLimitRaise | undefined, shares: KeyConnections): void {
  const limit = raise?.limit ?? readFileLimit();
  const cap = connectionCap({ configured: config.maxConnections, fileLimit: limit?.soft, storeConnections: storeKind === 'postgres' ? config.pgPoolSize + 2 : 0, webhookSockets: WEBHOOK_CONCURRENCY });
  const guard = guardConnections(server, cap);
  shares.setCap(cap);
  const fields = {
    maxConnections: cap,
    configuredMaxConnections: config.maxConnections,
    idleClosedPast: guard.roomAt,
    openFiles: limit ?? null,
    ...(raise ? { openFilesRaised: raise.outcome, softBefore: raise.softBefore, ...(raise.reason ? { reason: raise.reason } : {}) } : {}),
  };
  const message = cap < config.maxConnections ? 'connections capped by the open-file limit' : 'connections capped by GANTRY_MAX_CONNECTIONS';
  if (raise?.outcome === 'not-raised') logger.warn(fields, `${message}; the soft open-file limit could not be raised to the hard one`);
  else logger.info(fields, message);
}

/** How request bodies are read: the budget every read shares, and the threads that parse large ones (none with GANTRY_JSON_THREADS=0). */
function bodyReading(config: GantryConfig): { bodies: BodyBudget; jsonThreads: JsonThreads | undefined } {
  const jsonThreads = config.jsonThreads > 0 ? createJsonThreads(config.jsonThreads) : undefined;
  const bodies = createBodyBudget({
    readTimeoutMs: config.bodyReadTimeoutMs,
    bytesInFlight: config.bodyBytesInFlight,
    drainBytesPerSecond: config.bodyDrainBytesPerSecond,
    ...(jsonThreads ? { offload: { threads: jsonThreads, minBytes: config.jsonThreadMinBytes } } : {}),
  });
  return { bodies, jsonThreads };
}

/** What a shutdown stops, in its order. */
interface Running {
  logger: Logger;
  readiness: { closing(): void };
  listener: GatewayListener;
  gateway: Gateway;
  singletons: { stop(): Promise<void> };
  poller: { stop(): void } | undefined;
  images: { stop(): void };
  openai: { shutDown(graceMs: number): void };
  minutes: { stop(): Promise<void> };
  server: Server;
  notifier: { close(): Promise<void> };
  store: { close(): Promise<void> };
  /** How long workers get to finish their jobs: the pool's stop grace, for hand-started workers too. */
  stopGraceMs: number;
  storeHealth: { stop(): void };
  disk: { stop(): Promise<void> };
  jsonThreads: JsonThreads | undefined;
  /** Exports the spans still waiting; undefined with tracing off. */
  tracing: Pick<Tracing, 'shutdown'> | undefined;
}

/**
 * SIGINT / SIGTERM (`gantry serve`) and `close()`: at once no more jobs are handed out and
 * waiting calls answer; the singletons stop (the autoscaler drains its workers while their
 * results are still taken) while the jobs of the other workers connected here (started by
 * hand) finish, both within the stop grace; requests in flight finish (up to
 * SHUTDOWN_GRACE_MS); then the connections, the notifier and the store close. The start and
 * end are logged.
 */
async function shutDown(r: Running): Promise<void> {
  const began = Date.now();
  r.logger.info({ inFlight: r.listener.inFlight() }, 'shutdown started: no more jobs handed out, waiting calls answered, requests in flight finishing');
  r.readiness.closing();
  // The jobs of the workers pinging this gateway (hand-started ones too) get the stop grace.
  const connected = finishConnectedJobs(r);
  // At once: job-take answers 204 and hands out nothing; runsync / status-sync / stream answer now.
  r.listener.beginShutdown();
  r.gateway.closeWaits();
  await Promise.all([r.singletons.stop(), connected]);
  r.poller?.stop();
  r.images.stop();
  r.gateway.closeWaits();
  await r.minutes.stop().catch((err: unknown) => r.logger.warn({ err }, 'writing the last per-minute job aggregates failed'));
  const closed = new Promise<void>((resolve) => r.server.close(() => resolve()));
  r.server.closeIdleConnections();
  // OpenAI requests wait for their jobs until just before the grace ends, then answer 503 (docs/openai.md).
  r.openai.shutDown(SHUTDOWN_GRACE_MS);
  await finishInFlight(r.listener, SHUTDOWN_GRACE_MS);
  r.server.closeAllConnections();
  await closed;
  await r.notifier.close();
  r.storeHealth.stop();
  await r.disk.stop();
  await r.jsonThreads?.close();
  await r.tracing?.shutdown();
  await r.store.close();
  r.logger.info({ ms: Date.now() - began }, 'shutdown finished');
}

/** Waits, within the stop grace, for the jobs running on workers connected to this gateway, so their results are taken before it goes. */
async function finishConnectedJobs(r: Running): Promise<void> {
  try {
    const left = await r.gateway.workers.finishConnected(r.stopGraceMs);
    if (left.length > 0) r.logger.warn({ jobs: left, graceMs: r.stopGraceMs }, 'shutdown: jobs of connected workers still running after the stop grace; their results go to the next gateway');
  } catch (err) {
    r.logger.warn({ err }, 'shutdown: could not wait for the jobs of connected workers');
  }
}

/** How long a shutdown waits for requests in flight (a result being posted, a body being read) before closing their connections. */
export const SHUTDOWN_GRACE_MS = 10_000;

/** Resolves once no request is in flight, or after `graceMs`. */
async function finishInFlight(listener: GatewayListener, graceMs: number): Promise<void> {
  const deadline = Date.now() + graceMs;
  while (listener.inFlight() > 0 && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 20));
}

function listen(server: Server, config: GantryConfig): Promise<number> {
  return new Promise<number>((resolve, reject) => {
    server.once('error', reject);
    server.listen(config.port, config.host, () => {
      server.off('error', reject);
      resolve((server.address() as AddressInfo).port);
    });
  });
}

/**
 * Runs the singletons (autoscaler, reaper, webhook sender, image prepuller) while this gateway holds the leader
 * lock (always on SQLite; docs/postgres.md). `stop` gives the lock up and waits for them.
 */
function runOnLeader(leader: LeaderLock, gateway: Gateway, logger: Logger): { stop(): Promise<void> } {
  const singletons = [gateway.autoscaler, gateway.reaper, gateway.webhooks, gateway.prepuller];
  let transition = Promise.resolve();
  leader.onChange((isLeader) => {
    transition = transition
      .then(async () => {
        if (isLeader) for (const s of singletons) s.start();
        else for (const s of singletons) await s.stop();
      })
      .catch((err: unknown) => logger.error({ err }, 'starting or stopping the singletons failed'));
  });
  leader.start();
  return {
    async stop() {
      await leader.stop();
      await transition;
      for (const s of singletons) await s.stop();
    },
  };
}

/**
 * GANTRY_ADMIN_KEY is installed if it is not stored yet, revoking an earlier value; otherwise, with no admin key at all,
 * one is generated and returned so the caller can print it once.
 */
async function ensureAdminKey(keys: KeyService, configured: string | null): Promise<string | null> {
  if (configured) {
    // A new GANTRY_ADMIN_KEY replaces the old one and the key a first start generated (docs/security.md).
    await keys.install({ name: 'admin (GANTRY_ADMIN_KEY)', scopes: ['admin'], endpoints: null }, configured, ['admin (GANTRY_ADMIN_KEY)', 'admin (first start)']);
    return configured;
  }
  if ((await keys.countWithScope('admin')) > 0) return null;
  return (await keys.create({ name: 'admin (first start)', scopes: ['admin'], endpoints: null })).key;
}
