import type { Logger } from 'pino';
import type { GantryConfig } from '../config/config.js';
import type { WorkerSettings } from '../jobs/endpoint-settings.js';
import type { EndpointService } from '../jobs/endpoint-service.js';
import type { PoolView } from '../jobs/pool-view.js';
import type { JobTransitions } from '../jobs/transitions.js';
import type { Notifier } from '../model/events.js';
import type { WorkerDriver } from '../pool/driver.js';
import { createWorkerPool, POOL_KEY_NAME, type ActiveWorker, type WorkerPool } from '../pool/worker-pool.js';
import type { KeyService } from '../security/keys.js';
import type { JobStore, WorkerStore } from '../store/store.js';
import type { Clock } from '../util/clock.js';
import type { EndpointRecord, QueueStats } from '../model/records.js';

/** What planScale decides from. */
export interface ScaleInput {
  endpoint: Pick<EndpointRecord, 'workersMin' | 'workersMax' | 'idleTimeout' | 'scalerType' | 'scalerValue'>;
  stats: QueueStats;
  now: number;
  /** The pool's workers of the current spec that are not being stopped. */
  workers: ActiveWorker[];
}

/** What planScale decided. */
export interface ScalePlan {
  /** Workers to start. */
  start: number;
  /** Workers to drain and stop. */
  stop: string[];
  /** Workers wanted beyond workersMax (health's `throttled`). */
  throttled: number;
}

/**
 * The scaling rules (docs/scaling.md), a pure function of the endpoint's settings, its queue
 * and its workers:
 * - QUEUE_DELAY: one worker at once when normal jobs wait and there is none; one more when
 *   the oldest normal job has waited over `scalerValue` s and no worker is still starting.
 * - REQUEST_COUNT: ceil((normal jobs queued + jobs running) / scalerValue) workers.
 * - Never fewer than workersMin, never more than workersMax (the difference is `throttled`).
 * - policy.lowPriority jobs never add a worker: only normal queued jobs count.
 * - Down: workers idle for idleTimeout s beyond the floor (workersMin, or the REQUEST_COUNT
 *   demand) are stopped; workers beyond a lowered workersMax are stopped at once.
 *
 * @example
 * planScale({ endpoint, stats: { inQueue: 1, inQueueNormal: 1, oldestNormalQueuedAt: now, inProgress: 0, heldBy: new Map() }, now, workers: [] });
 * // → { start: 1, stop: [], throttled: 0 } for QUEUE_DELAY with workersMax ≥ 1
 */
export function planScale({ endpoint, stats, now, workers }: ScaleInput): ScalePlan {
  const n = workers.length;
  const max = endpoint.workersMax;
  let wanted: number;
  if (endpoint.scalerType === 'REQUEST_COUNT') {
    wanted = Math.ceil((stats.inQueueNormal + stats.inProgress) / endpoint.scalerValue);
  } else {
    wanted = n;
    const waited = stats.oldestNormalQueuedAt === null ? 0 : now - stats.oldestNormalQueuedAt;
    if (stats.inQueueNormal > 0 && n === 0) wanted = 1;
    else if (stats.inQueueNormal > 0 && waited > endpoint.scalerValue * 1000 && !workers.some((w) => w.starting)) wanted = n + 1;
  }
  const target = Math.max(endpoint.workersMin, wanted);
  const throttled = Math.max(0, target - max);
  if (Math.min(target, max) > n) return { start: Math.min(target, max) - n, stop: [], throttled };

  // Idlest first: those waiting to restart or starting, then the longest idle.
  const order = [...workers].sort(stopOrder);
  const stop: string[] = order.slice(0, Math.max(0, n - max)).map((w) => w.id);
  const floor = Math.min(max, Math.max(endpoint.workersMin, endpoint.scalerType === 'REQUEST_COUNT' ? wanted : 0));
  const idleMs = endpoint.idleTimeout * 1000;
  for (const w of order) {
    if (n - stop.length <= floor) break;
    if (stop.includes(w.id)) continue;
    if (w.idleSince !== null && now - w.idleSince >= idleMs) stop.push(w.id);
  }
  return { start: 0, stop, throttled };
}

/** Which workers to stop first: not yet serving, then idle the longest, then busy ones. */
function stopOrder(a: ActiveWorker, b: ActiveWorker): number {
  if (a.starting !== b.starting) return a.starting ? -1 : 1;
  return (a.idleSince ?? Number.MAX_SAFE_INTEGER) - (b.idleSince ?? Number.MAX_SAFE_INTEGER);
}

