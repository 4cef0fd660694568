import { randomBytes } from 'node:crypto';
import type { Logger } from 'pino';
import { isContainerWorker, type WorkerSettings } from '../jobs/endpoint-settings.js';
import type { ColdStartStats, LogLine, PoolHealth, PoolWorkerInfo } from '../jobs/pool-view.js';
import type { JobTransitions } from '../jobs/transitions.js';
import type { QueueStats, WorkerRecord } from '../model/records.js';
import type { KeyService } from '../security/keys.js';
import { ColdStarts, type ColdStartLedger } from './cold-starts.js';
import { NoCapacityError, PullError, type AnyStartSpec, type WorkerDriver, type WorkerExit, type WorkerHandle } from './driver.js';
import { createStoppedWorkers, STOPPED_WORKER_DEFAULTS, type StoppedWorkerLimits, type StoppedWorkers } from './stopped-workers.js';
import { collapseRepeats, describeExit, describeStart, infoOf, moveTo, reportedState, type Slot, type SlotState } from './slot.js';
import { runpodWorkerEnv } from './worker-env.js';
import { createWorkerLog } from './worker-log.js';
import type { JobHolders } from './job-holders.js';
import type { LogWriter, WorkerLogFeed } from './log-writer.js';
import { gpusOf, type WorkerMeters } from './worker-meters.js';

/**
 * The name of a pool worker's key (each worker has its own): `worker pool <endpoint>
 * (autoscaler) <workerId>`. Keys left by a killed gateway are deleted at the next start by
 * POOL_KEY_NAME, which also matches the one-key-per-pool names of earlier versions.
 */
export const poolKeyName = (endpointId: string, workerId?: string): string => `worker pool ${endpointId} (autoscaler)${workerId ? ` ${workerId}` : ''}`;
export const POOL_KEY_NAME = /^worker pool .+ \(autoscaler\)( [A-Za-z0-9_-]+)?$/;

/** Slot states with a process running or being started. */
const RUNNING: readonly SlotState[] = ['launching', 'starting', 'serving'];

/** Whether the slot was asked to stop (read after an await: a stop may have come meanwhile). */
const isDraining = (slot: Slot): boolean => slot.state === 'draining';

/** A worker that ran this long before exiting starts its crash count over. */
const STABLE_MS = 60_000;
/** Crash backoff never waits longer than this (unless the base itself is longer). */
const MAX_BACKOFF_MS = 60_000;
/** Output lines quoted in a crash reason. */
const REASON_LINES = 5;

/** What one endpoint's worker pool uses. */
export interface WorkerPoolOptions {
  endpointId: string;
  driver: WorkerDriver;
  /** Makes each worker's key, and revokes it when the worker is gone. */
  keys: Pick<KeyService, 'create' | 'revoke'>;
  /** Requeues the jobs of a worker whose process ended. */
  transitions: Pick<JobTransitions, 'releaseWorkers'>;
  /** Base URL of the gateway as the workers reach it (config.publicUrl or the gateway's own). */
  baseUrl: string;
  /** SIGTERM → SIGKILL grace of a stopped worker. */
  graceMs: number;
  /** First crash backoff; it doubles with each consecutive failure up to 60 s. */
  restartBackoffMs: number;
  /** Lines kept per worker log. */
  logLines: number;
  /** How many stopped workers (with their logs) are remembered, and how long (default: 20, 30 minutes). */
  stoppedWorkers?: StoppedWorkerLimits;
  /** How often workers ping (RUNPOD_PING_INTERVAL). */
  pingIntervalMs: number;
  logger: Logger;
  now(): number;
  /** Called when something happened that the autoscaler should look at soon (a worker exited). */
  onChange(): void;
  /**
   * Called the moment the pool decides to stop a worker (idle, stopPod, settings changed, drain,
   * close), before its SIGTERM: the gateways answer its parked takes and hand it nothing more.
   */
  onStopping?(workerId: string): void;
  /** Called before a paused worker (flashboot) is resumed: the gateways hand it jobs again. */
  onResuming?(workerId: string): void;
  /** Meters each worker process from its start to its exit (worker-meters.ts). */
  meters?: Pick<WorkerMeters, 'started' | 'stopped'>;
  /** Where every line of the workers goes to be stored (log-writer.ts); none: the log rings only. */
  logs?: LogWriter;
  /** Which jobs each worker holds, for the lines printed while it holds one (job-holders.ts). */
  holders?: JobHolders;
  /** Where the endpoint's cold starts are kept beyond this pool (the store); none: in memory only (cold-starts.ts). */
  coldStartLedger?: ColdStartLedger;
}

