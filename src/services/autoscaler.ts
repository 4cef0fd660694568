import type { Logger } from 'pino';
import { poolStopGraceMs, workerPingIntervalMs, type GantryConfig } from '../config/config.js';
import type { WorkerSettings } from '../jobs/endpoint-settings.js';
import type { EndpointService } from '../jobs/endpoint-service.js';
import type { PoolView } from '../jobs/pool-view.js';
import type { JobTransitions } from '../jobs/transitions.js';
import type { Notifier } from '../model/events.js';
import type { WorkerDriver } from '../pool/driver.js';
import { createWorkerPool, POOL_KEY_NAME, type WorkerPool } from '../pool/worker-pool.js';
import type { KeyService } from '../security/keys.js';
import type { JobStore, UsageStore, WorkerStore } from '../store/store.js';
import type { Clock } from '../util/clock.js';
import { periodic, type Periodic } from '../util/periodic.js';
import type { EndpointRecord } from '../model/records.js';
import { isContainerWorker } from '../jobs/endpoint-settings.js';
import { allocate, type EndpointAllocation, type EndpointDemand } from './allocator.js';
import { PoolSet } from './pool-set.js';
import type { WorkerMeters } from '../pool/worker-meters.js';
import type { JobHolders } from '../pool/job-holders.js';
import type { LogWriter } from '../pool/log-writer.js';
import { planScale } from './scale-policy.js';

/** One endpoint's part of a pass: its pool, what its scaler wants, and what the allocator is asked. */
interface Planned {
  pool: WorkerPool;
  endpoint: EndpointRecord;
  /** New workers wanted (planScale's start, and replacements of a rolled pool). */
  fresh: number;
  /** Its workers already waiting for room. */
  waiting: number;
  demand: EndpointDemand;
}

/** What the autoscaler uses. */
export interface AutoscalerDeps {
  store: Pick<JobStore, 'queueStats'> & Pick<WorkerStore, 'listWorkers'> & Pick<UsageStore, 'recordColdStart' | 'readColdStarts'>;
  endpoints: Pick<EndpointService, 'list'>;
  keys: Pick<KeyService, 'create' | 'revoke' | 'revokeNamed'>;
  transitions: Pick<JobTransitions, 'releaseWorkers' | 'preempt'>;
  notifier: Pick<Notifier, 'subscribe' | 'publish'>;
  /** How workers are started: local processes, or containers for endpoints that name an image (src/pool). */
  driver: WorkerDriver;
  /** Worker settings of endpoints whose workers a feature provides (the image endpoints), by endpoint id. */
  builtIns: ReadonlyMap<string, WorkerSettings>;
  /** Base URL of the gateway as workers reach it: config.publicUrl, else the gateway's own URL (known once it listens). */
  baseUrl(): string;
  config: Pick<GantryConfig, 'autoscalerIntervalMs' | 'workerStopGraceMs' | 'jobTakeWaitMs' | 'workerRestartBackoffMs' | 'workerLostMs' | 'stoppedWorkersKept' | 'stoppedWorkersKeptMs'>;
  /** Lines kept per worker log (default 500). */
  logLines?: number;
  logger: Logger;
  clock: Clock;
  /** Meters each pool worker from start to stop (worker seconds, docs/api.md "Usage"). */
  meters?: WorkerMeters;
  /** Stores the pool workers' lines (docs/logs.md); flushed once the pools are closed. */
  logs?: LogWriter;
  /** Which job each pool worker holds, for its lines. */
  holders?: JobHolders;
}

/**
 * The autoscaler (docs/scaling.md): for every endpoint with worker settings (its `worker`
 * command or image, or a feature's built-in worker) it keeps a pool of workers sized by
 * planScale, and each pass one allocator (allocator.ts) decides across all endpoints who gets
 * the fleet's GPUs: starts, reclaimed and preempted workers, and who waits. It runs every `autoscalerIntervalMs`, and at once when an endpoint changes, when a
 * job arrives at an endpoint with no worker, and when a worker exits. A singleton: with several
 * gateways only the leader runs it. `view` answers for its pools while it runs.
 */
