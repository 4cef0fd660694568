import type { JobMeter, WorkerMeter } from '../../model/records.js';
import type { StoredColdStarts, UsageStore, UsageSum } from '../store.js';
import { toStoredColdStarts, type ColdStartRows } from '../usage-sql.js';
import { toJobMeter, toUsageSum, usageGrouping, type JobMeterRow, type UsageSumRow } from '../usage-sql.js';
import type { SqliteConnection } from './connection.js';

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

/** The job_meters and worker_meters tables on SQLite; sums are read as BigInt, exact past 2^53. */
export class SqliteUsageStore implements UsageStore {
  constructor(private readonly c: SqliteConnection) {}

  recordJobMeter(m: JobMeter): Promise<void> {
    return this.c.write(() => {
      this.c
        .q(`INSERT INTO job_meters (job_id, run, key_id, endpoint_id, status, execution_ms, pixels, cost_units, created_at, worker_id)
            VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (job_id, run) DO NOTHING`)
        .run(m.jobId, m.run, m.keyId, m.endpointId, m.status, m.executionMs, m.pixels, m.costUnits, m.createdAt, m.workerId);
    });
  }

  sumUsage({ from, to, groupBy }: Parameters<UsageStore['sumUsage']>[0]): Promise<UsageSum[]> {
    return this.c.read(() => {
      const g = usageGrouping(groupBy);
      // safeIntegers: the sums come back as BigInt, exact past 2^53.
      const rows = this.c
        .q(`SELECT ${g.select}COUNT(*) AS jobs, SUM(execution_ms) AS execution_ms, SUM(pixels) AS pixels, SUM(cost_units) AS cost
            FROM job_meters WHERE created_at >= ? AND created_at < ? ${g.groupBy}
            ORDER BY ${g.order}cost DESC, jobs DESC`)
        .safeIntegers(true)
        .all(BigInt(from), BigInt(to)) as UsageSumRow[];
      return rows.map((row) => toUsageSum(row, groupBy));
    });
  }

  countWorkerRuns({ endpointId, workerIds }: Parameters<UsageStore['countWorkerRuns']>[0]): Promise<{ workerId: string; runs: number; completed: number }[]> {
    if (workerIds.length === 0) return Promise.resolve([]);
    return this.c.read(() =>
      (
        this.c
          .q(
            `SELECT worker_id AS workerId, COUNT(*) AS runs, SUM(CASE WHEN status = 'COMPLETED' THEN 1 ELSE 0 END) AS completed
               FROM job_meters WHERE worker_id IN (SELECT value FROM json_each(?)) AND endpoint_id = ? GROUP BY worker_id`,
          )
          .all(JSON.stringify(workerIds), endpointId) as { workerId: string; runs: number; completed: number }[]
      ).map((r) => ({ workerId: r.workerId, runs: Number(r.runs), completed: Number(r.completed) })),
    );
  }

  listJobMeters(jobId: string): Promise<JobMeter[]> {
    return this.c.read(() =>
      (
        this.c
          .q('SELECT job_id, run, key_id, endpoint_id, status, execution_ms, pixels, cost_units AS cost, created_at, worker_id FROM job_meters WHERE job_id = ? ORDER BY run')
          .safeIntegers(true)
          .all(jobId) as JobMeterRow[]
      ).map(toJobMeter),
    );
  }

  keySpend({ keyId, from }: { keyId: string; from: number }): Promise<bigint> {
    return this.c.read(() => {
      const row = this.c
        .q('SELECT SUM(cost_units) AS cost FROM job_meters WHERE key_id = ? AND created_at >= ?')
        .safeIntegers(true)
        .get(keyId, BigInt(from)) as { cost: bigint | null };
      return row.cost ?? 0n;
    });
  }

  countLiveJobs(keyId: string): Promise<number> {
    return this.c.read(
      () => (this.c.q(`SELECT COUNT(*) AS n FROM jobs WHERE key_id = ? AND status IN ('IN_QUEUE', 'IN_PROGRESS')`).get(keyId) as { n: number }).n,
    );
  }