/** The pool's view of a worker for the scaling rules. */
export interface ActiveWorker {
  id: string;
  /** Not yet serving: starting, or waiting to restart after a crash. */
  starting: boolean;
  /** Since when it has held no job with the queue empty; null while busy or starting. */
  idleSince: number | null;
  /** Holds a job. */
  busy: boolean;
  /** When the job it took last started, while it holds one; null otherwise, or not known. */
  busySince?: number | null;
  /** Waits for the allocator to give it room (no process). */
  waiting: boolean;
}

/**
 * The worker processes of one endpoint: starts and stops them through the driver, gives each
 * the RUNPOD_* environment with a worker-scoped key of this endpoint, keeps their logs,
 * requeues the jobs of a worker whose process ended, and restarts crashed workers with
 * exponential backoff. How many workers there should be is the autoscaler's call.
 */
export interface WorkerPool {
  readonly endpointId: string;
  /**
   * Takes the endpoint's current worker settings. When they changed, the workers of the old
   * settings are drained; returns how many were running, so as many new ones can start.
   */
  configure(settings: WorkerSettings): number;
  /** Reads the store's view (who polled, who holds jobs) into the slots. */
  observe(stats: QueueStats, rows: WorkerRecord[], now: number): void;
  /** Current-settings workers not being stopped: what the scaling rules count. */
  active(): ActiveWorker[];
  /** Starts `n` new workers. */
  start(n: number): void;
  /** Starts again the crashed workers whose backoff has passed. */
  restartDue(now: number): void;
  /**
   * Launches up to `n` workers waiting for room (the allocator granted them GPUs), those a
   * refused start put back to wait only once their pause has passed. Returns how many.
   */
  launchWaiting(n: number, now: number): number;
  /** Makes `n` more workers that wait for room, and gives every waiting one `reason` (the allocator's). */
  hold(n: number, reason: string): void;
  /** Drains a worker: SIGTERM, up to the grace period to finish its jobs, then SIGKILL. */
  stop(workerId: string, why: string): void;
  /**
   * Pauses an idle worker into the warm pool (flashboot, docs/scaling.md): its container is
   * kept, frozen, with its GPUs; it is handed nothing until resumed. A worker whose driver
   * cannot pause, or that holds a job, is stopped instead.
   */
  park(workerId: string, why: string): void;
  /** Resumes up to `n` paused workers of the current settings; returns how many. */
  resume(n: number): number;
  /** The paused workers' ids, oldest pause first. */
  paused(): string[];
  /** Stops the paused workers beyond the `keep` most recently paused (0: all of them; flashboot turned off). */
  trimPaused(keep: number, why: string): void;
  /** The endpoint's cold starts since this pool was made (cold-starts.ts). */
  coldStarts(): ColdStartStats;
  setThrottled(n: number): void;
  health(): PoolHealth;
  workers(): PoolWorkerInfo[];
  /** Workers gone lately (state `stopped`), their logs kept for a while: most recent first. */
  stoppedWorkers(): PoolWorkerInfo[];
  /** The last `lines` lines of a worker's log, running or stopped lately. */
  logs(workerId: string, lines: number): LogLine[] | undefined;
  /** Drains every worker and waits for them to exit (their keys are revoked as they go). */
  close(why: string): Promise<void>;
}

/** @example const pool = createWorkerPool({ endpointId: 'echo', driver, keys, transitions, baseUrl, graceMs: 30_000, ... }); pool.configure({ command: 'node w.js' }); pool.start(1); */
export function createWorkerPool(options: WorkerPoolOptions): WorkerPool {
  return new Pool(options);
}

