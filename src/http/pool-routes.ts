import type { IncomingMessage, ServerResponse } from 'node:http';
import type { App } from '../app.js';
import { AppError, invalidParameter } from '../errors.js';
import type { PoolWorkerInfo } from '../pool/pool-view.js';
import { sendJson } from './respond.js';

const DEFAULT_LOG_LINES = 100;
const MAX_LOG_LINES = 10_000;

const iso = (ms: number | null): string | null => (ms === null ? null : new Date(ms).toISOString());

function renderPoolWorker(w: PoolWorkerInfo) {
  return { ...w, managed: true, startedAt: iso(w.startedAt), readyAt: iso(w.readyAt), restartAt: iso(w.restartAt) };
}

/**
 * The workers of an endpoint, under /admin/v1/endpoints/{id}/workers (admin key, checked by
 * the caller):
 * - `GET .../workers`: pool workers (state, pid, startedAt, readyAt, jobs, restarts, reason)
 *   and workers connected by hand (`managed: false`, as the store sees them);
 * - `GET .../workers/{workerId}/logs?lines=N`: the last N (default 100) output lines of a
 *   pool worker.
 */
export async function handlePoolRoute(app: App, req: IncomingMessage, res: ServerResponse, endpointId: string, rest: string[]): Promise<void> {
  if ((req.method ?? 'GET') !== 'GET') throw new AppError(405, 'METHOD_NOT_ALLOWED', `${req.method} is not allowed here`);
  const endpoint = await app.store.getEndpoint(endpointId);
  if (!endpoint) throw new AppError(404, 'ENDPOINT_NOT_FOUND', `Endpoint ${endpointId} not found`, { id: endpointId });
  const view = app.pool.view;
  const [workerId, what, ...extra] = rest;

  if (workerId === undefined) {
    const pool = view?.workers(endpointId) ?? [];
    const inPool = new Set(pool.map((w) => w.id));
    const now = app.now();
    const [rows, stats] = await Promise.all([app.store.listWorkers(endpointId), app.store.queueStats({ endpointId, now })]);
    const byHand = rows
      .filter((r) => !inPool.has(r.id) && r.lastSeenAt >= now - app.config.workerLostMs)
      .map((r) => {
        const jobs = stats.heldBy[r.id] ?? 0;
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
      });
    return sendJson(res, 200, {
      endpointId,
      // Whether this gateway runs the pool (with several gateways only the leader does).
      pool: view !== null,
      workers: [...pool.map(renderPoolWorker), ...byHand],
    });
  }
  if (what === 'logs' && extra.length === 0) {
    const raw = new URL(req.url ?? '/', 'http://gantry').searchParams.get('lines');
    const lines = raw === null || raw === '' ? DEFAULT_LOG_LINES : Number(raw);
    if (!Number.isInteger(lines) || lines < 1 || lines > MAX_LOG_LINES) throw invalidParameter('lines', `must be an integer from 1 to ${MAX_LOG_LINES}`);
    const log = view?.logs(endpointId, workerId, lines);
    if (!log) throw new AppError(404, 'WORKER_NOT_FOUND', `No pool worker ${workerId} on endpoint ${endpointId}`, { id: workerId });
    return sendJson(res, 200, { endpointId, workerId, lines: log.map((l) => ({ at: new Date(l.at).toISOString(), stream: l.stream, line: l.line })) });
  }
  throw new AppError(404, 'NOT_FOUND', 'Unknown admin route');
}
