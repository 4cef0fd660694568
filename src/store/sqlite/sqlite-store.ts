import type { JobStatus } from '../../jobs/states.js';
import type { EndpointRecord, JobRecord, KeyRecord, NewJob, Scope, Store, WorkerRecord } from '../store.js';
import {
  endpointParams,
  JOB_COLUMNS,
  toEndpoint,
  toJobRaw,
  toKey,
  toWorker,
  type EndpointRow,
  type KeyRow,
  type WorkerRow,
} from './rows.js';
import { tallyJobCounts } from '../job-counts.js';
import { openSqlite } from './connection.js';
import { keyParams } from '../shared-rows.js';

export interface SqliteStoreOptions {
  /** Path of the database file; its folder is created when missing. */
  file: string;
  /** WAL checkpoints from a worker thread instead of inside commits (see checkpointer.ts). */
  backgroundCheckpoint?: boolean;
}

/** The columns a job gets when it reaches a terminal state (bind `now`). */
const FINISH = `finished_at = @now, expires_at = @now + retention_ms, deadline_at = NULL,
  webhook_next_at = CASE WHEN webhook IS NOT NULL THEN @now ELSE NULL END`;
const TERMINAL = `('COMPLETED', 'FAILED', 'CANCELLED', 'TIMED_OUT')`;

// The hottest statements, built once: a template literal is a new string at every call, and
// the statement cache then hashes its whole text again (~1 µs of a ~7 µs read).
const GET_JOB_SQL = `SELECT ${JOB_COLUMNS} FROM jobs WHERE id = ?`;
// The unary + keeps the planner on jobs_claim (queue order) instead of jobs_deadline.
const CLAIM_JOBS_SQL = `UPDATE jobs SET status = 'IN_PROGRESS', worker_id = @workerId, started_at = @now,
             attempts = attempts + 1, deadline_at = @now + execution_timeout_ms, output_json = NULL, error = NULL
           WHERE id IN (SELECT id FROM jobs WHERE endpoint_id = @endpointId AND status = 'IN_QUEUE'
             AND +deadline_at > @now ORDER BY queued_at, rowid LIMIT @limit)
           RETURNING ${JOB_COLUMNS}, rowid`;
const FINISH_JOB_SQL = `UPDATE jobs SET status = @status, output_json = @outputJson, error = @error, ${FINISH}
   WHERE id = @id AND status = 'IN_PROGRESS' AND worker_id = @workerId
     AND (@endpointId IS NULL OR endpoint_id = @endpointId) RETURNING ${JOB_COLUMNS}`;

/**
 * A Store on one SQLite file through better-sqlite3. Writes of one event-loop turn share one
 * transaction (group commit, see connection.ts): each runs at once, so reads later in the same
 * turn see it, and its promise settles after the turn's COMMIT.
 *
 * @example
 * const store = createSqliteStore({ file: 'data/gantry.db' });
 * await store.migrate();
 */