class Pool implements WorkerPool {
  readonly endpointId: string;
  private readonly log: Logger;
  private readonly slots = new Map<string, Slot>();
  private readonly stopped: StoppedWorkers;
  private spec = '';
  private settings: WorkerSettings = { command: '' };
  private throttled = 0;
  private closed = false;
  /** Jobs queued at the last observe: a start made while some wait is a cold start. */
  private queued = 0;
  private readonly colds: ColdStarts;

  constructor(private readonly options: WorkerPoolOptions) {
    this.endpointId = options.endpointId;
    this.log = options.logger.child({ endpointId: options.endpointId, driver: options.driver.kind });
    const ledger = options.coldStartLedger;
    this.colds = new ColdStarts(
      ledger && {
        ledger,
        endpointId: options.endpointId,
        now: options.now,
        onError: (err, what) => this.log.warn({ err }, what === 'read' ? 'cold starts: the stored figures could not be read; counting from zero' : 'cold starts: one could not be stored'),
      },
    );
    this.stopped = createStoppedWorkers(options.stoppedWorkers ?? STOPPED_WORKER_DEFAULTS, options.now);
  }

  configure(settings: WorkerSettings): number {
    const spec = JSON.stringify(settings);
    if (spec === this.spec) return 0;
    const first = this.spec === '';
    this.spec = spec;
    this.settings = settings;
    let retired = 0;
    for (const slot of this.slots.values()) {
      if (slot.spec === spec || slot.state === 'draining') continue;
      if (RUNNING.includes(slot.state)) retired++;
      this.stop(slot.id, "the endpoint's worker settings changed");
    }
    if (!first) this.log.info({ retired }, 'worker settings changed: rolling the pool');
    return retired;
  }

  observe(stats: QueueStats, rows: WorkerRecord[], now: number): void {
    const byId = new Map(rows.map((r) => [r.id, r]));
    this.queued = stats.inQueue;
    for (const slot of this.slots.values()) {
      const row = byId.get(slot.id);
      this.readyCheck(slot, row);
      slot.selfUnhealthy = row && !row.healthy ? (row.reason ?? 'reported unhealthy by the worker') : null;
      slot.held = stats.heldBy.get(slot.id) ?? 0;
      slot.busySince = slot.held > 0 ? (stats.heldSince?.get(slot.id) ?? null) : null;
      this.options.holders?.settle(slot.id, slot.held, now);
      // A job reached it as it was being paused: it runs it now.
      if (slot.state === 'paused' && slot.held > 0) this.resumeSlot(slot, 'it held a job when it was paused');
      const serving = slot.state === 'serving';
      const waiting = slot.state === 'crashed' || slot.state === 'waiting-for-room';
      const idle = (serving || waiting) && slot.held === 0 && stats.inQueue === 0;
      if (!idle) slot.idleSince = null;
      else slot.idleSince ??= now;
    }
  }

  active(): ActiveWorker[] {
    const list: ActiveWorker[] = [];
    for (const slot of this.slots.values()) {
      if (slot.state === 'draining' || slot.state === 'paused' || slot.spec !== this.spec) continue;
      list.push({ id: slot.id, starting: slot.state !== 'serving', idleSince: slot.idleSince, busy: slot.held > 0, busySince: slot.busySince ?? null, waiting: slot.state === 'waiting-for-room' });
    }
    return list;
  }

  start(n: number): void {
    for (let i = 0; i < n && !this.closed; i++) this.launch(this.newSlot());
  }

  restartDue(now: number): void {
    for (const slot of this.slots.values()) {
      if (slot.state === 'crashed' && slot.restartAt !== null && slot.restartAt <= now) this.launch(slot);
    }
  }

  launchWaiting(n: number, now: number): number {
    let launched = 0;
    for (const slot of this.slots.values()) {
      if (launched >= n || this.closed) break;
      if (slot.state !== 'waiting-for-room' || slot.spec !== this.spec || (slot.restartAt !== null && slot.restartAt > now)) continue;
      this.launch(slot);
      launched++;
    }
    return launched;
  }

