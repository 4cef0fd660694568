import { readFileSync } from 'node:fs';
import { availableParallelism } from 'node:os';
import { isAddressOrBlock } from '../util/address-blocks.js';
import { DOCKER_DEFAULTS, dockerInstance, loadDockerConfig, type DockerConfig } from './docker-config.js';
import { IMAGE_DEFAULTS, loadImageConfig, type ImageConfig } from './image-config.js';

/**
 * One schema for the gateway's settings: environment variables with defaults in one place.
 * A bad value fails fast at start-up with the variable's name; nothing silently falls back.
 * docs/configuration.md lists every setting.
 */
export interface GantryConfig {
  /** TCP port (PORT). 0 picks a free port. */
  port: number;
  /** Interface to listen on (GANTRY_HOST). */
  host: string;
  /** Folder of the SQLite file, the secret key and other local state (GANTRY_DATA_DIR). */
  dataDir: string;
  /** Admin key to install on start (GANTRY_ADMIN_KEY); when absent and no admin key exists one is generated and printed once. */
  adminKey: string | null;
  /** A password that signs in to the console as admin (GANTRY_CONSOLE_PASSWORD, or the file GANTRY_CONSOLE_PASSWORD_FILE names); null: admin keys only. */
  consolePassword: string | null;
  /** Base URL that workers started by Gantry and links in responses use (GANTRY_PUBLIC_URL). */
  publicUrl: string | null;
  /** pino level (GANTRY_LOG_LEVEL): fatal, error, warn, info, debug, trace, silent. */
  logLevel: string;
  /** Per-endpoint rate limits of the spec's table (GANTRY_RATE_LIMITS=on|off). */
  rateLimits: boolean;
  /** 429 when inQueue > 50 and inQueue > workersMax × this factor (GANTRY_QUEUE_LIMIT_FACTOR). */
  queueLimitFactor: number;
  /** 429 when an endpoint's queued jobs hold this many bytes of input (GANTRY_QUEUE_MAX_INPUT_BYTES). */
  queueMaxInputBytes: number;
  /** New jobs answer 503 while the data directory has less free space than this (GANTRY_DISK_MIN_FREE_BYTES); 0: no check. */
  diskMinFreeBytes: number;
  /** How long an empty job-take / job-stop long-poll is held before 204 (GANTRY_JOB_TAKE_WAIT_MS). */
  jobTakeWaitMs: number;
  /** A worker not heard from for this long loses its jobs (GANTRY_WORKER_LOST_MS). */
  workerLostMs: number;
  /** How often the reaper looks for timeouts, expiries and lost workers (GANTRY_REAPER_INTERVAL_MS). */
  reaperIntervalMs: number;
  /** Retention after an async job ends (GANTRY_ASYNC_RETENTION_MS) and a sync one (GANTRY_SYNC_RETENTION_MS). */
  asyncRetentionMs: number;
  syncRetentionMs: number;
  /** Days the console charts' per-minute aggregates are kept (GANTRY_MINUTES_KEEP_DAYS); at least the charts' longest span (1 day). */
  minutesKeepDays: number;
  /** Days pool workers' log lines are kept in the store (GANTRY_LOG_KEEP_DAYS). */
  logKeepDays: number;
  /** Lines of worker logs kept per endpoint, the oldest deleted first (GANTRY_LOG_MAX_LINES_PER_ENDPOINT). */
  logMaxLinesPerEndpoint: number;
  /** Bytes of worker log lines kept per endpoint (their UTF-8 text), the oldest deleted first (GANTRY_LOG_MAX_BYTES_PER_ENDPOINT). */
  logMaxBytesPerEndpoint: number;
  /** Lines a second each pool worker may print into the store over time; more are counted and dropped (GANTRY_LOG_LINES_PER_SECOND). */
  logLinesPerSecond: number;
  /** The burst of lines a worker may print at once beyond that rate (GANTRY_LOG_BURST_LINES). */
  logBurstLines: number;
  /** Days audit log entries are kept (GANTRY_AUDIT_KEEP_DAYS); the leader's reaper deletes older ones. */
  auditKeepDays: number;
  /** Delay between webhook attempts (GANTRY_WEBHOOK_RETRY_MS); attempts are 1 + 2 retries. */
  webhookRetryMs: number;
  /** Request timeout of one webhook call (GANTRY_WEBHOOK_TIMEOUT_MS). */
  webhookTimeoutMs: number;
  /** CIDRs, addresses and host names that webhooks and job S3 endpoints may reach despite the outbound policy (GANTRY_OUTBOUND_ALLOW, comma-separated; docs/security.md). */
  outboundAllow: string[];
  /** Addresses or CIDR blocks of the reverse proxies whose X-Forwarded-For is believed (GANTRY_TRUSTED_PROXIES). */
  trustedProxies: string[];
  /** Connections each gateway keeps to PostgreSQL (GANTRY_PG_POOL_SIZE); unused on SQLite. */
  pgPoolSize: number;
  /** SQLite: the WAL size in MB past which the checkpointer truncates it (GANTRY_SQLITE_WAL_LIMIT_MB). */
  sqliteWalLimitMb: number;
  /** How often the autoscaler sizes the worker pools (GANTRY_AUTOSCALER_INTERVAL_MS); it also reacts to events at once. */
  autoscalerIntervalMs: number;
  /** How long a pool worker told to stop (SIGTERM) may finish its jobs before SIGKILL (GANTRY_WORKER_STOP_GRACE_MS). */
  workerStopGraceMs: number;
  /** First wait before a crashed pool worker is started again; doubles per failure up to 60 s (GANTRY_WORKER_RESTART_BACKOFF_MS). */
  workerRestartBackoffMs: number;
  /** How many stopped pool workers each endpoint remembers with their logs (GANTRY_STOPPED_WORKERS_KEPT); 0: none. */
  stoppedWorkersKept: number;
  /** How long a stopped pool worker and its log are remembered (GANTRY_STOPPED_WORKERS_KEPT_MS); 0: not at all. */
  stoppedWorkersKeptMs: number;
  /** A request body not fully received this long after its headers is refused with 408 (GANTRY_BODY_READ_TIMEOUT_MS). */
  bodyReadTimeoutMs: number;
  /** Total bytes of request bodies being read at once, over all requests; past it 503 with Retry-After (GANTRY_BODY_BYTES_IN_FLIGHT). */
  bodyBytesInFlight: number;
  /** Bytes a second read and dropped of refused bodies, all together; a key's at most half (GANTRY_BODY_DRAIN_BYTES_PER_SECOND). */
  bodyDrainBytesPerSecond: number;
  /**
   * Bytes of one job's stream chunks buffered and not yet delivered to a reader; a worker's post
   * past it is refused (413 STREAM_BUFFER_FULL) and that run's stream is cut (GANTRY_STREAM_BUFFER_BYTES).
   */
  streamBufferBytes: number;
  /** Open client connections the gateway accepts at once; more are closed at once (GANTRY_MAX_CONNECTIONS). */
  maxConnections: number;
  /** Threads that parse large request bodies off the event loop (GANTRY_JSON_THREADS); 0: every body is parsed on the event loop. */
  jsonThreads: number;
  /** Bodies of at least this many bytes are parsed on those threads (GANTRY_JSON_THREAD_MIN_BYTES). */
  jsonThreadMinBytes: number;
  /** The public image endpoints: ids, workers, model folders, image store (GANTRY_IMAGE_*, GANTRY_S3_*). */
  images: ImageConfig;
  /** The Docker driver of the worker pool: hosts, their health checks, the installation label (GANTRY_DOCKER_*). */
  docker: DockerConfig;
}

