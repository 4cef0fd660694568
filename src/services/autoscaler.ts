import { join } from 'node:path';
import type { App } from '../app.js';
import type { WorkerDriver } from '../pool/driver.js';
import { createLocalProcessDriver } from '../pool/local-process-driver.js';
import type { PoolView } from '../pool/pool-view.js';
import { createWorkerPool, POOL_KEY_NAME, type ActiveWorker, type WorkerPool } from '../pool/worker-pool.js';
import type { EndpointRecord, QueueStats } from '../store/store.js';

export interface AutoscalerOptions {
  /** Base URL of the gateway as workers reach it: config.publicUrl, else the gateway's own URL. */
  baseUrl: string;
  /** How worker processes are started; the local-process driver by default. */
  driver?: WorkerDriver;
  /** Lines kept per worker log (default 500). */
  logLines?: number;
}

export interface ScaleInput {
  endpoint: Pick<EndpointRecord, 'workersMin' | 'workersMax' | 'idleTimeout' | 'scalerType' | 'scalerValue'>;
  stats: QueueStats;
  now: number;
  /** The pool's workers of the current spec that are not being stopped. */
  workers: ActiveWorker[];
}

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
 * planScale({ endpoint, stats: { inQueue: 1, inQueueNormal: 1, oldestNormalQueuedAt: now, inProgress: 0, heldBy: {} }, now, workers: [] });
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

/**
 * The autoscaler (DESIGN.md §3): for every endpoint with a `worker` command it keeps a pool of
 * worker processes sized by planScale. It runs every `autoscalerIntervalMs`, and at once when
 * an endpoint changes, when a job arrives at an endpoint with no worker, and when a worker
 * exits. A singleton: with several gateways only the leader runs it. `stop` drains every pool
 * worker (SIGTERM, grace, SIGKILL) and may be called twice.
 *
 * @example
 * const autoscaler = createAutoscaler(app, { baseUrl: 'http://127.0.0.1:8080' });
 * autoscaler.start();
 * await autoscaler.stop();
 */