  hold(n: number, reason: string): void {
    for (let i = 0; i < n && !this.closed; i++) {
      const slot = this.newSlot();
      moveTo(slot, 'waiting-for-room', 'the allocator has no GPU for it yet');
    }
    for (const slot of this.slots.values()) {
      if (slot.state !== 'waiting-for-room' || slot.spec !== this.spec || slot.reason === reason) continue;
      slot.reason = reason;
      slot.log.note(reason);
    }
  }

  stop(workerId: string, why: string): void {
    const slot = this.slots.get(workerId);
    if (!slot || slot.state === 'draining' || slot.state === 'gone') return;
    slot.reason = why;
    if (!slot.handle && !slot.launching) {
      this.forget(slot, why);
      return;
    }
    moveTo(slot, 'draining', why);
    // Without a handle, the launch in flight stops what it started.
    if (slot.handle) {
      slot.log.note(`stopping (${why}): SIGTERM, up to ${this.options.graceMs} ms to finish its jobs`);
      this.log.info({ workerId, why }, 'pool worker stopping');
      void slot.handle.stop(this.options.graceMs);
    }
    // After the SIGTERM went out, so the worker knows it is stopping when its takes are answered.
    this.options.onStopping?.(workerId);
  }

  park(workerId: string, why: string): void {
    const slot = this.slots.get(workerId);
    if (!slot || slot.state !== 'serving') return;
    const handle = slot.handle;
    if (!handle?.pause || slot.held > 0 || this.closed) {
      this.stop(workerId, why);
      return;
    }
    moveTo(slot, 'paused', why);
    slot.reason = `paused in the warm pool (flashboot): ${why}`;
    slot.idleSince = null;
    slot.log.note(`pausing (${why}): kept in the warm pool (flashboot)`);
    this.log.info({ workerId, why }, 'pool worker pausing (flashboot)');
    // Its parked takes are answered first, so it is frozen holding no job and asks for none.
    this.options.onStopping?.(workerId);
    handle.pause().then(
      () => slot.log.note('paused'),
      (err: unknown) => {
        const message = err instanceof Error ? err.message : String(err);
        if (slot.state === 'paused') this.stop(slot.id, `could not be paused (${message}): stopped instead`);
      },
    );
  }

  resume(n: number): number {
    let resumed = 0;
    for (const slot of this.slots.values()) {
      if (resumed >= n || this.closed) break;
      if (slot.state !== 'paused' || slot.spec !== this.spec) continue;
      this.resumeSlot(slot, 'the pool wants a worker');
      resumed++;
    }
    return resumed;
  }

  paused(): string[] {
    return [...this.slots.values()].filter((s) => s.state === 'paused').map((s) => s.id);
  }

  trimPaused(keep: number, why: string): void {
    const paused = this.paused();
    for (const id of paused.slice(0, Math.max(0, paused.length - keep))) this.stop(id, why);
  }

  coldStarts(): ColdStartStats {
    return this.colds.stats();
  }

  setThrottled(n: number): void {
    this.throttled = n;
  }

  health(): PoolHealth {
    const initializing: string[] = [];
    const unhealthy: string[] = [];
    const paused: string[] = [];
    let waiting = 0;
    for (const slot of this.slots.values()) {
      const state = reportedState(slot);
      if (state === 'paused') paused.push(slot.id);
      else if (state === 'initializing') initializing.push(slot.id);
      else if (state === 'throttled') waiting++;
      // A worker that pinged status=unhealthy is counted from its store row by /health.
      else if (state === 'unhealthy' && slot.selfUnhealthy === null) unhealthy.push(slot.id);
    }
    return { initializing, unhealthy, throttled: this.throttled + waiting, paused };
  }

  workers(): PoolWorkerInfo[] {
    return [...this.slots.values()].map((slot) => infoOf(slot, slot.handle));
  }

  stoppedWorkers(): PoolWorkerInfo[] {
    return this.stopped.list();
  }

  logs(workerId: string, lines: number): LogLine[] | undefined {
    return this.slots.get(workerId)?.log.tail(lines) ?? this.stopped.logs(workerId, lines);
  }

  async close(why: string): Promise<void> {
    this.closed = true;
    for (const slot of this.slots.values()) this.stop(slot.id, why);
    // A launch in flight stops its process itself once started (it sees `stopping`).
    await Promise.all([...this.slots.values()].map((s) => s.launching));
    await Promise.all([...this.slots.values()].map((s) => s.finished));
  }