  openWorkerMeter(m: WorkerMeter): Promise<void> {
    return this.c.write(() => {
      this.c
        .q(`INSERT INTO worker_meters (worker_id, started_at, endpoint_id, gpus, ended_at, open) VALUES (?, ?, ?, ?, ?, ?)
            ON CONFLICT (worker_id, started_at) DO NOTHING`)
        .run(m.workerId, m.startedAt, m.endpointId, m.gpus, m.endedAt, m.open ? 1 : 0);
    });
  }

  advanceWorkerMeters({ meters, at }: Parameters<UsageStore['advanceWorkerMeters']>[0]): Promise<void> {
    if (meters.length === 0) return Promise.resolve();
    return this.c.write(() => {
      const q = this.c.q('UPDATE worker_meters SET ended_at = MAX(ended_at, ?) WHERE worker_id = ? AND started_at = ? AND open = 1');
      for (const m of meters) q.run(at, m.workerId, m.startedAt);
    });
  }

  closeWorkerMeter({ workerId, startedAt, at }: Parameters<UsageStore['closeWorkerMeter']>[0]): Promise<boolean> {
    return this.c.write(
      () => this.c.q('UPDATE worker_meters SET ended_at = MAX(?, started_at), open = 0 WHERE worker_id = ? AND started_at = ? AND open = 1').run(at, workerId, startedAt).changes === 1,
    );
  }

  listWorkerMeters({ from, to, limit }: Parameters<UsageStore['listWorkerMeters']>[0]): Promise<WorkerMeter[]> {
    return this.c.read(() =>
      (
        this.c.q('SELECT * FROM worker_meters WHERE started_at < ? AND ended_at >= ? ORDER BY started_at, worker_id LIMIT ?').all(to, from, limit) as WorkerMeterRow[]
      ).map(toWorkerMeter),
    );
  }

  recordColdStart({ endpointId, kind, ms, bucket, at, window }: Parameters<UsageStore['recordColdStart']>[0]): Promise<void> {
    return this.c.write(() => {
      const { count } = this.c
        .q(`INSERT INTO cold_start_totals (endpoint_id, kind, count, sum_ms, last_ms, last_at) VALUES (?, ?, 1, ?, ?, ?)
            ON CONFLICT (endpoint_id, kind) DO UPDATE SET count = cold_start_totals.count + 1, sum_ms = cold_start_totals.sum_ms + excluded.sum_ms,
              last_ms = excluded.last_ms, last_at = excluded.last_at
            RETURNING count`)
        .get(endpointId, kind, ms, ms, at) as { count: number };
      this.c
        .q(`INSERT INTO cold_start_buckets (endpoint_id, kind, bucket, count) VALUES (?, ?, ?, 1)
            ON CONFLICT (endpoint_id, kind, bucket) DO UPDATE SET count = cold_start_buckets.count + 1`)
        .run(endpointId, kind, bucket);
      this.c
        .q(`INSERT INTO cold_start_recent (endpoint_id, kind, slot, ms) VALUES (?, ?, ?, ?)
            ON CONFLICT (endpoint_id, kind, slot) DO UPDATE SET ms = excluded.ms`)
        .run(endpointId, kind, (count - 1) % window, ms);
    });
  }

  readColdStarts(endpointId: string): Promise<StoredColdStarts[]> {
    return this.c.read(() => {
      const rows: ColdStartRows = {
        totals: this.c.q('SELECT kind, count, sum_ms, last_ms, last_at FROM cold_start_totals WHERE endpoint_id = ? ORDER BY kind').all(endpointId) as ColdStartRows['totals'],
        buckets: this.c.q('SELECT kind, bucket, count FROM cold_start_buckets WHERE endpoint_id = ?').all(endpointId) as ColdStartRows['buckets'],
        recent: this.c.q('SELECT kind, slot, ms FROM cold_start_recent WHERE endpoint_id = ?').all(endpointId) as ColdStartRows['recent'],
      };
      return toStoredColdStarts(rows);
    });
  }
}