export const DEFAULTS: GantryConfig = {
  port: 8080,
  host: '0.0.0.0',
  dataDir: './data',
  adminKey: null,
  consolePassword: null,
  publicUrl: null,
  logLevel: 'info',
  rateLimits: true,
  queueLimitFactor: 500,
  queueMaxInputBytes: 1_000_000_000,
  diskMinFreeBytes: 1_000_000_000,
  jobTakeWaitMs: 30_000,
  workerLostMs: 30_000,
  reaperIntervalMs: 1_000,
  asyncRetentionMs: 30 * 60_000,
  syncRetentionMs: 60_000,
  minutesKeepDays: 7,
  logKeepDays: 7,
  logMaxLinesPerEndpoint: 200_000,
  logMaxBytesPerEndpoint: 100_000_000,
  logLinesPerSecond: 100,
  logBurstLines: 1_000,
  auditKeepDays: 90,
  webhookRetryMs: 10_000,
  webhookTimeoutMs: 10_000,
  outboundAllow: [],
  trustedProxies: [],
  pgPoolSize: 10,
  sqliteWalLimitMb: 32,
  autoscalerIntervalMs: 500,
  workerStopGraceMs: 30_000,
  workerRestartBackoffMs: 1_000,
  stoppedWorkersKept: 20,
  stoppedWorkersKeptMs: 30 * 60_000,
  bodyReadTimeoutMs: 30_000,
  bodyBytesInFlight: 512_000_000,
  bodyDrainBytesPerSecond: 32_000_000,
  streamBufferBytes: 20_000_000,
  maxConnections: 10_000,
  // One core is the event loop's; the others (up to 4) parse large bodies.
  jsonThreads: Math.max(1, Math.min(4, availableParallelism() - 1)),
  jsonThreadMinBytes: 256_000,
  images: IMAGE_DEFAULTS,
  docker: DOCKER_DEFAULTS,
};