/** What the autoscaler uses. */
export interface AutoscalerDeps {
  store: Pick<JobStore, 'queueStats'> & Pick<WorkerStore, 'listWorkers'>;
  endpoints: Pick<EndpointService, 'list'>;
  keys: Pick<KeyService, 'create' | 'revoke' | 'revokeNamed'>;
  transitions: Pick<JobTransitions, 'releaseWorkers'>;
  notifier: Pick<Notifier, 'subscribe'>;
  /** How workers are started: local processes, or containers for endpoints that name an image (src/pool). */
  driver: WorkerDriver;
  /** Worker settings of endpoints whose workers a feature provides (the image endpoints), by endpoint id. */
  builtIns: ReadonlyMap<string, WorkerSettings>;
  /** Base URL of the gateway as workers reach it: config.publicUrl, else the gateway's own URL (known once it listens). */
  baseUrl(): string;
  config: Pick<GantryConfig, 'autoscalerIntervalMs' | 'workerStopGraceMs' | 'workerRestartBackoffMs' | 'workerLostMs' | 'stoppedWorkersKept' | 'stoppedWorkersKeptMs'>;
  /** Lines kept per worker log (default 500). */
  logLines?: number;
  logger: Logger;
  clock: Clock;
}

/**
 * The autoscaler (docs/scaling.md): for every endpoint with worker settings (its `worker`
 * command or image, or a feature's built-in worker) it keeps a pool of workers sized by
 * planScale. It runs every `autoscalerIntervalMs`, and at once when an endpoint changes, when a
 * job arrives at an endpoint with no worker, and when a worker exits. A singleton: with several
 * gateways only the leader runs it. `view` answers for its pools while it runs.
 */
export interface Autoscaler {
  /** The pools for /health and the admin API (undefined answers while stopped). */
  readonly view: PoolView;
  start(): void;
  /** Stops scaling and drains every pool worker; resolves when all have exited. A second call waits for the first. */
  stop(): Promise<void>;
}

/**
 * @example
 * const autoscaler = createAutoscaler({ store, endpoints, keys, transitions, notifier, driver, builtIns, baseUrl, config, logger, clock });
 * autoscaler.start();
 * await autoscaler.stop();
 */
export function createAutoscaler(deps: AutoscalerDeps): Autoscaler {
  return new Scaler(deps);
}

/** The worker settings of an endpoint: its own `worker` setting, else a built-in one, else none. */
function workerSettingsOf(endpoint: EndpointRecord, builtIns: ReadonlyMap<string, WorkerSettings>): WorkerSettings | null {
  if (endpoint.workerJson !== null) return JSON.parse(endpoint.workerJson) as WorkerSettings;
  return builtIns.get(endpoint.id) ?? null;
}

class Scaler implements Autoscaler {
  readonly view: PoolView;
  private readonly pools = new Map<string, WorkerPool>();
  /** Pools of deleted endpoints (or ones that lost their worker settings) still draining. */
  private readonly closing = new Set<Promise<void>>();
  private cancelTimer: (() => void) | undefined;
  private running: Promise<void> | undefined;
  private again = false;
  /** Between start() and stop(); a stopped autoscaler can be started again (leadership came back). */
  private active = false;
  private stopping: Promise<void> | undefined;
  private unsubscribe: (() => void) | undefined;
  /** The clean-up of an earlier run; the first pass waits for it, so no new pool key is deleted. */
  private cleanedUp: Promise<void> = Promise.resolve();

  constructor(private readonly deps: AutoscalerDeps) {
    this.view = {
      running: () => this.active,
      health: (endpointId) => this.pools.get(endpointId)?.health(),
      workers: (endpointId) => this.pools.get(endpointId)?.workers(),
      stoppedWorkers: (endpointId) => this.pools.get(endpointId)?.stoppedWorkers(),
      logs: (endpointId, workerId, lines) => this.pools.get(endpointId)?.logs(workerId, lines),
      hosts: () => (this.active ? (this.deps.driver.hosts?.() ?? []) : undefined),
    };
  }

  start(): void {
    if (this.active) return;
    this.active = true;
    this.stopping = undefined;
    this.cleanedUp = this.cleanUpAfterEarlierRun();
    this.unsubscribe = this.deps.notifier.subscribe((event) => {
      if (event.type === 'endpoint-changed') this.kick();
      else if (event.type === 'jobs-available') {
        // Cold start: an endpoint with no worker gets one without waiting for the next pass.
        const pool = this.pools.get(event.endpointId);
        if (pool && pool.active().length === 0) this.kick();
      } else if (event.type === 'worker-recycle') {
        this.pools.get(event.endpointId)?.stop(event.workerId, 'the worker asked to be recycled (stopPod)');
        this.kick();
      }
    });
    this.kick();
  }

