import { Gauge, type Registry } from 'prom-client';
import type { ColdStartStats, PoolView } from '../jobs/pool-view.js';
import { COLD_START_BOUNDS, COLD_START_KINDS } from '../pool/cold-starts.js';
import { histogramMetric, type HistogramSeries } from './histogram.js';
import { counter } from './job-metrics.js';

/** The quantiles of the recent cold starts, as RunPod's console shows them. */
const QUANTILES = [
  ['0.7', 'p70Ms'],
  ['0.9', 'p90Ms'],
  ['0.98', 'p98Ms'],
] as const;

/**
 * The worker pool's cold starts in /metrics (docs/metrics.md), read from the pool view at
 * scrape time: a counter and a histogram per endpoint and kind (`start`: a new process or
 * container; `resume`: from flashboot's warm pool) since the pool was made on this gateway,
 * and a gauge of p70/p90/p98 over the last cold starts (cold-starts.ts WINDOW). Only the
 * gateway that runs the pools (the leader) has them.
 *
 * @example const refresh = registerPoolMetrics(registry, view); await refresh(endpointIds);
 */
export function registerPoolMetrics(registry: Registry, pool: Pick<PoolView, 'coldStarts'>): (endpoints: readonly string[]) => void {
  let stats: [string, ColdStartStats][] = [];
  counter(registry, 'gantry_cold_starts_total', 'Workers started while a job of the endpoint waited, by how (start: a new process or container; resume: from the warm pool).', ['endpoint', 'kind'], (set) => {
    for (const [endpoint, s] of stats) for (const kind of COLD_START_KINDS) set({ endpoint, kind }, s[kind].count);
  });
  registry.registerMetric(
    histogramMetric({
      name: 'gantry_cold_start_seconds',
      help: "Cold start time: from the worker's start (or resume) request to its first job-take.",
      bounds: COLD_START_BOUNDS,
      series: () => stats.flatMap(([endpoint, s]): HistogramSeries[] => COLD_START_KINDS.map((kind) => ({ labels: { endpoint, kind }, buckets: s.buckets[kind] }))),
    }),
  );
  const recent = new Gauge({
    name: 'gantry_cold_start_recent_seconds',
    help: 'Quantiles (p70, p90, p98) of the last cold starts of the endpoint (at most 256 per kind).',
    labelNames: ['endpoint', 'kind', 'quantile'],
    registers: [registry],
  });
  return (endpoints) => {
    stats = [];
    for (const id of endpoints) {
      const s = pool.coldStarts(id);
      if (s) stats.push([id, s]);
    }
    recent.reset();
    for (const [endpoint, s] of stats) {
      for (const kind of ['all', ...COLD_START_KINDS] as const) {
        const summary = kind === 'all' ? s : s[kind];
        for (const [quantile, field] of QUANTILES) {
          const ms = summary[field];
          if (ms !== null) recent.set({ endpoint, kind, quantile }, ms / 1000);
        }
      }
    }
  };
}