  /**
   * The slot's own worker key (scope worker, this endpoint only), made when first needed and
   * kept across starts that fail before anything runs; only its hash is stored. Revoked when
   * the process that had it is gone, so a worker presumed lost cannot take or post anything.
   */
  private async workerKey(slot: Slot): Promise<string> {
    if (slot.key) return slot.key.key;
    const created = await this.options.keys.create({ name: poolKeyName(this.endpointId, slot.id), scopes: ['worker'], endpoints: [this.endpointId], managed: true });
    slot.key = { id: created.id, key: created.key };
    return created.key;
  }

  private async revokeKey(slot: Slot): Promise<void> {
    const id = slot.key?.id;
    slot.key = null;
    if (!id) return;
    try {
      await this.options.keys.revoke(id);
    } catch (err) {
      this.log.error({ err, workerId: slot.id }, 'could not revoke the key of a pool worker');
    }
  }

  /** Forgets a slot that will not run again, with its key. */
  private forget(slot: Slot, why: string): void {
    this.retire(slot, null, why);
    void this.revokeKey(slot);
  }

  /** Takes a slot that will not run again out of the pool; its log stays readable among the stopped workers. */
  private retire(slot: Slot, last: WorkerHandle | null, why: string): void {
    moveTo(slot, 'gone', why);
    this.slots.delete(slot.id);
    slot.log.note(`stopped${slot.reason ? ` (${slot.reason})` : ''}`);
    slot.log.end();
    this.options.holders?.untrack(slot.id);
    this.stopped.add({ ...infoOf(slot, last), state: 'stopped', jobs: 0, restartAt: null, stoppedAt: this.options.now() }, slot.log);
  }

  /** What the driver is asked to start: a container (the settings name an image) or a local command. */
  private startSpec(slot: Slot, apiKey: string): AnyStartSpec {
    const runpod = { endpointId: this.endpointId, workerId: slot.id, apiKey, pingIntervalMs: this.options.pingIntervalMs };
    const s = this.settings;
    if (isContainerWorker(s)) {
      const { image, command, env, gpus, gpuTypes, memoryMb, volumes, registryCredentials } = s;
      return { workerId: slot.id, endpointId: this.endpointId, image, command, env: env ?? {}, runpod, gpus, gpuTypes, memoryMb, volumes, registryCredentials };
    }
    const env = { ...s.env, ...runpodWorkerEnv({ gatewayUrl: this.options.baseUrl, ...runpod }) };
    return { workerId: slot.id, endpointId: this.endpointId, command: s.command, env, ...(s.cwd ? { cwd: s.cwd } : {}) };
  }

  private newSlot(): Slot {
    const id = `${this.endpointId}-${randomBytes(4).toString('hex')}`;
    const slot: Slot = {
      id,
      state: 'new',
      movedBecause: 'made',
      spec: this.spec,
      handle: null,
      launching: null,
      startedAt: null,
      readyAt: null,
      coldStart: null,
      resumedAt: null,
      held: 0,
      busySince: null,
      idleSince: null,
      restarts: 0,
      failures: 0,
      restartAt: null,
      reason: null,
      lastExit: null,
      selfUnhealthy: null,
      progress: null,
      pullFailed: false,
      key: null,
      log: createWorkerLog(this.options.logLines, this.options.now, this.logFeed(id, () => slot.key?.key ?? null)),
      finished: Promise.resolve(),
    };
    this.options.holders?.track(id);
    this.slots.set(slot.id, slot);
    return slot;
  }

  /** The store's feed of a new worker's lines: its key never stored, its lines filed under the one job it holds. */
  private logFeed(workerId: string, secret: () => string | null): WorkerLogFeed | undefined {
    const holders = this.options.holders;
    return this.options.logs?.open({ endpointId: this.endpointId, workerId, secret, soleJob: () => holders?.soleJob(workerId) ?? null });
  }

