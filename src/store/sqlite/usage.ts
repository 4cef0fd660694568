import type { UsageRecord } from '../../model/records.js';
import type { UsageStore, UsageSum } from '../store.js';
import type { SqliteConnection } from './connection.js';

/** The usage_records table on SQLite; sums are read as BigInt, exact past 2^53. */
export class SqliteUsageStore implements UsageStore {
  constructor(private readonly c: SqliteConnection) {}

  recordUsage(usage: UsageRecord): Promise<void> {
    return this.c.write(() => {
      this.c
        .q(`INSERT INTO usage_records (job_id, key_id, endpoint_id, pixels, cost_units, created_at)
            VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (job_id) DO NOTHING`)
        .run(usage.jobId, usage.keyId, usage.endpointId, usage.pixels, usage.costUnits, usage.createdAt);
    });
  }

  sumUsage({ from, to, groupBy }: Parameters<UsageStore['sumUsage']>[0]): Promise<UsageSum[]> {
    return this.c.read(() => {
      const column = groupBy === 'key' ? 'key_id' : 'endpoint_id';
      // safeIntegers: the sums come back as BigInt, exact past 2^53.
      const rows = this.c
        .q(`SELECT ${column} AS grp, COUNT(*) AS jobs, SUM(pixels) AS pixels, SUM(cost_units) AS cost
            FROM usage_records WHERE created_at >= ? AND created_at < ?
            GROUP BY ${column} ORDER BY cost DESC, grp`)
        .safeIntegers(true)
        .all(BigInt(from), BigInt(to)) as { grp: string | null; jobs: bigint; pixels: bigint; cost: bigint }[];
      return rows.map((row) => ({ group: row.grp, jobs: Number(row.jobs), pixels: Number(row.pixels), costUnits: row.cost }));
    });
  }
}