const INT_VARS: [keyof GantryConfig, string, number, number][] = [
  ['port', 'PORT', 0, 65535],
  ['queueLimitFactor', 'GANTRY_QUEUE_LIMIT_FACTOR', 1, 1e9],
  ['queueMaxInputBytes', 'GANTRY_QUEUE_MAX_INPUT_BYTES', 1_000_000, 1e15],
  ['diskMinFreeBytes', 'GANTRY_DISK_MIN_FREE_BYTES', 0, 1e15],
  ['jobTakeWaitMs', 'GANTRY_JOB_TAKE_WAIT_MS', 0, 60_000],
  ['workerLostMs', 'GANTRY_WORKER_LOST_MS', 1_000, 86_400_000],
  ['reaperIntervalMs', 'GANTRY_REAPER_INTERVAL_MS', 10, 60_000],
  ['asyncRetentionMs', 'GANTRY_ASYNC_RETENTION_MS', 1_000, 7 * 86_400_000],
  ['syncRetentionMs', 'GANTRY_SYNC_RETENTION_MS', 1_000, 7 * 86_400_000],
  ['minutesKeepDays', 'GANTRY_MINUTES_KEEP_DAYS', 1, 3_650],
  ['logKeepDays', 'GANTRY_LOG_KEEP_DAYS', 1, 3_650],
  ['logMaxLinesPerEndpoint', 'GANTRY_LOG_MAX_LINES_PER_ENDPOINT', 1_000, 1e9],
  ['logMaxBytesPerEndpoint', 'GANTRY_LOG_MAX_BYTES_PER_ENDPOINT', 1_000_000, 1e13],
  ['logLinesPerSecond', 'GANTRY_LOG_LINES_PER_SECOND', 1, 100_000],
  ['logBurstLines', 'GANTRY_LOG_BURST_LINES', 1, 1_000_000],
  ['auditKeepDays', 'GANTRY_AUDIT_KEEP_DAYS', 1, 3_650],
  ['webhookRetryMs', 'GANTRY_WEBHOOK_RETRY_MS', 0, 3_600_000],
  ['webhookTimeoutMs', 'GANTRY_WEBHOOK_TIMEOUT_MS', 100, 300_000],
  ['pgPoolSize', 'GANTRY_PG_POOL_SIZE', 2, 1000],
  ['sqliteWalLimitMb', 'GANTRY_SQLITE_WAL_LIMIT_MB', 1, 1_000_000],
  ['autoscalerIntervalMs', 'GANTRY_AUTOSCALER_INTERVAL_MS', 10, 60_000],
  ['workerStopGraceMs', 'GANTRY_WORKER_STOP_GRACE_MS', 0, 3_600_000],
  ['workerRestartBackoffMs', 'GANTRY_WORKER_RESTART_BACKOFF_MS', 10, 600_000],
  ['stoppedWorkersKept', 'GANTRY_STOPPED_WORKERS_KEPT', 0, 1_000],
  ['stoppedWorkersKeptMs', 'GANTRY_STOPPED_WORKERS_KEPT_MS', 0, 7 * 86_400_000],
  ['bodyReadTimeoutMs', 'GANTRY_BODY_READ_TIMEOUT_MS', 100, 600_000],
  ['bodyBytesInFlight', 'GANTRY_BODY_BYTES_IN_FLIGHT', 20_000_000, 1e12],
  ['bodyDrainBytesPerSecond', 'GANTRY_BODY_DRAIN_BYTES_PER_SECOND', 1_000_000, 1e12],
  // At least one chunk (1 MB): an empty buffer always takes a chunk.
  ['streamBufferBytes', 'GANTRY_STREAM_BUFFER_BYTES', 1_000_000, 1e12],
  ['maxConnections', 'GANTRY_MAX_CONNECTIONS', 1, 1_000_000],
  ['jsonThreads', 'GANTRY_JSON_THREADS', 0, 64],
  ['jsonThreadMinBytes', 'GANTRY_JSON_THREAD_MIN_BYTES', 1_024, 1e9],
];

