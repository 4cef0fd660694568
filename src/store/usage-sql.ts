import type { JobStatus } from '../model/job-states.js';
import type { JobMeter } from '../model/records.js';
import type { StoredColdStarts, UsageGroup, UsageSum } from './store.js';

/** One UTC day in ms: the day of a meter is created_at rounded down to it. */
export const DAY_MS = 86_400_000;

/** Each group's SQL expression and output name (one definition for both backends). */
const GROUP_COLUMNS: Readonly<Record<UsageGroup, { sql: string; as: string }>> = {
  key: { sql: 'key_id', as: 'grp_key' },
  endpoint: { sql: 'endpoint_id', as: 'grp_endpoint' },
  day: { sql: `(created_at / ${DAY_MS}) * ${DAY_MS}`, as: 'grp_day' },
};

/**
 * The SELECT list and GROUP BY of sumUsage for `groups` (in a fixed order whatever the order
 * asked, so rows sort the same way on both backends).
 *
 * @example usageGrouping(['day']) // { select: '(created_at / 86400000) * 86400000 AS grp_day, ', groupBy: 'GROUP BY grp_day', order: 'grp_day, ' }
 */
export function usageGrouping(groups: readonly UsageGroup[]): { select: string; groupBy: string; order: string } {
  const used = (['day', 'key', 'endpoint'] as const).filter((g) => groups.includes(g));
  if (used.length === 0) return { select: '', groupBy: '', order: '' };
  return {
    select: used.map((g) => `${GROUP_COLUMNS[g].sql} AS ${GROUP_COLUMNS[g].as}, `).join(''),
    groupBy: `GROUP BY ${used.map((g) => GROUP_COLUMNS[g].as).join(', ')}`,
    order: used.includes('day') ? 'grp_day, ' : '',
  };
}

/** A job_meters row as both drivers return it (BIGINT columns as numbers; cost as text or BigInt). */
export interface JobMeterRow {
  job_id: string;
  run: number;
  key_id: string | null;
  endpoint_id: string;
  status: string;
  execution_ms: number;
  pixels: number;
  cost: string | bigint;
  created_at: number;
  worker_id: string | null;
}

/** A job_meters row → JobMeter. */
export function toJobMeter(r: JobMeterRow): JobMeter {
  return {
    jobId: r.job_id,
    run: Number(r.run),
    keyId: r.key_id,
    endpointId: r.endpoint_id,
    status: r.status as JobStatus,
    executionMs: Number(r.execution_ms),
    pixels: Number(r.pixels),
    costUnits: BigInt(r.cost),
    workerId: r.worker_id ?? null,
    createdAt: Number(r.created_at),
  };
}

/** A sumUsage row as both drivers return it (sums as text or BigInt; groups as asked). */
export interface UsageSumRow {
  grp_key?: string | null;
  grp_endpoint?: string;
  grp_day?: number | bigint | string;
  jobs: number | bigint | string;
  execution_ms: number | bigint | string | null;
  pixels: number | bigint | string | null;
  cost: bigint | string | null;
}

/** A sumUsage row → UsageSum, only the groups asked for set. */
export function toUsageSum(row: UsageSumRow, groups: readonly UsageGroup[]): UsageSum {
  const sum: UsageSum = {
    jobs: Number(row.jobs),
    executionMs: Number(row.execution_ms ?? 0),
    pixels: Number(row.pixels ?? 0),
    costUnits: BigInt(row.cost ?? 0),
  };
  if (groups.includes('key')) sum.key = row.grp_key ?? null;
  if (groups.includes('endpoint')) sum.endpoint = row.grp_endpoint ?? '';
  if (groups.includes('day')) sum.day = Number(row.grp_day);
  return sum;
}

/** The cold_start_* rows of one endpoint, as both backends read them. */
export interface ColdStartRows {
  totals: { kind: string; count: number; sum_ms: number; last_ms: number; last_at: number }[];
  buckets: { kind: string; bucket: number; count: number }[];
  recent: { kind: string; slot: number; ms: number }[];
}

/** The rows of one endpoint as a record per kind (store.ts StoredColdStarts). */
export function toStoredColdStarts(rows: ColdStartRows): StoredColdStarts[] {
  return rows.totals
    .filter((t): t is typeof t & { kind: StoredColdStarts['kind'] } => t.kind === 'start' || t.kind === 'resume')
    .map((t) => ({
      kind: t.kind,
      count: Number(t.count),
      sumMs: Number(t.sum_ms),
      lastMs: Number(t.last_ms),
      lastAt: Number(t.last_at),
      buckets: rows.buckets.filter((b) => b.kind === t.kind).map((b) => ({ bucket: Number(b.bucket), count: Number(b.count) })),
      recent: rows.recent.filter((r) => r.kind === t.kind).map((r) => ({ slot: Number(r.slot), ms: Number(r.ms) })),
    }));
}