export interface Autoscaler {
  /** The pools for /health and the admin API (undefined answers while stopped). */
  readonly view: PoolView;
  /** Passes finished since it was made (tests wait on a count). */
  readonly passes: number;
  /** Resolves when a pass that begins after this call has finished (at once while stopped). */
  nextPass(): Promise<void>;
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
  private readonly pools: PoolSet;
  private readonly loop: Periodic;
  /** Between start() and stop(); a stopped autoscaler can be started again (leadership came back). */
  private active = false;
  private stopping: Promise<void> | undefined;
  private unsubscribe: (() => void) | undefined;
  /** The clean-up of an earlier run; the first pass waits for it, so no new pool key is deleted. */
  private cleanedUp: Promise<void> = Promise.resolve();

  constructor(private readonly deps: AutoscalerDeps) {
    this.pools = new PoolSet({ driver: deps.driver, create: (id) => this.createPool(id), running: () => this.active, logger: deps.logger });
    this.view = this.pools.view;
    this.loop = periodic({ name: 'autoscaler', everyMs: deps.config.autoscalerIntervalMs, pass: () => this.pass(), logger: deps.logger, clock: deps.clock, runAtStart: true });
  }

  get passes(): number {
    return this.loop.passes;
  }

  nextPass(): Promise<void> {
    return this.loop.nextPass();
  }

  start(): void {
    if (this.active) return;
    this.active = true;
    this.stopping = undefined;
    this.cleanedUp = this.cleanUpAfterEarlierRun();
    this.unsubscribe = this.deps.notifier.subscribe((event) => {
      if (event.type === 'endpoint-changed') this.loop.kick();
      else if (event.type === 'jobs-available') {
        // Cold start: an endpoint with no worker gets one without waiting for the next pass.
        const pool = this.pools.get(event.endpointId);
        if (pool && pool.active().length === 0) this.loop.kick();
      } else if (event.type === 'worker-recycle') {
        this.pools.get(event.endpointId)?.stop(event.workerId, 'the worker asked to be recycled (stopPod)');
        this.loop.kick();
      }
    });
    this.loop.start();
    this.deps.meters?.start();
  }

  stop(): Promise<void> {
    if (!this.active) return this.stopping ?? Promise.resolve();
    this.active = false;
    this.stopping = (async () => {
      this.unsubscribe?.();
      await this.loop.stop();
      await this.pools.closeAll('the autoscaler is stopping (gateway shutdown or leadership lost)');
      // The workers' last lines and their stop notes, before the store closes.
      await this.deps.logs?.flush();
      await this.deps.meters?.stop();
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
      const reaped = (await this.deps.driver.reapOrphans?.(poolStopGraceMs(this.deps.config))) ?? 0;
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
      graceMs: poolStopGraceMs(config),
      restartBackoffMs: config.workerRestartBackoffMs,
      logLines: this.deps.logLines ?? 500,
      stoppedWorkers: { max: config.stoppedWorkersKept, keepMs: config.stoppedWorkersKeptMs },
      pingIntervalMs: workerPingIntervalMs(config),
      logger: this.deps.logger,
      now: this.deps.clock.now,
      onChange: () => this.loop.kick(),
      onStopping: (workerId) => this.deps.notifier.publish({ type: 'worker-stopping', workerId, endpointId }),
      onResuming: (workerId) => this.deps.notifier.publish({ type: 'worker-resuming', workerId, endpointId }),
      ...(this.deps.meters ? { meters: this.deps.meters } : {}),
      ...(this.deps.logs ? { logs: this.deps.logs } : {}),
      ...(this.deps.holders ? { holders: this.deps.holders } : {}),
      coldStartLedger: this.deps.store,
    });
  }

