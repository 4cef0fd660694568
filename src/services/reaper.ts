import type { Logger } from 'pino';
import type { GantryConfig } from '../config/config.js';
import type { JobTransitions } from '../jobs/transitions.js';
import type { WorkerService } from '../jobs/worker-service.js';
import type { JobRecord } from '../model/records.js';
import type { LogStore } from '../store/log-store.js';
import type { MinuteStore } from '../store/minute-store.js';
import type { AuditStore } from '../store/audit-store.js';
import type { EndpointStore, WorkerStore } from '../store/store.js';
import type { Clock } from '../util/clock.js';
import { periodic, type Periodic } from '../util/periodic.js';

/** Rows handled per store call; a pass repeats a call while it comes back full. */
const BATCH = 500;
/** At most this many batches of one kind per pass, so a huge backlog never blocks the loop. */
const MAX_BATCHES = 20;
const DAY_MS = 86_400_000;
/** Worker log lines deleted per store call: lines come in thousands, so larger batches than jobs. */
const LOG_BATCH = 5_000;
/** Each endpoint's log is trimmed to GANTRY_LOG_MAX_LINES_PER_ENDPOINT and GANTRY_LOG_MAX_BYTES_PER_ENDPOINT at most this often (finding its edges reads that many index entries). */
const LOG_TRIM_EVERY_MS = 60_000;

/** What one reaper pass did. */
export interface ReaperPass {
  timedOut: number;
  expired: number;
  requeued: number;
  failed: number;
  deleted: number;
  /** Per-minute chart aggregates deleted, older than minutesKeepDays. */
  minutes: number;
  /** Worker log lines deleted: older than logKeepDays, or past an endpoint's logMaxLinesPerEndpoint or logMaxBytesPerEndpoint. */
  logs: number;
  /** Audit log entries deleted, older than auditKeepDays. */
  audit: number;
}

/**
 * The reaper (docs/states.md): execution timeouts → TIMED_OUT (the worker is told through
 * job-stop); queue ttl → TIMED_OUT; workers not heard from for `workerLostMs` lose their jobs
 * (requeued up to maxAttempts, then FAILED); expired jobs are deleted with input, output and
 * stream; the console charts' minutes older than `minutesKeepDays` are deleted, worker log
 * lines older than `logKeepDays` or past an endpoint's `logMaxLinesPerEndpoint` or `logMaxBytesPerEndpoint`, and audit
 * entries older than `auditKeepDays`. A singleton on
 * the leader. `start` runs a pass every `reaperIntervalMs`; `stop` may be called twice.
 */
export interface Reaper {
  /** One pass now; returns what it did. */
  runOnce(): Promise<ReaperPass>;
  start(): void;
  stop(): Promise<void>;
}

/** What the reaper uses. */
export interface ReaperDeps {
  transitions: Pick<JobTransitions, 'timeOutRunning' | 'expireQueued' | 'releaseWorkers' | 'deleteExpired'>;
  workers: Pick<WorkerService, 'touchWaiting'>;
  store: Pick<WorkerStore, 'findStaleWorkers'> & Pick<MinuteStore, 'deleteMinutesBefore'> & Pick<LogStore, 'deleteLogsBefore' | 'trimEndpointLogs'> & Pick<EndpointStore, 'listEndpoints'> & Pick<AuditStore, 'deleteAuditBefore'>;
  config: Pick<GantryConfig, 'reaperIntervalMs' | 'workerLostMs' | 'minutesKeepDays' | 'logKeepDays' | 'logMaxLinesPerEndpoint' | 'logMaxBytesPerEndpoint' | 'auditKeepDays'>;
  logger: Logger;
  clock: Clock;
}

/** @example const reaper = createReaper({ transitions, workers, store, config, logger, clock: systemClock }); reaper.start(); */
export function createReaper(deps: ReaperDeps): Reaper {
  return new Reaping(deps);
}

/** Calls `call` while it handles full batches (of `batch`), at most MAX_BATCHES times; returns the total handled. */
async function repeat(call: () => Promise<number>, batch = BATCH): Promise<number> {
  let total = 0;
  for (let i = 0; i < MAX_BATCHES; i++) {
    const n = await call();
    total += n;
    if (n < batch) break;
  }
  return total;
}

const count = (jobs: JobRecord[]): number => jobs.length;