/** The shortest console password accepted. */
export const MIN_CONSOLE_PASSWORD_CHARS = 12;

/**
 * GANTRY_CONSOLE_PASSWORD, or the contents of the file GANTRY_CONSOLE_PASSWORD_FILE (one
 * trailing newline dropped), for a secret kept out of the environment. Errors never quote it.
 */
function loadConsolePassword(env: NodeJS.ProcessEnv): string | null {
  const direct = env.GANTRY_CONSOLE_PASSWORD;
  const file = env.GANTRY_CONSOLE_PASSWORD_FILE;
  if (direct && file) throw new Error('Invalid GANTRY_CONSOLE_PASSWORD_FILE: set either GANTRY_CONSOLE_PASSWORD or GANTRY_CONSOLE_PASSWORD_FILE, not both');
  let password: string;
  let name: string;
  if (direct) {
    password = direct;
    name = 'GANTRY_CONSOLE_PASSWORD';
  } else if (file) {
    name = 'GANTRY_CONSOLE_PASSWORD_FILE';
    try {
      password = readFileSync(file, 'utf8').replace(/\r?\n$/, '');
    } catch (err) {
      throw new Error(`Invalid GANTRY_CONSOLE_PASSWORD_FILE=${JSON.stringify(file)}: cannot read it (${(err as NodeJS.ErrnoException).code ?? 'error'})`);
    }
  } else return null;
  if ([...password].length < MIN_CONSOLE_PASSWORD_CHARS) throw new Error(`Invalid ${name}: use at least ${MIN_CONSOLE_PASSWORD_CHARS} characters`);
  return password;
}

/** GANTRY_TRUSTED_PROXIES: addresses or CIDR blocks, comma-separated; throws naming a bad entry. */
function loadTrustedProxies(raw: string): string[] {
  const entries = raw.split(',').map((e) => e.trim()).filter((e) => e !== '');
  const bad = entries.find((e) => !isAddressOrBlock(e));
  if (bad !== undefined) throw new Error(`Invalid GANTRY_TRUSTED_PROXIES: ${JSON.stringify(bad)} is not an IP address or CIDR block (e.g. 127.0.0.1, 10.0.0.0/8)`);
  return entries;
}

const LOG_LEVELS = ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'];