  /** Reads the endpoint's queue and workers, applies its scale-down, and says what it wants of the fleet. */
  private async plan(pool: WorkerPool, endpoint: EndpointRecord, settings: WorkerSettings): Promise<Planned | null> {
    const retired = pool.configure(settings);
    const now = this.deps.clock.now();
    const [stats, rows] = await Promise.all([this.deps.store.queueStats({ endpointId: endpoint.id, now }), this.deps.store.listWorkers(endpoint.id)]);
    if (!this.active) return null;
    pool.observe(stats, rows, now);
    const plan = planScale({ endpoint, stats, now, workers: pool.active() });
    pool.setThrottled(plan.throttled);
    // flashboot: idle workers are paused into the warm pool (at most workersMax of them), not stopped.
    const why = `scaled down (idle for ${endpoint.idleTimeout} s or over workersMax)`;
    for (const id of plan.stop) {
      if (endpoint.flashboot) pool.park(id, why);
      else pool.stop(id, why);
    }
    pool.trimPaused(endpoint.flashboot ? endpoint.workersMax : 0, endpoint.flashboot ? 'more paused workers than workersMax' : 'flashboot is off');
    let workers = pool.active();
    // Waiting for a GPU with no job left to run: beyond workersMin they go at once.
    const running = workers.filter((w) => !w.waiting).length;
    if (stats.inQueueNormal === 0) {
      for (const w of workers.filter((x) => x.waiting).slice(Math.max(0, endpoint.workersMin - running))) pool.stop(w.id, 'no job waits for it any more');
      workers = pool.active();
    }
    // A rolled pool gets as many new workers as old ones were running.
    const fresh = plan.start + Math.max(0, Math.min(retired, endpoint.workersMax) - workers.length - plan.start);
    const waiting = workers.filter((w) => w.waiting).length;
    // Exact device ids are not the allocator's to give: the driver places those as asked.
    const gpus = isContainerWorker(settings) && typeof settings.gpus === 'number' ? settings.gpus : 0;
    // Every field present, in allocate's order (its `oneShape`): demands of one hidden class are
    // read without a miss; spreads of optional fields made several, and their reads cost ~11 M
    // instructions a decision at 1,000 endpoints (docs/scaling.md).
    const demand: EndpointDemand = {
      id: endpoint.id,
      priority: endpoint.priority,
      shareWeight: endpoint.shareWeight,
      preemptible: endpoint.preemptible,
      workersMin: endpoint.workersMin,
      gpus,
      gpuTypes: isContainerWorker(settings) && settings.gpuTypes ? settings.gpuTypes : undefined,
      image: isContainerWorker(settings) ? settings.image : undefined,
      workers: workers
        .filter((w) => !w.waiting)
        .map((w) => ({ id: w.id, busy: w.busy, starting: w.starting, ...(w.busySince != null ? { busySince: w.busySince } : {}) })),
      paused: pool.paused(),
      want: fresh + waiting,
      waitingSince: stats.oldestNormalQueuedAt,
    };
    return { pool, endpoint, fresh, waiting, demand };
  }

  /** Carries out the allocator's decision for one endpoint: stops for others, preemptions, starts, and who waits. */
  private async apply(p: Planned, a: EndpointAllocation): Promise<void> {
    const { pool } = p;
    for (const order of a.reclaim) pool.stop(order.workerId, order.why);
    for (const order of a.preempt) {
      // Requeued (uncounted) and named in the worker's job-stop before its SIGTERM, which answers that poll.
      const requeued = await this.deps.transitions.preempt(order.workerId);
      this.deps.logger.warn({ endpointId: p.endpoint.id, workerId: order.workerId, jobs: requeued.map((j) => j.id), why: order.why }, 'pool worker preempted');
      pool.stop(order.workerId, order.why);
    }
    const now = this.deps.clock.now();
    // Its paused workers first (flashboot: they hold their GPUs), then those waiting for room, then new ones.
    const resumed = pool.resume(a.start);
    const granted = a.start - resumed;
    pool.launchWaiting(Math.min(granted, p.waiting), now);
    const fresh = Math.max(0, granted - p.waiting);
    pool.start(fresh);
    pool.hold(Math.max(0, p.fresh - resumed - fresh), a.reason ?? 'waiting for room');
    pool.restartDue(now);
  }

  private async pass(): Promise<void> {
    await this.cleanedUp;
    const wanted = new Set<string>();
    const planned: Planned[] = [];
    for (const endpoint of await this.deps.endpoints.list()) {
      const settings = workerSettingsOf(endpoint, this.deps.builtIns);
      if (settings === null || !this.active) continue;
      wanted.add(endpoint.id);
      try {
        const p = await this.plan(this.pools.ensure(endpoint.id), endpoint, settings);
        if (p) planned.push(p);
      } catch (err) {
        this.deps.logger.error({ err, endpointId: endpoint.id }, 'autoscaler pass failed for an endpoint');
      }
    }
    if (!this.active) return;
    const decided = allocate({ now: this.deps.clock.now(), hosts: this.deps.driver.loads?.() ?? [], endpoints: planned.map((p) => p.demand) });
    for (const p of planned) {
      try {
        await this.apply(p, decided.get(p.endpoint.id)!);
      } catch (err) {
        this.deps.logger.error({ err, endpointId: p.endpoint.id }, 'autoscaler pass failed for an endpoint');
      }
    }
    this.pools.closeOthers(wanted);
  }
}
