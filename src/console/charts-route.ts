import type { ServerResponse } from 'node:http';
import { queryInteger } from '../http/query.js';
import { sendJson } from '../http/respond.js';
import { AppError } from '../model/errors.js';
import { percentile, type MinuteRecorder } from './minute-recorder.js';

const MINUTE = 60_000;
const PERCENTILES = [0.7, 0.9, 0.98] as const;

/** Endpoint lookup for the charts route: an unknown endpoint is a 404. */
export interface ChartDeps {
  minutes: Pick<MinuteRecorder, 'read'>;
  endpoints: { get(id: string): Promise<unknown> };
  now(): number;
}

const pcts = (buckets: number[]) => ({ p70: percentile(buckets, PERCENTILES[0]), p90: percentile(buckets, PERCENTILES[1]), p98: percentile(buckets, PERCENTILES[2]) });

/**
 * `GET /console/api/charts/{endpoint}?minutes=N` (1-1440, default 60): one point a minute,
 * every minute of the span (empty ones as zeros): jobs submitted, completed, failed, the
 * deepest queue, and the p70/p90/p98 of queue delay and execution time (ms; null: no job).
 */
export async function sendCharts(deps: ChartDeps, res: ServerResponse, endpointId: string, query: URLSearchParams): Promise<void> {
  const span = queryInteger('minutes', query.get('minutes'), 60, 1, 1440);
  if (!(await deps.endpoints.get(endpointId))) throw new AppError('ENDPOINT_NOT_FOUND', `Endpoint ${endpointId} not found`);
  const to = Math.floor(deps.now() / MINUTE) * MINUTE + MINUTE;
  const from = to - span * MINUTE;
  const rows = new Map((await deps.minutes.read(endpointId, from, to)).map((r) => [r.minute, r]));
  const points = [];
  for (let t = from; t < to; t += MINUTE) {
    const r = rows.get(t);
    points.push(
      r
        ? { t, submitted: r.submitted, completed: r.completed, failed: r.failed, queueDepth: r.queueDepth, delay: pcts(r.delay), execution: pcts(r.execution) }
        : { t, submitted: 0, completed: 0, failed: 0, queueDepth: 0, delay: pcts([]), execution: pcts([]) },
    );
  }
  sendJson(res, 200, { endpointId, from: new Date(from).toISOString(), to: new Date(to).toISOString(), points });
}