  stop(): Promise<void> {
    if (!this.active) return this.stopping ?? Promise.resolve();
    this.active = false;
    this.stopping = (async () => {
      this.unsubscribe?.();
      this.cancelTimer?.();
      this.cancelTimer = undefined;
      await this.running;
      const all = [...this.pools.values()];
      this.pools.clear();
      await Promise.all(all.map((pool) => pool.close('the autoscaler is stopping (gateway shutdown or leadership lost)')));
      await Promise.all(this.closing);
      this.deps.driver.close?.();
    })();
    return this.stopping;
  }

  /**
   * Workers an earlier gateway process started and never stopped (it was killed) are stopped,
   * and the pool keys it made are deleted, so they cannot come back. Runs when this gateway
   * becomes the one running the pools, before any pool of its own exists.
   */
  private async cleanUpAfterEarlierRun(): Promise<void> {
    try {
      const reaped = (await this.deps.driver.reapOrphans?.(this.deps.config.workerStopGraceMs)) ?? 0;
      const keys = await this.deps.keys.revokeNamed(POOL_KEY_NAME);
      if (reaped + keys > 0) this.deps.logger.warn({ workers: reaped, keys }, 'stopped the pool workers and keys an earlier gateway process left behind');
    } catch (err) {
      this.deps.logger.error({ err }, 'cleaning up after an earlier gateway process failed');
    }
  }

  private createPool(endpointId: string): WorkerPool {
    const { config } = this.deps;
    return createWorkerPool({
      endpointId,
      driver: this.deps.driver,
      keys: this.deps.keys,
      transitions: this.deps.transitions,
      baseUrl: this.deps.baseUrl(),
      graceMs: config.workerStopGraceMs,
      restartBackoffMs: config.workerRestartBackoffMs,
      logLines: this.deps.logLines ?? 500,
      stoppedWorkers: { max: config.stoppedWorkersKept, keepMs: config.stoppedWorkersKeptMs },
      pingIntervalMs: Math.max(1_000, Math.min(10_000, Math.floor(config.workerLostMs / 3))),
      logger: this.deps.logger,
      now: this.deps.clock.now,
      onChange: () => this.kick(),
    });
  }

  private async scaleEndpoint(pool: WorkerPool, endpoint: EndpointRecord, settings: WorkerSettings): Promise<void> {
    const retired = pool.configure(settings);
    const now = this.deps.clock.now();
    const [stats, rows] = await Promise.all([this.deps.store.queueStats({ endpointId: endpoint.id, now }), this.deps.store.listWorkers(endpoint.id)]);
    if (!this.active) return;
    pool.observe(stats, rows, now);
    const workers = pool.active();
    const plan = planScale({ endpoint, stats, now, workers });
    pool.setThrottled(plan.throttled);
    for (const id of plan.stop) pool.stop(id, `scaled down (idle for ${endpoint.idleTimeout} s or over workersMax)`);
    // A rolled pool gets as many new workers as old ones were running.
    const replace = Math.max(0, Math.min(retired, endpoint.workersMax) - workers.length - plan.start);
    pool.start(plan.start + replace);
    pool.restartDue(now);
  }

  private async pass(): Promise<void> {
    await this.cleanedUp;
    const wanted = new Set<string>();
    for (const endpoint of await this.deps.endpoints.list()) {
      const settings = workerSettingsOf(endpoint, this.deps.builtIns);
      if (settings === null || !this.active) continue;
      wanted.add(endpoint.id);
      let pool = this.pools.get(endpoint.id);
      if (!pool) this.pools.set(endpoint.id, (pool = this.createPool(endpoint.id)));
      try {
        await this.scaleEndpoint(pool, endpoint, settings);
      } catch (err) {
        this.deps.logger.error({ err, endpointId: endpoint.id }, 'autoscaler pass failed for an endpoint');
      }
    }
    for (const [id, pool] of this.pools) {
      if (wanted.has(id) || !this.active) continue;
      this.pools.delete(id);
      const done = pool.close('the endpoint was deleted or has no worker command').catch((err: unknown) => {
        this.deps.logger.error({ err, endpointId: id }, 'closing a worker pool failed');
      });
      this.closing.add(done);
      void done.finally(() => this.closing.delete(done));
    }
  }

  /** Runs a pass now, or right after the one in progress. */
  private kick(): void {
    if (!this.active) return;
    if (this.running) {
      this.again = true;
      return;
    }
    this.cancelTimer?.();
    this.cancelTimer = undefined;
    this.running = this.pass()
      .catch((err: unknown) => this.deps.logger.error({ err }, 'autoscaler pass failed'))
      .finally(() => {
        this.running = undefined;
        if (!this.active) return;
        if (this.again) {
          this.again = false;
          this.kick();
        } else {
          this.cancelTimer = this.deps.clock.after(this.deps.config.autoscalerIntervalMs, () => this.kick());
        }
      });
  }
}
