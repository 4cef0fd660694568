import type { ActiveWorker } from '../pool/worker-pool.js';
import type { EndpointRecord, QueueStats } from '../model/records.js';

/**
 * The scaling policy of one endpoint, pure: how many workers it wants from its settings, its
 * queue and its workers (docs/scaling.md). The autoscaler (autoscaler.ts) applies it.
 */

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
