import type { Logger } from 'pino';
import type { UsageStore } from '../store/store.js';
import type { Clock } from '../util/clock.js';
import { periodic, type Periodic } from '../util/periodic.js';
import { isContainerWorker, type WorkerSettings } from '../jobs/endpoint-settings.js';

/** How often the end of a running worker's meter is moved forward (what a killed gateway loses at most). */
export const WORKER_METER_EVERY_MS = 30_000;

/**
 * Worker seconds (docs/api.md, "Usage"): each pool worker process is metered from its start
 * (the pool asked the driver for it: cold start included) to its exit, idle and running alike,
 * as RunPod bills, with the GPUs it holds. The meter is written when the process runs, its
 * end moved forward every WORKER_METER_EVERY_MS while it runs, and its stop written once
 * when it exits. A gateway killed with its workers leaves the last end it wrote (up to
 * WORKER_METER_EVERY_MS short); the next one running the pools stops those workers anew.
 */
export interface WorkerMeters {
  /** A worker's process runs since `startedAt`; resolves once its meter is written. */
  started(args: { workerId: string; endpointId: string; startedAt: number; gpus: number }): Promise<void>;
  /** The process started at `startedAt` exited now: its stop is written once. */
  stopped(workerId: string, startedAt: number): Promise<void>;
  /** Starts moving the running meters' ends forward. */
  start(): void;
  stop(): Promise<void>;
}

/** GPUs a worker of these settings holds: a count, or the number of device ids; none for a local process. */
export function gpusOf(settings: WorkerSettings): number {
  if (!isContainerWorker(settings) || settings.gpus === undefined) return 0;
  return typeof settings.gpus === 'number' ? settings.gpus : settings.gpus.length;
}

/** @example const meters = createWorkerMeters({ store, clock, logger }); meters.start(); await meters.started({ workerId, endpointId, startedAt, gpus: 1 }); */
export function createWorkerMeters(deps: { store: Pick<UsageStore, 'openWorkerMeter' | 'advanceWorkerMeters' | 'closeWorkerMeter'>; clock: Clock; logger: Logger; everyMs?: number }): WorkerMeters {
  return new Meters(deps);
}

class Meters implements WorkerMeters {
  /** Running workers' meters, by `${workerId} ${startedAt}` (as many as pool workers run). */
  private readonly running = new Map<string, { workerId: string; startedAt: number; opened: Promise<void> }>();
  private readonly loop: Periodic;

  constructor(private readonly deps: { store: Pick<UsageStore, 'openWorkerMeter' | 'advanceWorkerMeters' | 'closeWorkerMeter'>; clock: Clock; logger: Logger; everyMs?: number }) {
    this.loop = periodic({ name: 'worker meters', everyMs: deps.everyMs ?? WORKER_METER_EVERY_MS, pass: () => this.advance(), logger: deps.logger, clock: deps.clock });
  }

  started(args: { workerId: string; endpointId: string; startedAt: number; gpus: number }): Promise<void> {
    const opened = this.deps.store
      .openWorkerMeter({ ...args, endedAt: args.startedAt, open: true })
      .catch((err: unknown) => this.deps.logger.error({ err, workerId: args.workerId }, 'worker meter write failed'));
    this.running.set(`${args.workerId} ${args.startedAt}`, { workerId: args.workerId, startedAt: args.startedAt, opened });
    return opened;
  }

  async stopped(workerId: string, startedAt: number): Promise<void> {
    const at = this.deps.clock.now();
    const id = `${workerId} ${startedAt}`;
    const meter = this.running.get(id);
    this.running.delete(id);
    try {
      await meter?.opened;
      await this.deps.store.closeWorkerMeter({ workerId, startedAt, at });
    } catch (err) {
      this.deps.logger.error({ err, workerId }, 'worker meter stop write failed');
    }
  }

  start(): void {
    this.loop.start();
  }

  stop(): Promise<void> {
    return this.loop.stop();
  }

  private async advance(): Promise<void> {
    const meters = [...this.running.values()].map(({ workerId, startedAt }) => ({ workerId, startedAt }));
    await this.deps.store.advanceWorkerMeters({ meters, at: this.deps.clock.now() });
  }
}
