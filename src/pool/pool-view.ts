import type { LogLine } from './worker-log.js';

/**
 * States of a pool worker as the admin API shows them. /health folds them into RunPod's
 * counts: initializing, idle, running, throttled (wanted over workersMax; not a worker of its
 * own) and unhealthy; `draining` workers still count as idle or running there.
 */
export type PoolWorkerState = 'initializing' | 'idle' | 'running' | 'draining' | 'unhealthy';

/** One pool worker as `GET /admin/v1/endpoints/{id}/workers` lists it. */
export interface PoolWorkerInfo {
  id: string;
  state: PoolWorkerState;
  /** The process id (local driver: its process group leader); null while waiting to restart. */
  pid: number | null;
  /** When its current process was started (epoch ms); null while waiting to restart. */
  startedAt: number | null;
  /** When its current process first polled for a job; null until then. */
  readyAt: number | null;
  /** Jobs it holds. */
  jobs: number;
  /** How often it was started again after exiting on its own. */
  restarts: number;
  /** Why it is unhealthy, draining or was restarted last: exit status and its last output lines. */
  reason: string | null;
  /** When a worker waiting after a crash is started again (epoch ms). */
  restartAt: number | null;
}

/** What the pool on this gateway tells /health about one endpoint. */
export interface PoolHealth {
  /** Workers started but not yet polling (health leaves out those the store already shows polling). */
  initializing: string[];
  /** Crash-looping workers (health leaves out those the store already shows polling). */
  unhealthy: string[];
  /** Workers the scaler wants beyond workersMax. */
  throttled: number;
}

/** Read access to the worker pool, for /health and the admin API. */
export interface PoolView {
  health(endpointId: string): PoolHealth | undefined;
  /** Undefined when this gateway runs no pool for the endpoint. */
  workers(endpointId: string): PoolWorkerInfo[] | undefined;
  /** The last `lines` log lines of a pool worker; undefined when there is no such worker. */
  logs(endpointId: string, workerId: string, lines: number): LogLine[] | undefined;
}
