import { assembleMinutes, nonEmptyBuckets, type BucketRow, type MinuteRow } from '../minute-rows.js';
import type { MinuteDelta, MinuteStore } from '../minute-store.js';
import type { PgConnection } from './connection.js';

// The oldest rows below the cutoff, their buckets with them; SKIP LOCKED so that a gateway
// adding to a row never waits on the prune.
const DELETE_MINUTES_BEFORE_SQL = `WITH old AS (SELECT endpoint_id, minute FROM job_minutes WHERE minute < $1 ORDER BY minute LIMIT $2 FOR UPDATE SKIP LOCKED),
     gone AS (DELETE FROM job_minute_buckets b USING old WHERE b.endpoint_id = old.endpoint_id AND b.minute = old.minute)
   DELETE FROM job_minutes m USING old WHERE m.endpoint_id = old.endpoint_id AND m.minute = old.minute RETURNING 1`;

/** The job_minutes tables on PostgreSQL (src/store/minute-store.ts); BIGINTs read back as numbers. */
export class PgMinuteStore implements MinuteStore {
  constructor(private readonly db: PgConnection) {}

  async addMinutes(deltas: readonly MinuteDelta[]): Promise<void> {
    if (deltas.length === 0) return;
    await this.db.transaction(async (client) => {
      for (const d of deltas) {
        await client.query(
          `INSERT INTO job_minutes (endpoint_id, minute, submitted, completed, failed, queue_depth) VALUES ($1, $2, $3, $4, $5, $6)
           ON CONFLICT (endpoint_id, minute) DO UPDATE SET submitted = job_minutes.submitted + excluded.submitted,
           completed = job_minutes.completed + excluded.completed, failed = job_minutes.failed + excluded.failed,
           queue_depth = GREATEST(job_minutes.queue_depth, excluded.queue_depth)`,
          [d.endpointId, d.minute, d.submitted, d.completed, d.failed, d.queueDepth],
        );
        for (const [kind, bucket, count] of nonEmptyBuckets(d)) {
          await client.query(
            `INSERT INTO job_minute_buckets (endpoint_id, minute, kind, bucket, count) VALUES ($1, $2, $3, $4, $5)
             ON CONFLICT (endpoint_id, minute, kind, bucket) DO UPDATE SET count = job_minute_buckets.count + excluded.count`,
            [d.endpointId, d.minute, kind, bucket, count],
          );
        }
      }
    });
  }

  async readMinutes({ endpointId, from, to }: Parameters<MinuteStore['readMinutes']>[0]): Promise<MinuteDelta[]> {
    const [rows, buckets] = await Promise.all([
      this.db.query<MinuteRow & Record<string, unknown>>('SELECT * FROM job_minutes WHERE endpoint_id = $1 AND minute >= $2 AND minute < $3 ORDER BY minute', [endpointId, from, to]),
      this.db.query<BucketRow & Record<string, unknown>>('SELECT minute, kind, bucket, count FROM job_minute_buckets WHERE endpoint_id = $1 AND minute >= $2 AND minute < $3', [endpointId, from, to]),
    ]);
    return assembleMinutes(rows, buckets);
  }

  async deleteMinutesBefore({ before, limit }: Parameters<MinuteStore['deleteMinutesBefore']>[0]): Promise<number> {
    return (await this.db.query(DELETE_MINUTES_BEFORE_SQL, [before, limit])).length;
  }
}
