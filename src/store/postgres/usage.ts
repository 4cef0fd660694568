import type { UsageRecord } from '../../model/records.js';
import type { UsageStore, UsageSum } from '../store.js';
import type { PgConnection } from './connection.js';

/** The usage_records table on PostgreSQL; costs travel as text, exact past 2^53. */
export class PgUsageStore implements UsageStore {
  constructor(private readonly db: PgConnection) {}

  async recordUsage(usage: UsageRecord): Promise<void> {
    await this.db.query(
      `INSERT INTO usage_records (job_id, key_id, endpoint_id, pixels, cost_units, created_at)
       VALUES ($1, $2, $3, $4, $5, $6) ON CONFLICT (job_id) DO NOTHING`,
      [usage.jobId, usage.keyId, usage.endpointId, usage.pixels, usage.costUnits.toString(), usage.createdAt],
    );
  }

  // SUM(bigint) is NUMERIC: read as text, so the cost stays exact past 2^53.
  async sumUsage({ from, to, groupBy }: Parameters<UsageStore['sumUsage']>[0]): Promise<UsageSum[]> {
    const column = groupBy === 'key' ? 'key_id' : 'endpoint_id';
    const rows = await this.db.query<{ grp: string | null; jobs: number; pixels: string; cost: string }>(
      `SELECT ${column} AS grp, COUNT(*) AS jobs, SUM(pixels)::text AS pixels, SUM(cost_units)::text AS cost
       FROM usage_records WHERE created_at >= $1 AND created_at < $2
       GROUP BY ${column} ORDER BY SUM(cost_units) DESC, grp NULLS FIRST`,
      [from, to],
    );
    return rows.map((row) => ({ group: row.grp, jobs: row.jobs, pixels: Number(row.pixels), costUnits: BigInt(row.cost) }));
  }
}
