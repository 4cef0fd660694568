/** Where a log line came from: the worker's stdout or stderr, or Gantry's own notes about it. */
export type LogStream = 'stdout' | 'stderr' | 'gantry';

/** One line of a pool worker's log. */
export interface LogLine {
  /** Epoch milliseconds when the line was complete. */
  at: number;
  stream: LogStream;
  line: string;
}

/**
 * States of a pool worker as the admin API shows them. /health folds them into RunPod's
 * counts: initializing, idle, running, throttled (wanted over workersMax, or waiting for a
 * host with room: no Docker host has the GPUs it asks for) and unhealthy; `draining` workers
 * still count as idle or running there. `paused` workers (flashboot's warm pool: an idle
 * container paused, its GPUs still held, resumed when a job comes) and `stopped` workers
 * (gone, their log kept for a while) count nowhere.
 */
export type PoolWorkerState = 'initializing' | 'idle' | 'running' | 'draining' | 'throttled' | 'unhealthy' | 'paused' | 'stopped';

/** How a cold start's worker came: a new process or container (or one restarted after a crash), or resumed from the warm pool (flashboot). */
export type ColdStartKind = 'start' | 'resume';

/** Cold starts counted since the pool was made, with p70/p90/p98 over the last ones (cold-starts.ts WINDOW); durations in ms, null while none. */
export interface ColdStartSummary {
  count: number;
  /** How many of the latest cold starts the quantiles are over. */
  window: number;
  p70Ms: number | null;
  p90Ms: number | null;
  p98Ms: number | null;
  lastMs: number | null;
}

/** Histogram buckets as plain numbers (cold-starts.ts COLD_START_BOUNDS, seconds; the last is +Inf). */
export interface ColdStartHistogram {
  readonly counts: Float64Array;
  sum: number;
  count: number;
}

/** One endpoint's cold starts (docs/scaling.md, "Cold starts"): all kinds together, then per kind. */
export interface ColdStartStats extends ColdStartSummary {
  start: ColdStartSummary;
  resume: ColdStartSummary;
  /** For /metrics. */
  buckets: Record<ColdStartKind, ColdStartHistogram>;
}

/** One pool worker as `GET /admin/v1/endpoints/{id}/workers` lists it. */
export interface PoolWorkerInfo {
  id: string;
  state: PoolWorkerState;
  /** The process id (local driver: its process group leader); null for a container, and while waiting to restart. */
  pid: number | null;
  /** The Docker host it runs on; null for a local process, and while waiting to restart. */
  host: string | null;
  /** Its container id (12 hex); null for a local process. */
  container: string | null;
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
  /** What its start is doing while it takes a while: `pulling 43%` (its image pulled onto its host); null otherwise. */
  progress: string | null;
  /** When a worker waiting after a crash is started again (epoch ms). */
  restartAt: number | null;
  /** How its last process ended (`exited with code 3`, `killed by SIGKILL`); null while its first one runs. */
  lastExit: string | null;
  /** When it stopped for good (epoch ms); null unless `stopped`. */
  stoppedAt: number | null;
}

/** One Docker host of the worker pool: its health and load (the admin API's hosts view). */
export interface PoolHostInfo {
  name: string;
  /** The engine URL (no credentials: TLS files and SSH keys stay in the settings). */
  url: string;
  /** `unknown` until the first health check answers or fails. */
  state: 'up' | 'down' | 'unknown';
  gpus: number;
  gpusInUse: number;
  /** Per GPU model (`GPU` where the settings name none): devices and devices in use. */
  gpuTypes: Record<string, { gpus: number; inUse: number }>;
  /** Containers of this gateway on it. */
  workers: number;
  /** The last failed health check, while not up. */
  error: string | null;
  /** When the host last answered (epoch ms). */
  lastSeenAt: number | null;
  /** Engine name and version, e.g. `Docker Engine 20.10.24` or `Podman Engine 4.3.1`. */
  engine: string | null;
}

/** What the pool on this gateway tells /health about one endpoint. */
export interface PoolHealth {
  /** Workers started but not yet polling (health leaves out those the store already shows polling). */
  initializing: string[];
  /** Crash-looping workers (health leaves out those the store already shows polling). */
  unhealthy: string[];
  /** Workers the scaler wants beyond workersMax. */
  throttled: number;
  /** Workers paused in the warm pool (flashboot): their store rows do not make them idle. */
  paused: string[];
}

/**
 * Read access to the worker pool, for /health and the admin API. Declared here, where it is
 * used; src/pool implements it. On a gateway that runs no pool (not the leader) every answer is
 * undefined.
 */
export interface PoolView {
  /** Whether this gateway runs the worker pools now (with several gateways only the leader does). */
  running(): boolean;
  health(endpointId: string): PoolHealth | undefined;
  /** Undefined when this gateway runs no pool for the endpoint. */
  workers(endpointId: string): PoolWorkerInfo[] | undefined;
  /** The workers that stopped lately (state `stopped`), their log still kept; most recent first. Undefined like `workers`. */
  stoppedWorkers(endpointId: string): PoolWorkerInfo[] | undefined;
  /** The last `lines` log lines of a pool worker, running or stopped lately; undefined when there is no such worker. */
  logs(endpointId: string, workerId: string, lines: number): LogLine[] | undefined;
  /** The Docker hosts workers run on (empty with no Docker driver); undefined while this gateway runs no pool. */
  hosts(): PoolHostInfo[] | undefined;
  /** The endpoint's cold starts since its pool was made on this gateway; undefined like `workers`. */
  coldStarts(endpointId: string): ColdStartStats | undefined;
}
