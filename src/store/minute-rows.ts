import { emptyBuckets, type MinuteDelta } from './minute-store.js';

/** A job_minutes row as both backends select it (numbers already). */
export interface MinuteRow {
  endpoint_id: string;
  minute: number;
  submitted: number;
  completed: number;
  failed: number;
  queue_depth: number;
}

/** A job_minute_buckets row. */
export interface BucketRow {
  minute: number;
  kind: number;
  bucket: number;
  count: number;
}

/**
 * The minutes read back: each job_minutes row with its buckets filled in.
 *
 * @example assembleMinutes(rows, buckets) // [{ endpointId, minute, ..., delay: [0, 3, ...], execution: [...] }]
 */
export function assembleMinutes(rows: MinuteRow[], buckets: BucketRow[]): MinuteDelta[] {
  const byMinute = new Map<number, MinuteDelta>();
  const out = rows.map((r) => {
    const m: MinuteDelta = { endpointId: r.endpoint_id, minute: Number(r.minute), submitted: Number(r.submitted), completed: Number(r.completed), failed: Number(r.failed), queueDepth: Number(r.queue_depth), delay: emptyBuckets(), execution: emptyBuckets() };
    byMinute.set(m.minute, m);
    return m;
  });
  for (const b of buckets) {
    const m = byMinute.get(Number(b.minute));
    const list = m === undefined ? undefined : Number(b.kind) === 0 ? m.delay : m.execution;
    if (list && b.bucket >= 0 && b.bucket < list.length) list[b.bucket] = (list[b.bucket] ?? 0) + Number(b.count);
  }
  return out;
}

/** The non-empty buckets of a delta as [kind, bucket, count] triples. */
export function nonEmptyBuckets(delta: MinuteDelta): [number, number, number][] {
  const out: [number, number, number][] = [];
  delta.delay.forEach((count, bucket) => count > 0 && out.push([0, bucket, count]));
  delta.execution.forEach((count, bucket) => count > 0 && out.push([1, bucket, count]));
  return out;
}
