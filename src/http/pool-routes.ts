import type { GantryConfig } from '../config/config.js';
import type { EndpointService } from '../jobs/endpoint-service.js';
import { AppError, endpointNotFound, invalidParameter } from '../model/errors.js';
import type { RouteCall } from './route-table.js';
import type { WorkerRecord } from '../model/records.js';
import type { JobStore, UsageStore, WorkerStore } from '../store/store.js';
import type { LogStore } from '../store/log-store.js';
import type { ColdStartStats, PoolHostInfo, PoolView, PoolWorkerInfo } from '../jobs/pool-view.js';
import { renderLogLine } from './log-routes.js';
import { sendJson } from './respond.js';

/** How many log lines `.../logs` returns unless `lines` says, and the most it may say. */
export const DEFAULT_LOG_LINES = 100;
/** See DEFAULT_LOG_LINES. */
export const MAX_LOG_LINES = 10_000;

const iso = (ms: number | null): string | null => (ms === null ? null : new Date(ms).toISOString());

function renderPoolWorker(w: PoolWorkerInfo) {
  return { ...w, managed: true, startedAt: iso(w.startedAt), readyAt: iso(w.readyAt), restartAt: iso(w.restartAt), stoppedAt: iso(w.stoppedAt) };
}

/** A Docker host as the worker listing shows it, with how many of this endpoint's workers run there. */
function renderHost(h: PoolHostInfo, pool: PoolWorkerInfo[]) {
  return { ...h, lastSeenAt: iso(h.lastSeenAt), endpointWorkers: pool.filter((w) => w.host === h.name).length };
}

/** The cold starts as the listing shows them: counts and p70/p90/p98 (ms), all kinds and per kind; null where this gateway runs no pool for the endpoint. */
function renderColdStarts(stats: ColdStartStats | undefined) {
  if (!stats) return null;
  const { buckets: _buckets, ...shown } = stats;
  return shown;
}

/** What the worker listing reads: the pool of this gateway and the store's liveness rows. */
export interface PoolRouteDeps {
  pool: PoolView;
  endpoints: Pick<EndpointService, 'load'>;
  workerRows: Pick<WorkerStore, 'listWorkers'> & Pick<JobStore, 'queueStats'> & Pick<UsageStore, 'countWorkerRuns'>;
  /** The stored worker logs (docs/logs.md): what a worker's log route reads. */
  logs: Pick<LogStore, 'readLogs' | 'lastLogId'>;
  config: Pick<GantryConfig, 'workerLostMs'>;
  now(): number;
}

/**
 * `GET /admin/v1/endpoints/{endpoint}/workers`: pool workers (state, pid or Docker host and
 * container, startedAt, readyAt, jobs held, jobsDone and jobsCompleted (runs that ended on it,
 * from the job meters), restarts, reason, lastExit), workers connected by hand
 * (`managed: false`, as the store sees them), the pool workers that stopped lately (state
 * `stopped`, stoppedAt, most recent first), the Docker hosts (state, GPUs in use, workers:
 * all and this endpoint's), and the endpoint's cold starts (docs/scaling.md, "Cold starts").
 */
export async function sendPoolWorkers(deps: PoolRouteDeps, { res, params }: RouteCall): Promise<void> {
  const endpointId = params.endpoint!;
  const endpoint = await deps.endpoints.load(endpointId);
  if (!endpoint) throw endpointNotFound(endpointId);
  const pool = deps.pool.workers(endpointId);
  const stopped = deps.pool.stoppedWorkers(endpointId) ?? [];
  // A stopped pool worker's store row outlives it for a while: it is not a worker run by hand.
  const inPool = new Set([...(pool ?? []), ...stopped].map((w) => w.id));
  const now = deps.now();
  const [rows, stats] = await Promise.all([deps.workerRows.listWorkers(endpointId), deps.workerRows.queueStats({ endpointId, now })]);
  const byHand = rows.filter((r) => !inPool.has(r.id) && r.lastSeenAt >= now - deps.config.workerLostMs).map((r) => byHandWorker(r, stats.heldBy));
  const listed = [...(pool ?? []).map(renderPoolWorker), ...byHand, ...stopped.map(renderPoolWorker)];
  const done = new Map((await deps.workerRows.countWorkerRuns({ endpointId, workerIds: listed.map((w) => w.id) })).map((c) => [c.workerId, c]));
  sendJson(res, 200, {
    endpointId,
    // Whether this gateway runs the pool (with several gateways only the leader does).
    pool: deps.pool.running(),
    workers: listed.map((w) => ({ ...w, jobsDone: done.get(w.id)?.runs ?? 0, jobsCompleted: done.get(w.id)?.completed ?? 0 })),
    hosts: (deps.pool.hosts() ?? []).map((h) => renderHost(h, pool ?? [])),
    coldStarts: renderColdStarts(deps.pool.coldStarts(endpointId)),
  });
}

/** A worker run by hand as the listing shows it. */
function byHandWorker(r: WorkerRecord, heldBy: ReadonlyMap<string, number>) {
  const jobs = heldBy.get(r.id) ?? 0;
  return {
    id: r.id,
    state: !r.healthy ? 'unhealthy' : jobs > 0 ? 'running' : 'idle',
    managed: false,
    jobs,
    reason: r.reason,
    version: r.version,
    firstSeenAt: iso(r.firstSeenAt),
    lastSeenAt: iso(r.lastSeenAt),
  };
}

/**
 * `GET /admin/v1/endpoints/{endpoint}/workers/{worker}/logs?lines=N`: the last N (default 100)
 * lines of a pool worker from the store (docs/logs.md), running or stopped, until they are
 * pruned; 404 when none is stored and the pool knows no such worker.
 */
export async function sendWorkerLog(deps: PoolRouteDeps, { res, params, query }: RouteCall): Promise<void> {
  const endpointId = params.endpoint!;
  const workerId = params.worker!;
  if (!(await deps.endpoints.load(endpointId))) throw endpointNotFound(endpointId);
  const raw = query.get('lines');
  const lines = raw === null || raw === '' ? DEFAULT_LOG_LINES : Number(raw);
  if (!Number.isInteger(lines) || lines < 1 || lines > MAX_LOG_LINES) throw invalidParameter('lines', `must be an integer from 1 to ${MAX_LOG_LINES}`);
  const stored = (await deps.logs.readLogs({ endpointId, workerId, limit: lines })).reverse();
  const known = [...(deps.pool.workers(endpointId) ?? []), ...(deps.pool.stoppedWorkers(endpointId) ?? [])].some((w) => w.id === workerId);
  if (stored.length === 0 && !known) throw new AppError('WORKER_NOT_FOUND', `No pool worker ${workerId} on endpoint ${endpointId}`, { id: workerId });
  sendJson(res, 200, { endpointId, workerId, lines: stored.map(renderLogLine) });
}
