import type { JobMeter, WorkerMeter } from '../../model/records.js';
import type { StoredColdStarts, UsageStore, UsageSum } from '../store.js';
import { toStoredColdStarts, type ColdStartRows } from '../usage-sql.js';
import { toJobMeter, toUsageSum, usageGrouping, type JobMeterRow, type UsageSumRow } from '../usage-sql.js';
import type { PgConnection } from './connection.js';

interface WorkerMeterRow {
  worker_id: string;
  started_at: number;
  endpoint_id: string;
  gpus: number;
  ended_at: number;
  open: number;
}

const toWorkerMeter = (r: WorkerMeterRow): WorkerMeter => ({
  workerId: r.worker_id,
  startedAt: r.started_at,
  endpointId: r.endpoint_id,
  gpus: r.gpus,
  endedAt: r.ended_at,
  open: r.open === 1,
});

/** The job_meters and worker_meters tables on PostgreSQL; sums travel as text, exact past 2^53. */
export class PgUsageStore implements UsageStore {
  constructor(private readonly db: PgConnection) {}

  async recordJobMeter(m: JobMeter): Promise<void> {
    await this.db.query(
      `INSERT INTO job_meters (job_id, run, key_id, endpoint_id, status, execution_ms, pixels, cost_units, created_at, worker_id)
       VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10) ON CONFLICT (job_id, run) DO NOTHING`,
      [m.jobId, m.run, m.keyId, m.endpointId, m.status, m.executionMs, m.pixels, m.costUnits.toString(), m.createdAt, m.workerId],
    );
  }

  // SUM(bigint) is NUMERIC: read as text, so the cost stays exact past 2^53.
  async sumUsage({ from, to, groupBy }: Parameters<UsageStore['sumUsage']>[0]): Promise<UsageSum[]> {
    const g = usageGrouping(groupBy);
    const rows = await this.db.query<UsageSumRow>(
      `SELECT ${g.select}COUNT(*)::text AS jobs, SUM(execution_ms)::text AS execution_ms, SUM(pixels)::text AS pixels, SUM(cost_units)::text AS cost
       FROM job_meters WHERE created_at >= $1 AND created_at < $2 ${g.groupBy}
       ORDER BY ${g.order}SUM(cost_units) DESC, COUNT(*) DESC`,
      [from, to],
    );
    return rows.map((row) => toUsageSum(row, groupBy));
  }

  async countWorkerRuns({ endpointId, workerIds }: Parameters<UsageStore['countWorkerRuns']>[0]): Promise<{ workerId: string; runs: number; completed: number }[]> {
    if (workerIds.length === 0) return [];
    const rows = await this.db.query<{ worker_id: string; runs: string; completed: string }>(
      `SELECT worker_id, COUNT(*)::text AS runs, COUNT(*) FILTER (WHERE status = 'COMPLETED')::text AS completed
         FROM job_meters WHERE worker_id = ANY($1::text[]) AND endpoint_id = $2 GROUP BY worker_id`,
      [workerIds, endpointId],
    );
    return rows.map((r) => ({ workerId: r.worker_id, runs: Number(r.runs), completed: Number(r.completed) }));
  }

  async listJobMeters(jobId: string): Promise<JobMeter[]> {
    const rows = await this.db.query<JobMeterRow>(
      'SELECT job_id, run, key_id, endpoint_id, status, execution_ms, pixels, cost_units::text AS cost, created_at, worker_id FROM job_meters WHERE job_id = $1 ORDER BY run',
      [jobId],
    );
    return rows.map(toJobMeter);
  }

  async keySpend({ keyId, from }: { keyId: string; from: number }): Promise<bigint> {
    const rows = await this.db.query<{ cost: string | null }>('SELECT SUM(cost_units)::text AS cost FROM job_meters WHERE key_id = $1 AND created_at >= $2', [keyId, from]);
    return BigInt(rows[0]?.cost ?? 0);
  }

  async countLiveJobs(keyId: string): Promise<number> {
    const rows = await this.db.query<{ n: number }>(`SELECT COUNT(*)::int AS n FROM jobs WHERE key_id = $1 AND status IN ('IN_QUEUE', 'IN_PROGRESS')`, [keyId]);
    return rows[0]?.n ?? 0;
  }

