import type { WorkerRecord } from '../../model/records.js';
import type { WorkerStore } from '../store.js';
import { toWorker, type WorkerRow } from '../worker-rows.js';
import type { PgConnection } from './connection.js';

type Args<M extends keyof WorkerStore> = Parameters<WorkerStore[M]>[0];

const TOUCH_WORKER_SQL = `INSERT INTO workers (id, endpoint_id, first_seen_at, last_seen_at, healthy, reason, version)
   VALUES ($1, $2, $3, $3, COALESCE($4::boolean, TRUE), $5, $6)
   ON CONFLICT (id) DO UPDATE SET last_seen_at = excluded.last_seen_at,
     healthy = COALESCE($4::boolean, workers.healthy),
     reason = CASE WHEN $7::boolean THEN excluded.reason ELSE workers.reason END,
     version = CASE WHEN $8::boolean THEN excluded.version ELSE workers.version END
   WHERE workers.endpoint_id = excluded.endpoint_id
   RETURNING 1 AS owned`;

/** The workers table on PostgreSQL (and the one question about jobs a worker's liveness needs). */
export class PgWorkerStore implements WorkerStore {
  constructor(private readonly db: PgConnection) {}

  async touchWorker({ id, endpointId, now, healthy, reason, version }: Args<'touchWorker'>): Promise<boolean> {
    const rows = await this.db.query(TOUCH_WORKER_SQL, [
      id,
      endpointId,
      now,
      healthy ?? null,
      reason ?? null,
      version ?? null,
      reason !== undefined,
      version !== undefined,
    ]);
    return rows.length > 0;
  }

  async listWorkers(endpointId?: string): Promise<WorkerRecord[]> {
    const rows =
      endpointId === undefined
        ? await this.db.query<WorkerRow>('SELECT * FROM workers ORDER BY first_seen_at, id')
        : await this.db.query<WorkerRow>('SELECT * FROM workers WHERE endpoint_id = $1 ORDER BY first_seen_at, id', [endpointId]);
    return rows.map(toWorker);
  }

  async findStaleWorkers(cutoff: number): Promise<WorkerRecord[]> {
    return (await this.db.query<WorkerRow>('SELECT * FROM workers WHERE last_seen_at < $1 ORDER BY last_seen_at, id', [cutoff])).map(toWorker);
  }

  async deleteWorkers(ids: string[]): Promise<void> {
    await this.db.query('DELETE FROM workers WHERE id = ANY($1::text[])', [ids]);
  }

  async jobsHeldBy(workerId: string): Promise<string[]> {
    const rows = await this.db.query<{ id: string }>(
      `SELECT id FROM jobs WHERE worker_id = $1 AND status = 'IN_PROGRESS' ORDER BY started_at, seq`,
      [workerId],
    );
    return rows.map((row) => row.id);
  }
}