class Reaping implements Reaper {
  private readonly loop: Periodic;
  /** When start() last ran: silence before it is not counted (the reconnect grace). */
  private startedAt: number | undefined;
  /** When the endpoints' logs were last trimmed to their cap. */
  private trimmedAt = -Infinity;

  constructor(private readonly deps: ReaperDeps) {
    this.loop = periodic({
      name: 'reaper',
      everyMs: deps.config.reaperIntervalMs,
      pass: async ({ lateMs }) => {
        await this.pass(lateMs);
      },
      logger: deps.logger,
      clock: deps.clock,
    });
  }

  runOnce(): Promise<ReaperPass> {
    this.trimmedAt = -Infinity;
    return this.pass(0);
  }

  /** One pass; `lateMs`: how much later than due a scheduled pass fired (event-loop lag). */
  private async pass(lateMs: number): Promise<ReaperPass> {
    const { transitions } = this.deps;
    const timedOut = await repeat(async () => count(await transitions.timeOutRunning(BATCH)));
    const expired = await repeat(async () => count(await transitions.expireQueued(BATCH)));
    const { requeued, failed } = await this.releaseLostWorkers(lateMs);
    const deleted = await repeat(() => transitions.deleteExpired(BATCH));
    const before = this.deps.clock.now() - this.deps.config.minutesKeepDays * DAY_MS;
    const minutes = await repeat(() => this.deps.store.deleteMinutesBefore({ before, limit: BATCH }));
    const logs = await this.pruneLogs();
    const auditBefore = this.deps.clock.now() - this.deps.config.auditKeepDays * DAY_MS;
    const audit = await repeat(() => this.deps.store.deleteAuditBefore({ before: auditBefore, limit: BATCH }));
    return { timedOut, expired, requeued, failed, deleted, minutes, logs, audit };
  }

  /** Worker log lines past GANTRY_LOG_KEEP_DAYS, then (once a minute) each endpoint's past GANTRY_LOG_MAX_LINES_PER_ENDPOINT and GANTRY_LOG_MAX_BYTES_PER_ENDPOINT. */
  private async pruneLogs(): Promise<number> {
    const { store, config, clock } = this.deps;
    const before = clock.now() - config.logKeepDays * DAY_MS;
    let deleted = await repeat(() => store.deleteLogsBefore({ before, limit: LOG_BATCH }), LOG_BATCH);
    if (clock.now() - this.trimmedAt < LOG_TRIM_EVERY_MS) return deleted;
    this.trimmedAt = clock.now();
    for (const endpoint of await store.listEndpoints()) {
      const bounds = { keep: config.logMaxLinesPerEndpoint, keepBytes: config.logMaxBytesPerEndpoint };
      deleted += await repeat(() => store.trimEndpointLogs({ endpointId: endpoint.id, ...bounds, limit: LOG_BATCH }), LOG_BATCH);
    }
    return deleted;
  }

  start(): void {
    this.startedAt ??= this.deps.clock.now();
    this.loop.start();
  }

  stop(): Promise<void> {
    this.startedAt = undefined;
    return this.loop.stop();
  }

  private async releaseLostWorkers(lateMs: number): Promise<{ requeued: number; failed: number }> {
    // Workers with an open long-poll on this gateway are alive even if they have not pinged.
    await this.deps.workers.touchWaiting();
    // Silence the gateway caused is not the worker's: a pass that fires late (a blocked event
    // loop, a paused process) allows that much more, since requests that waited meanwhile are
    // handled only after it. Rows hold the time a request arrived, on this same clock.
    const now = this.deps.clock.now();
    // Reconnect grace: no worker is lost before this reaper has run workerLostMs (the gateway
    // started, or took the lead). After a restart the rows still hold the time before it, and
    // workers get the whole of workerLostMs to find the gateway again and post what they hold.
    if (this.startedAt !== undefined && now - this.startedAt < this.deps.config.workerLostMs) return { requeued: 0, failed: 0 };
    const cutoff = now - this.deps.config.workerLostMs - lateMs;
    const stale = await this.deps.store.findStaleWorkers(cutoff);
    if (stale.length === 0) return { requeued: 0, failed: 0 };
    const ids = stale.map((w) => w.id);
    const released = await this.deps.transitions.releaseWorkers(ids);
    const requeued = released.requeued.length;
    const failed = released.failed.length;
    if (requeued + failed > 0) this.deps.logger.warn({ workers: ids, requeued, failed }, 'workers lost');
    return { requeued, failed };
  }
}
