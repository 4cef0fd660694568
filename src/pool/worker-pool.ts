import { randomBytes } from 'node:crypto';
import type { App } from '../app.js';
import { createApiKey } from '../http/admin-routes.js';
import type { WorkerSettings } from '../jobs/endpoint-settings.js';
import type { EndpointRecord, QueueStats, WorkerRecord } from '../store/store.js';
import type { WorkerDriver, WorkerExit, WorkerHandle } from './driver.js';
import type { PoolHealth, PoolWorkerInfo, PoolWorkerState } from './pool-view.js';
import { createWorkerLog, type LogLine, type WorkerLog } from './worker-log.js';
import { runpodWorkerEnv } from '../jobs/worker-env.js';

/** The name of a pool's worker key; one left by a killed gateway is deleted at the next start. */
export const poolKeyName = (endpointId: string): string => `worker pool ${endpointId} (autoscaler)`;
export const POOL_KEY_NAME = /^worker pool .+ \(autoscaler\)$/;

/** A worker that ran this long before exiting starts its crash count over. */
const STABLE_MS = 60_000;
/** Crash backoff never waits longer than this (unless the base itself is longer). */
const MAX_BACKOFF_MS = 60_000;
/** Consecutive failed starts after which a worker is reported unhealthy. */
const UNHEALTHY_AFTER = 2;
/** Output lines quoted in a crash reason. */
const REASON_LINES = 5;

export interface WorkerPoolOptions {
  app: App;
  driver: WorkerDriver;
  /** Base URL of the gateway as the workers reach it (config.publicUrl or the gateway's own). */
  baseUrl: string;
  /** SIGTERM → SIGKILL grace of a stopped worker. */
  graceMs: number;
  /** First crash backoff; it doubles with each consecutive failure up to 60 s. */
  restartBackoffMs: number;
  /** Lines kept per worker log. */
  logLines: number;
  /** Called when something happened that the autoscaler should look at soon (a worker exited). */
  onChange: () => void;
}

/** One worker slot of the pool: its current process (if any), its log and crash history. */
interface Slot {
  id: string;
  /** The endpoint's workerJson this slot runs. */
  spec: string;
  handle: WorkerHandle | null;
  /** True from the start request until the process runs (or failed to start). */
  launching: boolean;
  startedAt: number | null;
  readyAt: number | null;
  held: number;
  idleSince: number | null;
  restarts: number;
  failures: number;
  restartAt: number | null;
  reason: string | null;
  stopping: boolean;
  /** A store row says the worker reported itself unhealthy (ping status=unhealthy). */
  selfUnhealthy: string | null;
  log: WorkerLog;
  /** Settles once the current process has exited and its jobs were requeued. */
  finished: Promise<void>;
}

/** The pool's view of a worker for the scaling rules. */
export interface ActiveWorker {
  id: string;
  /** Not yet serving: starting, or waiting to restart after a crash. */
  starting: boolean;
  /** Since when it has held no job with the queue empty; null while busy or starting. */
  idleSince: number | null;
}

/**
 * The worker processes of one endpoint: starts and stops them through the driver, gives each
 * the RUNPOD_* environment with a worker-scoped key of this endpoint, keeps their logs,
 * requeues the jobs of a worker whose process ended, and restarts crashed workers with
 * exponential backoff. How many workers there should be is the autoscaler's call.
 */