  private launch(slot: Slot): void {
    moveTo(slot, 'launching', slot.state === 'new' ? 'started' : 'restarted');
    slot.restartAt = null;
    slot.readyAt = null;
    slot.resumedAt = null;
    slot.coldStart = this.queued > 0 ? { from: this.options.now(), kind: 'start' } : null;
    slot.idleSince = null;
    slot.held = 0;
    slot.launching = this.startProcess(slot).finally(() => {
      slot.launching = null;
    });
  }

  private async startProcess(slot: Slot): Promise<void> {
    try {
      const apiKey = await this.workerKey(slot);
      if (slot.state === 'draining' || this.closed) {
        this.forget(slot, 'stopped before it started');
        return;
      }
      slot.startedAt = this.options.now();
      const handle = await this.options.driver.start(
        this.startSpec(slot, apiKey),
        (stream, text) => slot.log.write(stream, text),
        (description) => (slot.progress = description),
      );
      slot.progress = null;
      slot.pullFailed = false;
      slot.handle = handle;
      if (slot.state === 'launching') moveTo(slot, 'starting', 'its process runs');
      slot.log.note(`started: ${describeStart(handle, this.settings)}`);
      this.log.info({ workerId: slot.id, pid: handle.pid, host: handle.host, container: handle.container }, 'pool worker started');
      const startedAt = slot.startedAt ?? this.options.now();
      void this.options.meters?.started({ workerId: slot.id, endpointId: this.endpointId, startedAt, gpus: gpusOf(this.settings) });
      slot.finished = handle.exited.then(async (exit) => {
        // Its jobs are requeued first: the meter's write (which waits for its opening) must not hold them up.
        const meterStopped = this.options.meters?.stopped(slot.id, startedAt);
        await this.exited(slot, handle, exit);
        await meterStopped;
        await handle.removed;
      });
      if (isDraining(slot)) void handle.stop(this.options.graceMs); // stopped while it was starting
    } catch (err) {
      const message = err instanceof Error ? err.message : String(err);
      slot.progress = null;
      slot.pullFailed = err instanceof PullError;
      if (slot.state === 'draining' || this.closed) this.forget(slot, `stopped while starting (${message})`);
      else if (err instanceof NoCapacityError) this.waitForRoom(slot, message);
      else {
        slot.log.note(`could not start: ${message}`);
        this.crashed(slot, { code: null, signal: null, error: message });
      }
      this.options.onChange();
    }
  }

  /**
   * Whether the slot's current process (or, resumed, its thawed one) has polled since it was
   * started: its first job-take ends the cold start being timed. A resumed worker's store row
   * may be older than the resume; then its first write after it (`lastSeenAt`) is the poll.
   */
  private readyCheck(slot: Slot, row: WorkerRecord | undefined): void {
    const since = slot.resumedAt ?? slot.startedAt;
    if (!slot.handle || slot.readyAt !== null || !row || since === null || row.lastSeenAt < since) return;
    slot.readyAt = row.firstSeenAt >= since ? row.firstSeenAt : row.lastSeenAt;
    slot.log.note(`ready: first poll ${slot.readyAt - since} ms after ${slot.resumedAt === null ? 'start' : 'resume'}`);
    if (slot.coldStart) this.colds.record(slot.coldStart.kind, slot.readyAt - slot.coldStart.from);
    slot.coldStart = null;
    if (slot.state === 'starting') moveTo(slot, 'serving', 'it polled for a job');
  }

  /** Thaws a paused worker: handed jobs again first, then unpaused; one that cannot be is stopped (a fresh one starts on a later pass). */
  private resumeSlot(slot: Slot, why: string): void {
    const handle = slot.handle!;
    moveTo(slot, 'launching', `resumed: ${why}`);
    slot.readyAt = null;
    slot.resumedAt = this.options.now();
    slot.coldStart = this.queued > 0 ? { from: slot.resumedAt, kind: 'resume' } : null;
    slot.reason = null;
    slot.log.note(`resuming (${why})`);
    this.options.onResuming?.(slot.id);
    slot.launching = handle.resume!()
      .then(
        () => {
          if (slot.state === 'launching') moveTo(slot, 'starting', 'unpaused');
        },
        (err: unknown) => {
          const message = err instanceof Error ? err.message : String(err);
          if (slot.state === 'launching') this.stop(slot.id, `could not be resumed (${message})`);
        },
      )
      .finally(() => {
        slot.launching = null;
      });
  }