  async openWorkerMeter(m: WorkerMeter): Promise<void> {
    await this.db.query(
      `INSERT INTO worker_meters (worker_id, started_at, endpoint_id, gpus, ended_at, open) VALUES ($1, $2, $3, $4, $5, $6)
       ON CONFLICT (worker_id, started_at) DO NOTHING`,
      [m.workerId, m.startedAt, m.endpointId, m.gpus, m.endedAt, m.open ? 1 : 0],
    );
  }

  async advanceWorkerMeters({ meters, at }: Parameters<UsageStore['advanceWorkerMeters']>[0]): Promise<void> {
    if (meters.length === 0) return;
    await this.db.query(
      `UPDATE worker_meters m SET ended_at = GREATEST(m.ended_at, $1)
       FROM unnest($2::text[], $3::bigint[]) AS w(worker_id, started_at)
       WHERE m.worker_id = w.worker_id AND m.started_at = w.started_at AND m.open = 1`,
      [at, meters.map((m) => m.workerId), meters.map((m) => m.startedAt)],
    );
  }

  async closeWorkerMeter({ workerId, startedAt, at }: Parameters<UsageStore['closeWorkerMeter']>[0]): Promise<boolean> {
    const rows = await this.db.query(
      'UPDATE worker_meters SET ended_at = GREATEST($1, started_at), open = 0 WHERE worker_id = $2 AND started_at = $3 AND open = 1 RETURNING 1',
      [at, workerId, startedAt],
    );
    return rows.length === 1;
  }

  async listWorkerMeters({ from, to, limit }: Parameters<UsageStore['listWorkerMeters']>[0]): Promise<WorkerMeter[]> {
    const rows = await this.db.query<WorkerMeterRow>('SELECT * FROM worker_meters WHERE started_at < $1 AND ended_at >= $2 ORDER BY started_at, worker_id LIMIT $3', [to, from, limit]);
    return rows.map(toWorkerMeter);
  }

  // One statement: the count's new value places the duration in the ring, atomically.
  async recordColdStart({ endpointId, kind, ms, bucket, at, window }: Parameters<UsageStore['recordColdStart']>[0]): Promise<void> {
    await this.db.query(
      `WITH t AS (
         INSERT INTO cold_start_totals (endpoint_id, kind, count, sum_ms, last_ms, last_at) VALUES ($1, $2, 1, $3, $3, $4)
         ON CONFLICT (endpoint_id, kind) DO UPDATE SET count = cold_start_totals.count + 1, sum_ms = cold_start_totals.sum_ms + EXCLUDED.sum_ms,
           last_ms = EXCLUDED.last_ms, last_at = EXCLUDED.last_at
         RETURNING count
       ), b AS (
         INSERT INTO cold_start_buckets (endpoint_id, kind, bucket, count) VALUES ($1, $2, $5, 1)
         ON CONFLICT (endpoint_id, kind, bucket) DO UPDATE SET count = cold_start_buckets.count + 1
       )
       INSERT INTO cold_start_recent (endpoint_id, kind, slot, ms) SELECT $1, $2, (t.count - 1) % $6, $3 FROM t
       ON CONFLICT (endpoint_id, kind, slot) DO UPDATE SET ms = EXCLUDED.ms`,
      [endpointId, kind, ms, at, bucket, window],
    );
  }

  async readColdStarts(endpointId: string): Promise<StoredColdStarts[]> {
    const [totals, buckets, recent] = await Promise.all([
      this.db.query<ColdStartRows['totals'][number]>('SELECT kind, count::float8 AS count, sum_ms, last_ms, last_at::float8 AS last_at FROM cold_start_totals WHERE endpoint_id = $1 ORDER BY kind', [endpointId]),
      this.db.query<ColdStartRows['buckets'][number]>('SELECT kind, bucket, count::float8 AS count FROM cold_start_buckets WHERE endpoint_id = $1', [endpointId]),
      this.db.query<ColdStartRows['recent'][number]>('SELECT kind, slot, ms FROM cold_start_recent WHERE endpoint_id = $1', [endpointId]),
    ]);
    return toStoredColdStarts({ totals, buckets, recent });
  }
}
