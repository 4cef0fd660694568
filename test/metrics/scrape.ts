// Reading /metrics as Prometheus would: the text parsed by a Prometheus text-format parser
// (prom2javascript), then looked up by metric name and labels.
import { getMetricsFromIterator, type PromData, type PromHistogramData, type PromMetrics } from 'prom2javascript';

export type Families = PromMetrics;

export async function scrape(url: string, key: string | null): Promise<Families> {
  const res = await fetch(`${url}/metrics`, { headers: key === null ? {} : { authorization: `Bearer ${key}` } });
  const text = await res.text();
  if (res.status !== 200) throw new Error(`/metrics answered ${res.status}: ${text}`);
  const type = res.headers.get('content-type');
  if (!type?.startsWith('text/plain; version=0.0.4')) throw new Error(`/metrics content-type is ${String(type)}`);
  // prom-client writes NaN as `Nan` (the event-loop lag gauges between two quick scrapes);
  // Prometheus reads it, this parser refuses any NaN: such lines are left out, nothing else.
  const lines = text.split('\n').filter((line) => !/ Nan$/i.test(line));
  return getMetricsFromIterator(lines[Symbol.iterator]());
}

function matches(labels: Record<string, string>, want: Record<string, string>): boolean {
  return Object.entries(want).every(([k, v]) => labels[k] === v);
}

function family(families: Families, name: string, type: string) {
  const found = families[name];
  if (!found) throw new Error(`no metric ${name} in /metrics`);
  if (found.type !== type) throw new Error(`${name} is a ${found.type}, not a ${type}`);
  return found;
}

/** The value of the one counter or gauge sample of `name` whose labels include `labels`; 0 when there is none. */
export function value(families: Families, name: string, labels: Record<string, string> = {}): number {
  const f = families[name];
  if (!f) throw new Error(`no metric ${name} in /metrics`);
  if (f.type !== 'counter' && f.type !== 'gauge') throw new Error(`${name} is a ${f.type}`);
  const samples = (f.data as PromData[]).filter((m) => matches(m.labels, labels));
  if (samples.length > 1) throw new Error(`${name} ${JSON.stringify(labels)} matches ${samples.length} samples`);
  return samples.length === 0 ? 0 : samples[0]!.value;
}

/** A histogram sample's count, sum and cumulative buckets (zeros when there is no such sample). */
export function histogram(families: Families, name: string, labels: Record<string, string>): { count: number; sum: number; buckets: Record<string, number> } {
  const samples = (family(families, name, 'histogram').data as PromHistogramData[]).filter((m) => matches(m.labels, labels));
  if (samples.length > 1) throw new Error(`${name} ${JSON.stringify(labels)} matches ${samples.length} samples`);
  const sample = samples[0];
  return sample ? { count: sample.count, sum: sample.sum ?? 0, buckets: sample.buckets } : { count: 0, sum: 0, buckets: {} };
}

/** Every value of `label` across the samples of `name`. */
export function labelValues(families: Families, name: string, label: string): string[] {
  const f = families[name];
  if (!f) throw new Error(`no metric ${name} in /metrics`);
  return (f.data as { labels: Record<string, string> }[]).map((m) => m.labels[label] ?? '');
}
