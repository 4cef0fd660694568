import type { WorkerRecord } from '../../model/records.js';
import type { WorkerStore } from '../store.js';
import { toWorker, type WorkerRow } from '../worker-rows.js';
import type { SqliteConnection } from './connection.js';

type Args<M extends keyof WorkerStore> = Parameters<WorkerStore[M]>[0];

const TOUCH_WORKER_SQL = `INSERT INTO workers (id, endpoint_id, first_seen_at, last_seen_at, healthy, reason, version)
   VALUES (@id, @endpointId, @now, @now, COALESCE(@healthy, 1), @reason, @version)
   ON CONFLICT (id) DO UPDATE SET last_seen_at = excluded.last_seen_at,
     healthy = COALESCE(@healthy, healthy),
     reason = CASE WHEN @setReason THEN excluded.reason ELSE reason END,
     version = CASE WHEN @setVersion THEN excluded.version ELSE version END
   WHERE workers.endpoint_id = excluded.endpoint_id
   RETURNING 1 AS owned`;

/** The workers table on SQLite (and the one question about jobs a worker's liveness needs). */
export class SqliteWorkerStore implements WorkerStore {
  constructor(private readonly c: SqliteConnection) {}

  touchWorker({ id, endpointId, now, healthy, reason, version }: Args<'touchWorker'>): Promise<boolean> {
    return this.c.write(() => {
      const row = this.c.q(TOUCH_WORKER_SQL).get({
        id,
        endpointId,
        now,
        healthy: healthy === undefined ? null : healthy ? 1 : 0,
        reason: reason ?? null,
        version: version ?? null,
        setReason: reason === undefined ? 0 : 1,
        setVersion: version === undefined ? 0 : 1,
      });
      return row !== undefined;
    });
  }

  listWorkers(endpointId?: string): Promise<WorkerRecord[]> {
    return this.c.read(() =>
      (endpointId === undefined
        ? (this.c.q('SELECT * FROM workers ORDER BY first_seen_at, id').all() as WorkerRow[])
        : (this.c.q('SELECT * FROM workers WHERE endpoint_id = ? ORDER BY first_seen_at, id').all(endpointId) as WorkerRow[])
      ).map(toWorker),
    );
  }

  findStaleWorkers(cutoff: number): Promise<WorkerRecord[]> {
    return this.c.read(() =>
      (this.c.q('SELECT * FROM workers WHERE last_seen_at < ? ORDER BY last_seen_at, id').all(cutoff) as WorkerRow[]).map(toWorker),
    );
  }

  deleteWorkers(ids: string[]): Promise<void> {
    return this.c.write(() => {
      this.c.q('DELETE FROM workers WHERE id IN (SELECT value FROM json_each(?))').run(JSON.stringify(ids));
    });
  }

  jobsHeldBy(workerId: string): Promise<string[]> {
    return this.c.read(() =>
      (
        this.c.q(`SELECT id FROM jobs WHERE worker_id = ? AND status = 'IN_PROGRESS' ORDER BY started_at, rowid`).all(workerId) as {
          id: string;
        }[]
      ).map((row) => row.id),
    );
  }
}