export function createAutoscaler(app: App, options: AutoscalerOptions) {
  // Pid files under the data folder let the next start stop workers a killed gateway left behind.
  const driver = options.driver ?? createLocalProcessDriver({ stateDir: join(app.config.dataDir, 'pool') });
  const pools = new Map<string, WorkerPool>();
  /** Pools of deleted endpoints (or ones that lost their worker command) still draining. */
  const closing = new Set<Promise<void>>();
  let timer: NodeJS.Timeout | undefined;
  let running: Promise<void> | undefined;
  let again = false;
  /** Between start() and stop(); a stopped autoscaler can be started again (leadership came back). */
  let active = false;
  let stopping: Promise<void> | undefined;
  let unsubscribe: (() => void) | undefined;

  /**
   * Workers an earlier gateway process started and never stopped (it was killed) are stopped,
   * and the pool keys it made are deleted, so they cannot come back. Runs when this gateway
   * becomes the one running the pools, before any pool of its own exists.
   */
  async function cleanUpAfterEarlierRun(): Promise<void> {
    try {
      const reaped = (await driver.reapOrphans?.(app.config.workerStopGraceMs)) ?? 0;
      const stale = (await app.store.listKeys()).filter((k) => POOL_KEY_NAME.test(k.name));
      for (const key of stale) await app.store.deleteKey(key.id);
      if (stale.length > 0) app.auth.forget();
      if (reaped + stale.length > 0) app.logger.warn({ workers: reaped, keys: stale.length }, 'stopped the pool workers and keys an earlier gateway process left behind');
    } catch (err) {
      app.logger.error({ err }, 'cleaning up after an earlier gateway process failed');
    }
  }

  function createPool(endpointId: string): WorkerPool {
    return createWorkerPool(endpointId, {
      app,
      driver,
      baseUrl: options.baseUrl,
      graceMs: app.config.workerStopGraceMs,
      restartBackoffMs: app.config.workerRestartBackoffMs,
      logLines: options.logLines ?? 500,
      onChange: kick,
    });
  }

  async function scaleEndpoint(pool: WorkerPool, endpoint: EndpointRecord): Promise<void> {
    const retired = pool.configure(endpoint);
    const now = app.now();
    const [stats, rows] = await Promise.all([app.store.queueStats({ endpointId: endpoint.id, now }), app.store.listWorkers(endpoint.id)]);
    if (!active) return;
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

  /** The clean-up of an earlier run; the first pass waits for it, so no new pool key is deleted. */
  let cleanedUp: Promise<void> = Promise.resolve();

  async function pass(): Promise<void> {
    await cleanedUp;
    const endpoints = await app.store.listEndpoints();
    const wanted = new Set<string>();
    for (const endpoint of endpoints) {
      if (endpoint.workerJson === null || !active) continue;
      wanted.add(endpoint.id);
      let pool = pools.get(endpoint.id);
      if (!pool) pools.set(endpoint.id, (pool = createPool(endpoint.id)));
      try {
        await scaleEndpoint(pool, endpoint);
      } catch (err) {
        app.logger.error({ err, endpointId: endpoint.id }, 'autoscaler pass failed for an endpoint');
      }
    }
    for (const [id, pool] of pools) {
      if (wanted.has(id) || !active) continue;
      pools.delete(id);
      const done = pool.close('the endpoint was deleted or has no worker command').catch((err: unknown) => {
        app.logger.error({ err, endpointId: id }, 'closing a worker pool failed');
      });
      closing.add(done);
      void done.finally(() => closing.delete(done));
    }
  }

  /** Runs a pass now, or right after the one in progress. */
  function kick(): void {
    if (!active) return;
    if (running) {
      again = true;
      return;
    }
    if (timer) clearTimeout(timer);
    timer = undefined;
    running = pass()
      .catch((err: unknown) => app.logger.error({ err }, 'autoscaler pass failed'))
      .finally(() => {
        running = undefined;
        if (!active) return;
        if (again) {
          again = false;
          kick();
        } else {
          timer = setTimeout(kick, app.config.autoscalerIntervalMs);
          timer.unref();
        }
      });
  }

  const view: PoolView = {
    health: (endpointId) => pools.get(endpointId)?.health(),
    workers: (endpointId) => pools.get(endpointId)?.workers(),
    logs: (endpointId, workerId, lines) => pools.get(endpointId)?.logs(workerId, lines),
  };

  return {
    view,
    /** The pools by endpoint id (tests and the benchmark read them). */
    pools: pools as ReadonlyMap<string, WorkerPool>,
    start(): void {
      if (active) return;
      active = true;
      stopping = undefined;
      app.pool.view = view;
      cleanedUp = cleanUpAfterEarlierRun();
      unsubscribe = app.notifier.subscribe((event) => {
        if (event.type === 'endpoint-changed') kick();
        else if (event.type === 'jobs-available') {
          // Cold start: an endpoint with no worker gets one without waiting for the next pass.
          const pool = pools.get(event.endpointId);
          if (pool && pool.active().length === 0) kick();
        } else if (event.type === 'worker-recycle') {
          pools.get(event.endpointId)?.stop(event.workerId, 'the worker asked to be recycled (stopPod)');
          kick();
        }
      });
      kick();
    },
    /** Stops scaling and drains every pool worker; resolves when all have exited. A second call waits for the first. */
    stop(): Promise<void> {
      if (!active) return stopping ?? Promise.resolve();
      active = false;
      stopping = (async () => {
        unsubscribe?.();
        if (timer) clearTimeout(timer);
        timer = undefined;
        await running;
        const all = [...pools.values()];
        pools.clear();
        await Promise.all(all.map((pool) => pool.close('the autoscaler is stopping (gateway shutdown or leadership lost)')));
        await Promise.all(closing);
        if (app.pool.view === view) app.pool.view = null;
      })();
      return stopping;
    },
  };
}

export type Autoscaler = ReturnType<typeof createAutoscaler>;
