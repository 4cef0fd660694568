import type { Logger } from 'pino';
import type { PoolView } from '../jobs/pool-view.js';
import type { WorkerDriver } from '../pool/driver.js';
import type { WorkerPool } from '../pool/worker-pool.js';

/**
 * The worker pools of the autoscaler, one per endpoint with worker settings: made on first
 * use, closed (drained) when their endpoint is deleted or loses its worker settings, all
 * closed when the autoscaler stops. `view` answers /health and the admin API for them.
 */
export class PoolSet {
  private readonly pools = new Map<string, WorkerPool>();
  /** Pools of deleted endpoints (or ones that lost their worker settings) still draining. */
  private readonly closing = new Set<Promise<void>>();
  readonly view: PoolView;

  constructor(
    private readonly deps: {
      driver: Pick<WorkerDriver, 'hosts'>;
      /** Makes the pool of an endpoint. */
      create(endpointId: string): WorkerPool;
      /** Whether the pools run (the autoscaler is started): the view answers only then. */
      running(): boolean;
      logger: Logger;
    },
  ) {
    this.view = {
      running: () => deps.running(),
      health: (endpointId) => this.pools.get(endpointId)?.health(),
      workers: (endpointId) => this.pools.get(endpointId)?.workers(),
      stoppedWorkers: (endpointId) => this.pools.get(endpointId)?.stoppedWorkers(),
      logs: (endpointId, workerId, lines) => this.pools.get(endpointId)?.logs(workerId, lines),
      hosts: () => (deps.running() ? (deps.driver.hosts?.() ?? []) : undefined),
      coldStarts: (endpointId) => this.pools.get(endpointId)?.coldStarts(),
    };
  }

  get(endpointId: string): WorkerPool | undefined {
    return this.pools.get(endpointId);
  }

  /** The pools, in the order they were made. */
  all(): WorkerPool[] {
    return [...this.pools.values()];
  }

  /** The endpoint's pool, made now if it has none. */
  ensure(endpointId: string): WorkerPool {
    let pool = this.pools.get(endpointId);
    if (!pool) this.pools.set(endpointId, (pool = this.deps.create(endpointId)));
    return pool;
  }

  /** Closes (in the background) the pools of endpoints not in `wanted`. */
  closeOthers(wanted: ReadonlySet<string>): void {
    for (const [id, pool] of this.pools) {
      if (wanted.has(id)) continue;
      this.pools.delete(id);
      const done = pool.close('the endpoint was deleted or has no worker command').catch((err: unknown) => {
        this.deps.logger.error({ err, endpointId: id }, 'closing a worker pool failed');
      });
      this.closing.add(done);
      void done.finally(() => this.closing.delete(done));
    }
  }

  /** Closes every pool and waits for all of them (and those already closing) to drain. */
  async closeAll(why: string): Promise<void> {
    const all = [...this.pools.values()];
    this.pools.clear();
    await Promise.all(all.map((pool) => pool.close(why)));
    await Promise.all(this.closing);
  }
}
