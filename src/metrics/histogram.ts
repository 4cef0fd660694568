import type { Metric } from 'prom-client';

/** One line of a metric as prom-client's Registry renders it. */
interface RenderedValue {
  metricName: string;
  labels: Record<string, string | number>;
  value: number;
}

/**
 * A histogram kept as plain numbers: observing a value is a short loop over the bounds and
 * three writes, with no label hashing and no allocation (prom-client's own Histogram builds a
 * label key on every observation). prom-client renders it at scrape time through
 * {@link histogramMetric}.
 */
export interface Buckets {
  /** counts[i]: observations ≤ bounds[i] and > bounds[i-1]; the last slot is +Inf. */
  readonly counts: Float64Array;
  sum: number;
  count: number;
}

/** Empty buckets for `bounds` (ascending upper bounds, +Inf implied). */
export function newBuckets(bounds: readonly number[]): Buckets {
  return { counts: new Float64Array(bounds.length + 1), sum: 0, count: 0 };
}

/**
 * Counts `value` into the bucket of the first bound it does not exceed.
 *
 * @example const b = newBuckets([1, 5]); observe(b, [1, 5], 3); // b.counts = [0, 1, 0]
 */
export function observe(buckets: Buckets, bounds: readonly number[], value: number): void {
  let i = 0;
  while (i < bounds.length && value > bounds[i]!) i++;
  buckets.counts[i]! += 1;
  buckets.sum += value;
  buckets.count += 1;
}

/** One labelled series of a histogram metric at scrape time. */
export interface HistogramSeries {
  labels: Record<string, string>;
  buckets: Buckets;
}

/** What a histogram metric is: its name, help, bounds and where its series come from. */
export interface HistogramSpec {
  name: string;
  help: string;
  bounds: readonly number[];
  /** The series now: called at scrape time only. */
  series(): Iterable<HistogramSeries>;
}

/**
 * A prom-client metric that renders Buckets as a Prometheus histogram (`_bucket` cumulative
 * with `le`, `_sum`, `_count`), for `registry.registerMetric`.
 *
 * @example registry.registerMetric(histogramMetric({ name: 'x_seconds', help: '…', bounds, series: () => [] }));
 */
export function histogramMetric(spec: HistogramSpec): Metric {
  const metric = {
    name: spec.name,
    help: spec.help,
    type: 'histogram',
    aggregator: 'sum',
    get: () => Promise.resolve({ name: spec.name, help: spec.help, type: 'histogram', aggregator: 'sum', values: render(spec) }),
    reset: () => undefined,
  };
  // prom-client's Registry renders any object of this shape; its Metric type names its own classes only.
  return metric as unknown as Metric;
}

function render(spec: HistogramSpec): RenderedValue[] {
  const values: RenderedValue[] = [];
  for (const { labels, buckets } of spec.series()) {
    let cumulative = 0;
    for (const [i, bound] of spec.bounds.entries()) {
      cumulative += buckets.counts[i]!;
      values.push({ metricName: `${spec.name}_bucket`, labels: { ...labels, le: bound }, value: cumulative });
    }
    values.push({ metricName: `${spec.name}_bucket`, labels: { ...labels, le: '+Inf' }, value: buckets.count });
    values.push({ metricName: `${spec.name}_sum`, labels, value: buckets.sum });
    values.push({ metricName: `${spec.name}_count`, labels, value: buckets.count });
  }
  return values;
}