  /** No host has room for the worker now: it is throttled (RunPod: waiting for a GPU), tried again every backoff base, and not counted as a crash. */
  private waitForRoom(slot: Slot, why: string): void {
    const reason = `waiting for room: ${why}`;
    if (slot.reason !== reason) slot.log.note(reason);
    moveTo(slot, 'waiting-for-room', why);
    slot.startedAt = null;
    slot.readyAt = null;
    slot.reason = reason;
    slot.restartAt = this.options.now() + this.options.restartBackoffMs;
  }

  /** The process ended: requeue what it held, revoke its key, then restart (crash) or forget the slot. */
  private async exited(slot: Slot, handle: WorkerHandle, exit: WorkerExit): Promise<void> {
    slot.log.flush();
    slot.handle = null;
    const ranMs = this.options.now() - (slot.startedAt ?? this.options.now());
    slot.lastExit = describeExit(exit, slot.state === 'draining');
    slot.log.note(`exited: ${slot.lastExit} after ${(ranMs / 1000).toFixed(1)} s`);
    try {
      await this.releaseJobs(slot.id);
    } catch (err) {
      this.log.error({ err, workerId: slot.id }, 'could not requeue the jobs of an exited pool worker');
    }
    await this.revokeKey(slot);
    // A clean exit of a worker that served (e.g. it asked to be recycled) is not a crash.
    const clean = exit.code === 0 && slot.readyAt !== null;
    if (slot.state === 'paused') slot.reason = `its paused container ended (${slot.lastExit})`;
    if (slot.state === 'draining' || slot.state === 'paused' || this.closed || clean || slot.spec !== this.spec) {
      this.log.info({ workerId: slot.id, pid: handle.pid, host: handle.host, exit }, 'pool worker exited');
      // Stopping, closing and a settings change all went through stop(), which set the reason.
      if (slot.state !== 'draining' && slot.state !== 'paused') slot.reason = 'exited by itself after serving (code 0)';
      this.retire(slot, handle, slot.reason ?? 'exited');
    } else {
      if (ranMs >= STABLE_MS) slot.failures = 0;
      this.crashed(slot, exit);
    }
    this.options.onChange();
  }

  private crashed(slot: Slot, exit: WorkerExit): void {
    moveTo(slot, 'crashed', describeExit(exit));
    slot.handle = null;
    slot.startedAt = null;
    slot.readyAt = null;
    slot.failures += 1;
    slot.restarts += 1;
    const base = this.options.restartBackoffMs;
    const wait = Math.min(base * 2 ** (slot.failures - 1), Math.max(MAX_BACKOFF_MS, base));
    slot.restartAt = this.options.now() + wait;
    // The last REASON_LINES distinct lines, a repeated line once with its count (collapseRepeats).
    const output = collapseRepeats(
      slot.log
        .tail()
        .filter((l) => l.stream !== 'gantry' && l.line.trim() !== '')
        .map((l) => l.line.trim()),
    ).slice(-REASON_LINES);
    slot.lastExit = describeExit(exit);
    const times = `${slot.failures} time${slot.failures > 1 ? 's' : ''} in a row`;
    slot.reason = `${describeExit(exit)} (${times})${output.length > 0 ? `: ${output.join(' | ')}` : ''}`;
    slot.log.note(`restarting in ${(wait / 1000).toFixed(1)} s`);
    this.log.warn({ workerId: slot.id, failures: slot.failures, restartInMs: wait, reason: slot.reason }, 'pool worker crashed');
  }

  /** Requeues (or fails, past maxAttempts) the jobs of a worker that is gone, at once. */
  private async releaseJobs(workerId: string): Promise<void> {
    const released = await this.options.transitions.releaseWorkers([workerId]);
    if (released.requeued.length + released.failed.length > 0) {
      this.log.warn({ workerId, requeued: released.requeued.map((j) => j.id), failed: released.failed.map((j) => j.id) }, 'pool worker ended holding jobs');
    }
  }
}