/** Reads the configuration from an environment; throws naming the variable on a bad value. */
export function loadConfig(env: NodeJS.ProcessEnv = process.env, overrides: Partial<GantryConfig> = {}): GantryConfig {
  const config: GantryConfig = { ...DEFAULTS };
  for (const [key, name, min, max] of INT_VARS) {
    const raw = env[name];
    if (raw === undefined || raw === '') continue;
    const value = Number(raw);
    if (!Number.isInteger(value) || value < min || value > max) {
      throw new Error(`Invalid ${name}=${JSON.stringify(raw)}: expected an integer from ${min} to ${max}`);
    }
    (config as unknown as Record<string, number>)[key] = value;
  }
  if (env.GANTRY_HOST) config.host = env.GANTRY_HOST;
  if (env.GANTRY_OUTBOUND_ALLOW) config.outboundAllow = env.GANTRY_OUTBOUND_ALLOW.split(',').map((e) => e.trim()).filter((e) => e !== '');
  if (env.GANTRY_TRUSTED_PROXIES) config.trustedProxies = loadTrustedProxies(env.GANTRY_TRUSTED_PROXIES);
  if (env.GANTRY_DATA_DIR) config.dataDir = env.GANTRY_DATA_DIR;
  if (env.GANTRY_ADMIN_KEY) {
    if (env.GANTRY_ADMIN_KEY.length < 16) throw new Error('Invalid GANTRY_ADMIN_KEY: use at least 16 characters');
    config.adminKey = env.GANTRY_ADMIN_KEY;
  }
  config.consolePassword = loadConsolePassword(env);
  if (env.GANTRY_PUBLIC_URL) {
    try {
      new URL(env.GANTRY_PUBLIC_URL);
    } catch {
      throw new Error(`Invalid GANTRY_PUBLIC_URL=${JSON.stringify(env.GANTRY_PUBLIC_URL)}: expected an absolute URL`);
    }
    config.publicUrl = env.GANTRY_PUBLIC_URL.replace(/\/+$/, '');
  }
  if (env.GANTRY_LOG_LEVEL) {
    if (!LOG_LEVELS.includes(env.GANTRY_LOG_LEVEL)) {
      throw new Error(`Invalid GANTRY_LOG_LEVEL=${JSON.stringify(env.GANTRY_LOG_LEVEL)}: expected one of ${LOG_LEVELS.join(', ')}`);
    }
    config.logLevel = env.GANTRY_LOG_LEVEL;
  }
  if (env.GANTRY_RATE_LIMITS) {
    if (env.GANTRY_RATE_LIMITS !== 'on' && env.GANTRY_RATE_LIMITS !== 'off') {
      throw new Error(`Invalid GANTRY_RATE_LIMITS=${JSON.stringify(env.GANTRY_RATE_LIMITS)}: expected on or off`);
    }
    config.rateLimits = env.GANTRY_RATE_LIMITS === 'on';
  }
  config.images = loadImageConfig(env);
  config.docker = loadDockerConfig(env);
  const merged = { ...config, ...overrides };
  // The containers' installation label depends on the final data folder (docs/scaling.md).
  return { ...merged, docker: { ...merged.docker, instance: merged.docker.instance ?? dockerInstance(env, merged.dataDir) } };
}

/**
 * The ping interval Gantry gives its pool workers (RUNPOD_PING_INTERVAL): three pings within
 * GANTRY_WORKER_LOST_MS, between 1 and 10 s. Also the interval assumed for any worker until the
 * gateway has seen two of its pings (src/dispatch/worker-liveness.ts).
 *
 * @example workerPingIntervalMs({ workerLostMs: 30_000 }); // 10_000
 */
export function workerPingIntervalMs(config: Pick<GantryConfig, 'workerLostMs'>): number {
  return Math.max(1_000, Math.min(10_000, Math.floor(config.workerLostMs / 3)));
}

/** A stopped pool worker always gets at least this much longer than the take hold before SIGKILL. */
export const STOP_GRACE_OVER_TAKE_HOLD_MS = 5_000;

/**
 * The SIGTERM → SIGKILL grace of a pool worker: GANTRY_WORKER_STOP_GRACE_MS, but never less than
 * the take hold (GANTRY_JOB_TAKE_WAIT_MS) plus STOP_GRACE_OVER_TAKE_HOLD_MS. runpod-python exits
 * only once the job-take it has open at SIGTERM is answered; the gateway answers it at once when
 * the pool stops the worker, and at the latest when the hold ends, so no setting can SIGKILL a
 * worker that is on its way out (with both at 30 s, idle workers were killed at 30.0 s).
 *
 * @example poolStopGraceMs({ workerStopGraceMs: 30_000, jobTakeWaitMs: 30_000 }); // 35_000
 */
export function poolStopGraceMs(config: Pick<GantryConfig, 'workerStopGraceMs' | 'jobTakeWaitMs'>): number {
  return Math.max(config.workerStopGraceMs, config.jobTakeWaitMs + STOP_GRACE_OVER_TAKE_HOLD_MS);
}