export function createWorkerPool(endpointId: string, options: WorkerPoolOptions) {
  const { app, driver, baseUrl } = options;
  const log = app.logger.child({ endpointId, driver: driver.kind });
  const slots = new Map<string, Slot>();
  let spec = '';
  let settings: WorkerSettings = { command: '' };
  let key: Promise<{ id: string; key: string }> | undefined;
  let throttled = 0;
  let closed = false;

  /** One worker-scoped key per pool, made on first use; only its hash is stored. */
  function poolKey(): Promise<{ id: string; key: string }> {
    key ??= createApiKey(app, { name: poolKeyName(endpointId), scopes: ['worker'], endpoints: [endpointId] }).then(
      (k) => ({ id: k.id, key: k.key }),
    );
    return key;
  }

  function workerEnv(workerId: string, apiKey: string): Record<string, string> {
    const pingMs = Math.max(1_000, Math.min(10_000, Math.floor(app.config.workerLostMs / 3)));
    return {
      ...settings.env,
      ...runpodWorkerEnv({ gatewayUrl: baseUrl, endpointId, workerId, apiKey, pingIntervalMs: pingMs }),
    };
  }

  function newSlot(): Slot {
    const slot: Slot = {
      id: `${endpointId}-${randomBytes(4).toString('hex')}`,
      spec,
      handle: null,
      launching: false,
      startedAt: null,
      readyAt: null,
      held: 0,
      idleSince: null,
      restarts: 0,
      failures: 0,
      restartAt: null,
      reason: null,
      stopping: false,
      selfUnhealthy: null,
      log: createWorkerLog(options.logLines, app.now),
      finished: Promise.resolve(),
    };
    slots.set(slot.id, slot);
    return slot;
  }

  async function launch(slot: Slot): Promise<void> {
    slot.launching = true;
    slot.restartAt = null;
    slot.readyAt = null;
    slot.idleSince = null;
    slot.held = 0;
    try {
      const { key: apiKey } = await poolKey();
      if (slot.stopping || closed) {
        slots.delete(slot.id);
        return;
      }
      slot.startedAt = app.now();
      const handle = await driver.start(
        { workerId: slot.id, endpointId, command: settings.command, env: workerEnv(slot.id, apiKey), ...(settings.cwd ? { cwd: settings.cwd } : {}) },
        (stream, text) => slot.log.write(stream, text),
      );
      slot.handle = handle;
      slot.log.note(`started: pid ${handle.pid ?? '-'}, command ${JSON.stringify(settings.command)}`);
      log.info({ workerId: slot.id, pid: handle.pid }, 'pool worker started');
      slot.finished = handle.exited.then((exit) => exited(slot, handle, exit));
      if (slot.stopping) void handle.stop(options.graceMs); // stopped while it was starting
    } catch (err) {
      const message = err instanceof Error ? err.message : String(err);
      slot.log.note(`could not start: ${message}`);
      if (slot.stopping || closed) slots.delete(slot.id);
      else crashed(slot, { code: null, signal: null, error: message });
      options.onChange();
    } finally {
      slot.launching = false;
    }
  }

  /** The process ended: requeue what it held, then restart (crash) or forget the slot. */
  async function exited(slot: Slot, handle: WorkerHandle, exit: WorkerExit): Promise<void> {
    slot.log.flush();
    slot.handle = null;
    const ranMs = app.now() - (slot.startedAt ?? app.now());
    slot.log.note(`exited: ${describeExit(exit)} after ${(ranMs / 1000).toFixed(1)} s`);
    try {
      await releaseJobs(slot.id);
    } catch (err) {
      log.error({ err, workerId: slot.id }, 'could not requeue the jobs of an exited pool worker');
    }
    // A clean exit of a worker that served (e.g. it asked to be recycled) is not a crash.
    const clean = exit.code === 0 && slot.readyAt !== null;
    if (slot.stopping || closed || clean || slot.spec !== spec) {
      log.info({ workerId: slot.id, pid: handle.pid, exit }, 'pool worker exited');
      slots.delete(slot.id);
    } else {
      if (ranMs >= STABLE_MS) slot.failures = 0;
      crashed(slot, exit);
    }
    options.onChange();
  }

  function crashed(slot: Slot, exit: WorkerExit): void {
    slot.handle = null;
    slot.startedAt = null;
    slot.readyAt = null;
    slot.failures += 1;
    slot.restarts += 1;
    const wait = Math.min(options.restartBackoffMs * 2 ** (slot.failures - 1), Math.max(MAX_BACKOFF_MS, options.restartBackoffMs));
    slot.restartAt = app.now() + wait;
    const output = slot.log
      .tail()
      .filter((l) => l.stream !== 'gantry' && l.line.trim() !== '')
      .slice(-REASON_LINES)
      .map((l) => l.line.trim());
    slot.reason = `${describeExit(exit)} (${slot.failures} time${slot.failures > 1 ? 's' : ''} in a row)${output.length > 0 ? `: ${output.join(' | ')}` : ''}`;
    slot.log.note(`restarting in ${(wait / 1000).toFixed(1)} s`);
    log.warn({ workerId: slot.id, failures: slot.failures, restartInMs: wait, reason: slot.reason }, 'pool worker crashed');
  }

  /** Requeues (or fails, past maxAttempts) the jobs of a worker that is gone, at once. */
  async function releaseJobs(workerId: string): Promise<void> {
    const released = await app.store.releaseWorkerJobs({ workerIds: [workerId], now: app.now() });
    await app.store.deleteWorkers([workerId]);
    for (const job of released.failed) app.jobs.jobEnded(job);
    for (const job of released.requeued) app.notifier.publish({ type: 'job-updated', jobId: job.id });
    if (released.requeued.length > 0) app.notifier.publish({ type: 'jobs-available', endpointId });
    if (released.requeued.length + released.failed.length > 0) {
      log.warn({ workerId, requeued: released.requeued.map((j) => j.id), failed: released.failed.map((j) => j.id) }, 'pool worker ended holding jobs');
    }
  }

  function stateOf(slot: Slot): PoolWorkerState {
    if (slot.stopping) return 'draining';
    if (slot.selfUnhealthy !== null) return 'unhealthy';
    if (slot.handle && slot.readyAt !== null) return slot.held > 0 ? 'running' : 'idle';
    // Crash-looping: unhealthy until a restart gets as far as polling for jobs.
    return slot.failures >= UNHEALTHY_AFTER ? 'unhealthy' : 'initializing';
  }

  return {
    endpointId,

    /**
     * Takes the endpoint's current settings. When the worker spec changed, the workers of the
     * old spec are drained; returns how many were running, so as many new ones can start.
     */
    configure(endpoint: EndpointRecord): number {
      if (endpoint.workerJson === null || endpoint.workerJson === spec) return 0;
      const first = spec === '';
      spec = endpoint.workerJson;
      settings = JSON.parse(spec) as WorkerSettings;
      let retired = 0;
      for (const slot of slots.values()) {
        if (slot.spec === spec || slot.stopping) continue;
        if (slot.handle || slot.launching) retired++;
        this.stop(slot.id, 'the endpoint\'s worker settings changed');
      }
      if (!first) log.info({ retired }, 'worker settings changed: rolling the pool');
      return retired;
    },

    /** Reads the store's view (who polled, who holds jobs) into the slots. */
    observe(stats: QueueStats, rows: WorkerRecord[], now: number): void {
      const byId = new Map(rows.map((r) => [r.id, r]));
      for (const slot of slots.values()) {
        const row = byId.get(slot.id);
        if (slot.handle && slot.readyAt === null && row && slot.startedAt !== null && row.lastSeenAt >= slot.startedAt) {
          slot.readyAt = Math.max(row.firstSeenAt, slot.startedAt);
          slot.log.note(`ready: first poll ${slot.readyAt - slot.startedAt} ms after start`);
        }
        slot.selfUnhealthy = row && !row.healthy ? (row.reason ?? 'reported unhealthy by the worker') : null;
        slot.held = stats.heldBy[slot.id] ?? 0;
        const serving = slot.handle !== null && slot.readyAt !== null;
        const waiting = slot.handle === null && !slot.launching;
        const idle = (serving || waiting) && slot.held === 0 && stats.inQueue === 0;
        if (!idle) slot.idleSince = null;
        else slot.idleSince ??= now;
      }
    },

    /** Current-spec workers not being stopped: what the scaling rules count. */
    active(): ActiveWorker[] {
      const list: ActiveWorker[] = [];
      for (const slot of slots.values()) {
        if (slot.stopping || slot.spec !== spec) continue;
        list.push({ id: slot.id, starting: slot.handle === null || slot.readyAt === null, idleSince: slot.idleSince });
      }
      return list;
    },

    /** Starts `n` new workers. */
    start(n: number): void {
      for (let i = 0; i < n && !closed; i++) void launch(newSlot());
    },

    /** Starts again the crashed workers whose backoff has passed. */
    restartDue(now: number): void {
      for (const slot of slots.values()) {
        if (!slot.handle && !slot.launching && !slot.stopping && slot.restartAt !== null && slot.restartAt <= now) void launch(slot);
      }
    },

    /** Drains a worker: SIGTERM, up to the grace period to finish its jobs, then SIGKILL. */
    stop(workerId: string, why: string): void {
      const slot = slots.get(workerId);
      if (!slot || slot.stopping) return;
      slot.stopping = true;
      slot.reason = why;
      if (!slot.handle) {
        if (!slot.launching) slots.delete(slot.id);
        return;
      }
      slot.log.note(`stopping (${why}): SIGTERM, up to ${options.graceMs} ms to finish its jobs`);
      log.info({ workerId, why }, 'pool worker stopping');
      void slot.handle.stop(options.graceMs);
    },

    setThrottled(n: number): void {
      throttled = n;
    },

    health(): PoolHealth {
      const initializing: string[] = [];
      const unhealthy: string[] = [];
      for (const slot of slots.values()) {
        const state = stateOf(slot);
        if (state === 'initializing') initializing.push(slot.id);
        // A worker that pinged status=unhealthy is counted from its store row by /health.
        else if (state === 'unhealthy' && slot.selfUnhealthy === null) unhealthy.push(slot.id);
      }
      return { initializing, unhealthy, throttled };
    },

    workers(): PoolWorkerInfo[] {
      return [...slots.values()].map((slot) => ({
        id: slot.id,
        state: stateOf(slot),
        pid: slot.handle?.pid ?? null,
        startedAt: slot.startedAt,
        readyAt: slot.readyAt,
        jobs: slot.held,
        restarts: slot.restarts,
        reason: slot.selfUnhealthy ?? slot.reason,
        restartAt: slot.handle ? null : slot.restartAt,
      }));
    },

    logs(workerId: string, lines: number): LogLine[] | undefined {
      return slots.get(workerId)?.log.tail(lines);
    },

    /** True when no worker process is left (all exited). */
    get empty(): boolean {
      return [...slots.values()].every((s) => !s.handle && !s.launching);
    },

    /** Drains every worker, waits for them to exit, then deletes the pool's key. */
    async close(why: string): Promise<void> {
      closed = true;
      for (const slot of slots.values()) this.stop(slot.id, why);
      // A launch in flight stops its process itself once started (it sees `stopping`).
      while ([...slots.values()].some((s) => s.launching)) await new Promise((r) => setTimeout(r, 10));
      await Promise.all([...slots.values()].map((s) => s.finished));
      if (key) {
        const { id } = await key.catch(() => ({ id: null }));
        if (id) await app.store.deleteKey(id);
        app.auth.forget();
      }
    },
  };
}

export type WorkerPool = ReturnType<typeof createWorkerPool>;

function describeExit(exit: WorkerExit): string {
  if (exit.error) return `failed to start (${exit.error})`;
  if (exit.signal) return `killed by ${exit.signal}`;
  return `exited with code ${exit.code ?? '?'}`;
}