export function createSqliteStore(options: SqliteStoreOptions): Store {
  const { q, write, read, migrate, close, db, stopCheckpointer } = openSqlite(options.file, { backgroundCheckpoint: options.backgroundCheckpoint ?? false });

  /** A job query in raw (array) mode; its SQL selects or returns ${JOB_COLUMNS} first. */
  const jq = (sql: string) => q(sql).raw(true);
  const jobRows = (rows: unknown[]): JobRecord[] => (rows as unknown[][]).map(toJobRaw);
  const oneJob = (row: unknown): JobRecord | undefined => (row === undefined ? undefined : toJobRaw(row as unknown[]));

  const finishedJob = (sql: string, params: Record<string, unknown>): JobRecord | undefined =>
    oneJob(jq(sql).get(params));

  /** Live jobs in `from` whose deadline has passed → TIMED_OUT with `error`, up to `limit`. */
  const timeOutPastDeadline = (from: 'IN_QUEUE' | 'IN_PROGRESS', error: string, now: number, limit: number): JobRecord[] =>
    jobRows(
      jq(`UPDATE jobs SET status = 'TIMED_OUT', error = @error, ${FINISH}
         WHERE id IN (SELECT id FROM jobs WHERE status = @from AND deadline_at <= @now
           ORDER BY deadline_at LIMIT @limit) RETURNING ${JOB_COLUMNS}`).all({ from, error, now, limit }),
    );

  const store: Store = {
    kind: 'sqlite',

    migrate: async () => migrate(),
    close: async () => {
      await stopCheckpointer();
      close();
    },

    // ---- jobs -------------------------------------------------------------------------------

    insertJob: (job: NewJob) =>
      write(() => {
        q(`INSERT INTO jobs (id, endpoint_id, status, input_json, webhook, s3_config, execution_timeout_ms,
             low_priority, ttl_ms, retention_ms, max_attempts, sync, key_id, created_at, queued_at, deadline_at)
           VALUES (@id, @endpointId, 'IN_QUEUE', @inputJson, @webhook, @s3Config, @executionTimeoutMs,
             @lowPriority, @ttlMs, @retentionMs, @maxAttempts, @sync, @keyId, @now, @now, @now + @ttlMs)`).run({
          // Listed, not spread: this runs once per submitted job.
          id: job.id,
          endpointId: job.endpointId,
          inputJson: job.inputJson,
          webhook: job.webhook,
          s3Config: job.s3Config,
          executionTimeoutMs: job.executionTimeoutMs,
          lowPriority: job.lowPriority ? 1 : 0,
          ttlMs: job.ttlMs,
          retentionMs: job.retentionMs,
          maxAttempts: job.maxAttempts,
          sync: job.sync ? 1 : 0,
          keyId: job.keyId,
          now: job.now,
        });
      }),

    getJob: (id) => read(() => oneJob(jq(GET_JOB_SQL).get(id))),

    claimJobs: ({ endpointId, workerId, limit, now }) =>
      write(() => {
        const rows = jq(CLAIM_JOBS_SQL).all({ endpointId, workerId, now, limit }) as unknown[][];
        // RETURNING comes in no set order: restore queue order (queued_at, then rowid).
        return rows.sort((a, b) => (a[16] as number) - (b[16] as number) || (a[26] as number) - (b[26] as number)).map(toJobRaw);
      }),

    finishJob: ({ id, workerId, endpointId = null, status, outputJson, error, now }) =>
      write(() =>
        finishedJob(
          FINISH_JOB_SQL,
          { id, workerId, endpointId, status, outputJson, error, now },
        ),
      ),

    setProgress: ({ id, workerId, endpointId = null, outputJson }) =>
      write(
        () =>
          q(`UPDATE jobs SET output_json = @outputJson
             WHERE id = @id AND status = 'IN_PROGRESS' AND worker_id = @workerId
               AND (@endpointId IS NULL OR endpoint_id = @endpointId)`).run({ id, workerId, endpointId, outputJson }).changes === 1,
      ),

    cancelJob: ({ id, now }) =>
      write(() =>
        finishedJob(
          `UPDATE jobs SET status = 'CANCELLED', ${FINISH}
           WHERE id = @id AND status IN ('IN_QUEUE', 'IN_PROGRESS') RETURNING ${JOB_COLUMNS}`,
          { id, now },
        ),
      ),

    purgeQueue: ({ endpointId, now }) =>
      write(() =>
        (
          q(`UPDATE jobs SET status = 'CANCELLED', ${FINISH}
             WHERE endpoint_id = @endpointId AND status = 'IN_QUEUE' RETURNING id`).all({ endpointId, now }) as {
            id: string;
          }[]
        ).map((row) => row.id),
      ),

    retryJob: ({ id, now }) =>
      write(
        db.transaction(() => {
          const job = finishedJob(
            `UPDATE jobs SET status = 'IN_QUEUE', output_json = NULL, error = NULL, worker_id = NULL,
               started_at = NULL, finished_at = NULL, expires_at = NULL, webhook_attempts = 0,
               webhook_next_at = NULL, attempts = 0, retries = retries + 1, queued_at = @now,
               deadline_at = @now + ttl_ms
             WHERE id = @id AND status IN ('FAILED', 'TIMED_OUT') AND expires_at > @now RETURNING ${JOB_COLUMNS}`,
            { id, now },
          );
          if (job) q('DELETE FROM job_stream WHERE job_id = ?').run(id);
          return job;
        }),
      ),

    timeOutRunning: ({ now, limit }) => write(() => timeOutPastDeadline('IN_PROGRESS', 'execution timeout exceeded', now, limit)),

    expireQueued: ({ now, limit }) => write(() => timeOutPastDeadline('IN_QUEUE', 'ttl expired in queue', now, limit)),

    releaseWorkerJobs: ({ workerIds, now }) =>
      write(
        db.transaction(() => {
          const ids = JSON.stringify(workerIds);
          const failed = jobRows(
            jq(`UPDATE jobs SET status = 'FAILED', error = 'worker lost', ${FINISH}
               WHERE status = 'IN_PROGRESS' AND worker_id IN (SELECT value FROM json_each(@ids))
                 AND attempts >= max_attempts RETURNING ${JOB_COLUMNS}`).all({ ids, now }),
          );
          const requeued = jobRows(
            jq(`UPDATE jobs SET status = 'IN_QUEUE', queued_at = @now, deadline_at = @now + ttl_ms,
                 worker_id = NULL, started_at = NULL, output_json = NULL
               WHERE status = 'IN_PROGRESS' AND worker_id IN (SELECT value FROM json_each(@ids))
                 AND attempts < max_attempts RETURNING ${JOB_COLUMNS}`).all({ ids, now }),
          );
          return { requeued, failed };
        }),
      ),

    returnJobs: ({ ids, workerId }) =>
      write(() =>
        (
          q(`UPDATE jobs SET status = 'IN_QUEUE', attempts = MAX(attempts - 1, 0), worker_id = NULL, started_at = NULL, output_json = NULL,
               deadline_at = queued_at + ttl_ms
             WHERE status = 'IN_PROGRESS' AND worker_id = @workerId AND id IN (SELECT value FROM json_each(@ids))
             RETURNING id`).all({ ids: JSON.stringify(ids), workerId }) as { id: string }[]
        ).map((row) => row.id),
      ),

    deleteExpired: ({ now, limit }) =>
      write(
        () =>
          q(`DELETE FROM jobs WHERE id IN (SELECT id FROM jobs WHERE expires_at <= @now
               AND webhook_next_at IS NULL AND status IN ${TERMINAL} ORDER BY expires_at LIMIT @limit)`).run({
            now,
            limit,
          }).changes,
      ),

    shortenRetention: ({ id, ttlMs }) =>
      write(() => {
        q(`UPDATE jobs SET retention_ms = MIN(retention_ms, @ttlMs),
             expires_at = CASE WHEN finished_at IS NULL THEN expires_at
               WHEN expires_at IS NULL THEN finished_at + @ttlMs
               ELSE MIN(expires_at, finished_at + @ttlMs) END
           WHERE id = @id`).run({ id, ttlMs });
      }),

    appendStream: ({ id, workerId, endpointId = null, chunks }) =>
      write(
        db.transaction(() => {
          const held = q(`SELECT 1 FROM jobs WHERE id = @id AND status = 'IN_PROGRESS' AND worker_id = @workerId
               AND (@endpointId IS NULL OR endpoint_id = @endpointId)`).get({ id, workerId, endpointId });
          if (held === undefined) return false;
          const last = q('SELECT MAX(seq) AS seq FROM job_stream WHERE job_id = ?').get(id) as { seq: number | null };
          const insert = q('INSERT INTO job_stream (job_id, seq, chunk) VALUES (?, ?, ?)');
          let seq = last.seq ?? 0;
          for (const chunk of chunks) insert.run(id, ++seq, chunk);
          return true;
        }),
      ),

    drainStream: (id) =>
      write(() =>
        (q('DELETE FROM job_stream WHERE job_id = ? RETURNING seq, chunk').all(id) as { seq: number; chunk: string }[])
          .sort((a, b) => a.seq - b.seq)
          .map((row) => row.chunk),
      ),

    countJobs: (endpointId) =>
      read(() =>
        tallyJobCounts(
          q(`SELECT status, COUNT(*) AS n, SUM(retries > 0 OR attempts > 1) AS retried
             FROM jobs WHERE endpoint_id = ? GROUP BY status`).all(endpointId) as { status: JobStatus; n: number; retried: number }[],
        ),
      ),

    // The unary + keeps the planner on jobs_claim, as in claimJobs.
    queueStats: ({ endpointId, now }) =>
      read(() => {
        const queued = q(`SELECT COUNT(*) AS n, COALESCE(SUM(low_priority = 0), 0) AS normal,
                            MIN(CASE WHEN low_priority = 0 THEN queued_at END) AS oldest
                          FROM jobs WHERE endpoint_id = ? AND status = 'IN_QUEUE' AND +deadline_at > ?`).get(endpointId, now) as {
          n: number;
          normal: number;
          oldest: number | null;
        };
        const held = q(`SELECT worker_id, COUNT(*) AS n FROM jobs
                        WHERE endpoint_id = ? AND status = 'IN_PROGRESS' GROUP BY worker_id`).all(endpointId) as {
          worker_id: string | null;
          n: number;
        }[];
        const heldBy: Record<string, number> = {};
        let inProgress = 0;
        for (const row of held) {
          inProgress += row.n;
          if (row.worker_id !== null) heldBy[row.worker_id] = row.n;
        }
        return { inQueue: queued.n, inQueueNormal: queued.normal, oldestNormalQueuedAt: queued.oldest, inProgress, heldBy };
      }),

    listJobs: ({ endpointId, limit }) =>
      read(() =>
        jobRows(
          jq(`SELECT ${JOB_COLUMNS} FROM jobs WHERE endpoint_id = ? ORDER BY created_at DESC, rowid DESC LIMIT ?`).all(endpointId, limit),
        ),
      ),

    jobStates: (ids) =>
      read(() =>
        (
          q(`SELECT id, status, worker_id FROM jobs WHERE id IN (SELECT value FROM json_each(?))`).all(
            JSON.stringify(ids),
          ) as { id: string; status: JobStatus; worker_id: string | null }[]
        ).map((row) => ({ id: row.id, status: row.status, workerId: row.worker_id })),
      ),

    dueWebhooks: ({ now, limit }) =>
      read(() =>
        jobRows(
          jq(`SELECT ${JOB_COLUMNS} FROM jobs WHERE webhook_next_at <= ? AND status IN ${TERMINAL}
             ORDER BY webhook_next_at, rowid LIMIT ?`).all(now, limit),
        ),
      ),

    markWebhook: ({ id, attempts, nextAt }) =>
      write(() => {
        q('UPDATE jobs SET webhook_attempts = ?, webhook_next_at = ? WHERE id = ?').run(attempts, nextAt, id);
      }),

    // ---- workers ----------------------------------------------------------------------------

    touchWorker: ({ id, endpointId, now, healthy, reason, version }) =>
      write(() => {
        q(`INSERT INTO workers (id, endpoint_id, first_seen_at, last_seen_at, healthy, reason, version)
           VALUES (@id, @endpointId, @now, @now, COALESCE(@healthy, 1), @reason, @version)
           ON CONFLICT (id) DO UPDATE SET endpoint_id = excluded.endpoint_id, last_seen_at = excluded.last_seen_at,
             healthy = COALESCE(@healthy, healthy),
             reason = CASE WHEN @setReason THEN excluded.reason ELSE reason END,
             version = CASE WHEN @setVersion THEN excluded.version ELSE version END`).run({
          id,
          endpointId,
          now,
          healthy: healthy === undefined ? null : healthy ? 1 : 0,
          reason: reason ?? null,
          version: version ?? null,
          setReason: reason === undefined ? 0 : 1,
          setVersion: version === undefined ? 0 : 1,
        });
      }),

    listWorkers: (endpointId?: string) =>
      read(() =>
        (endpointId === undefined
          ? (q('SELECT * FROM workers ORDER BY first_seen_at, id').all() as WorkerRow[])
          : (q('SELECT * FROM workers WHERE endpoint_id = ? ORDER BY first_seen_at, id').all(endpointId) as WorkerRow[])
        ).map(toWorker),
      ),

    findStaleWorkers: (cutoff): Promise<WorkerRecord[]> =>
      read(() =>
        (q('SELECT * FROM workers WHERE last_seen_at < ? ORDER BY last_seen_at, id').all(cutoff) as WorkerRow[]).map(toWorker),
      ),

    deleteWorkers: (ids) =>
      write(() => {
        q('DELETE FROM workers WHERE id IN (SELECT value FROM json_each(?))').run(JSON.stringify(ids));
      }),

    jobsHeldBy: (workerId) =>
      read(() =>
        (
          q(`SELECT id FROM jobs WHERE worker_id = ? AND status = 'IN_PROGRESS' ORDER BY started_at, rowid`).all(
            workerId,
          ) as { id: string }[]
        ).map((row) => row.id),
      ),

    // ---- endpoints --------------------------------------------------------------------------

    createEndpoint: (endpoint: EndpointRecord) =>
      write(
        () =>
          q(`INSERT INTO endpoints (id, name, workers_min, workers_max, idle_timeout, execution_timeout_ms,
               scaler_type, scaler_value, max_attempts, worker_json, webhook_secret, created_at, updated_at)
             VALUES (@id, @name, @workers_min, @workers_max, @idle_timeout, @execution_timeout_ms,
               @scaler_type, @scaler_value, @max_attempts, @worker_json, @webhook_secret, @created_at, @updated_at)
             ON CONFLICT (id) DO NOTHING`).run(endpointParams(endpoint)).changes === 1,
      ),

    getEndpoint: (id) =>
      read(() => {
        const row = q('SELECT * FROM endpoints WHERE id = ?').get(id) as EndpointRow | undefined;
        return row === undefined ? undefined : toEndpoint(row);
      }),

    listEndpoints: () =>
      read(() => (q('SELECT * FROM endpoints ORDER BY created_at, id').all() as EndpointRow[]).map(toEndpoint)),

    updateEndpoint: (endpoint) =>
      write(
        () =>
          q(`UPDATE endpoints SET name = @name, workers_min = @workers_min, workers_max = @workers_max,
               idle_timeout = @idle_timeout, execution_timeout_ms = @execution_timeout_ms,
               scaler_type = @scaler_type, scaler_value = @scaler_value, max_attempts = @max_attempts,
               worker_json = @worker_json, webhook_secret = @webhook_secret, updated_at = @updated_at
             WHERE id = @id`).run(endpointParams(endpoint)).changes === 1,
      ),

    deleteEndpoint: (id) =>
      write(
        db.transaction(() => {
          if (q('DELETE FROM endpoints WHERE id = ?').run(id).changes === 0) return false;
          q('DELETE FROM jobs WHERE endpoint_id = ?').run(id); // stream chunks go by ON DELETE CASCADE
          q('DELETE FROM workers WHERE endpoint_id = ?').run(id);
          return true;
        }),
      ),

    // ---- API keys ---------------------------------------------------------------------------

    createKey: (key: KeyRecord) =>
      write(() => {
        q(`INSERT INTO api_keys (id, name, hash, scopes, endpoints, created_at)
           VALUES (?, ?, ?, ?, ?, ?)`).run(...keyParams(key));
      }),

    listKeys: () => read(() => (q('SELECT * FROM api_keys ORDER BY created_at, id').all() as KeyRow[]).map(toKey)),

    deleteKey: (id) => write(() => q('DELETE FROM api_keys WHERE id = ?').run(id).changes === 1),

    getKeyByHash: (hash) =>
      read(() => {
        const row = q('SELECT * FROM api_keys WHERE hash = ?').get(hash) as KeyRow | undefined;
        return row === undefined ? undefined : toKey(row);
      }),

    countKeysWithScope: (scope: Scope) =>
      read(
        () =>
          (
            q(`SELECT COUNT(*) AS n FROM api_keys
               WHERE EXISTS (SELECT 1 FROM json_each(api_keys.scopes) WHERE value = ?)`).get(scope) as { n: number }
          ).n,
      ),

    // ---- usage ------------------------------------------------------------------------------

    recordUsage: (usage) =>
      write(() => {
        q(`INSERT INTO usage_records (job_id, key_id, endpoint_id, pixels, cost_units, created_at)
           VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (job_id) DO NOTHING`).run(
          usage.jobId,
          usage.keyId,
          usage.endpointId,
          usage.pixels,
          usage.costUnits,
          usage.createdAt,
        );
      }),

    sumUsage: ({ from, to, groupBy }) =>
      read(() => {
        const column = groupBy === 'key' ? 'key_id' : 'endpoint_id';
        // safeIntegers: the sums come back as BigInt, exact past 2^53.
        const rows = q(`SELECT ${column} AS grp, COUNT(*) AS jobs, SUM(pixels) AS pixels, SUM(cost_units) AS cost
           FROM usage_records WHERE created_at >= ? AND created_at < ?
           GROUP BY ${column} ORDER BY cost DESC, grp`)
          .safeIntegers(true)
          .all(BigInt(from), BigInt(to)) as { grp: string | null; jobs: bigint; pixels: bigint; cost: bigint }[];
        return rows.map((row) => ({ group: row.grp, jobs: Number(row.jobs), pixels: Number(row.pixels), costUnits: row.cost }));
      }),
  };
  return store;
}
