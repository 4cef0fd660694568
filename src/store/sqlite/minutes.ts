import { assembleMinutes, nonEmptyBuckets, type BucketRow, type MinuteRow } from '../minute-rows.js';
import type { MinuteDelta, MinuteStore } from '../minute-store.js';
import type { SqliteConnection } from './connection.js';

/** The job_minutes tables on SQLite (src/store/minute-store.ts). */
export class SqliteMinuteStore implements MinuteStore {
  constructor(private readonly c: SqliteConnection) {}

  addMinutes(deltas: readonly MinuteDelta[]): Promise<void> {
    return this.c.write(() => {
      const row = this.c.q(`INSERT INTO job_minutes (endpoint_id, minute, submitted, completed, failed, queue_depth) VALUES (?, ?, ?, ?, ?, ?)
        ON CONFLICT (endpoint_id, minute) DO UPDATE SET submitted = submitted + excluded.submitted, completed = completed + excluded.completed,
        failed = failed + excluded.failed, queue_depth = MAX(queue_depth, excluded.queue_depth)`);
      const bucket = this.c.q(`INSERT INTO job_minute_buckets (endpoint_id, minute, kind, bucket, count) VALUES (?, ?, ?, ?, ?)
        ON CONFLICT (endpoint_id, minute, kind, bucket) DO UPDATE SET count = count + excluded.count`);
      for (const d of deltas) {
        row.run(d.endpointId, d.minute, d.submitted, d.completed, d.failed, d.queueDepth);
        for (const [kind, b, count] of nonEmptyBuckets(d)) bucket.run(d.endpointId, d.minute, kind, b, count);
      }
    });
  }

  readMinutes({ endpointId, from, to }: Parameters<MinuteStore['readMinutes']>[0]): Promise<MinuteDelta[]> {
    return this.c.read(() => {
      const rows = this.c.q('SELECT * FROM job_minutes WHERE endpoint_id = ? AND minute >= ? AND minute < ? ORDER BY minute').all(endpointId, from, to) as MinuteRow[];
      const buckets = this.c.q('SELECT minute, kind, bucket, count FROM job_minute_buckets WHERE endpoint_id = ? AND minute >= ? AND minute < ?').all(endpointId, from, to) as BucketRow[];
      return assembleMinutes(rows, buckets);
    });
  }

  deleteMinutesBefore({ before, limit }: Parameters<MinuteStore['deleteMinutesBefore']>[0]): Promise<number> {
    return this.c.write(
      this.c.db.transaction(() => {
        const old = this.c.q('SELECT endpoint_id, minute FROM job_minutes WHERE minute < ? ORDER BY minute LIMIT ?').all(before, limit) as { endpoint_id: string; minute: number }[];
        const buckets = this.c.q('DELETE FROM job_minute_buckets WHERE endpoint_id = ? AND minute = ?');
        const row = this.c.q('DELETE FROM job_minutes WHERE endpoint_id = ? AND minute = ?');
        for (const { endpoint_id, minute } of old) {
          buckets.run(endpoint_id, minute);
          row.run(endpoint_id, minute);
        }
        return old.length;
      }),
    );
  }
}
