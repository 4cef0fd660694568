import type { JobStatus } from '../../jobs/states.js';
import type { EndpointRecord, JobRecord, KeyRecord, NewJob, QueueStats, Scope, Store, WorkerRecord } from '../store.js';
import { createBatcher } from './batch.js';
import { openPostgres, type PgConnection, type PgConnectionOptions } from './connection.js';
import { byQueueOrder, ENDPOINT_COLUMNS, endpointParams, toEndpoint, toJob, toKey, toWorker, type EndpointRow, type JobRow, type KeyRow, type WorkerRow } from './rows.js';
import { tallyJobCounts } from '../job-counts.js';
import { keyParams } from '../shared-rows.js';

export type PostgresStoreOptions = PgConnectionOptions;

/** A Store on PostgreSQL, with its connection for the parts that need their own (notifier, leader). */
export interface PostgresStore extends Store {
  readonly kind: 'postgres';
  readonly pg: PgConnection;
}

export function isPostgresStore(store: Store): store is PostgresStore {
  return store.kind === 'postgres' && 'pg' in store;
}

const TERMINAL = `('COMPLETED', 'FAILED', 'CANCELLED', 'TIMED_OUT')`;
/** The columns a job gets when it reaches a terminal state; `$N` is the parameter holding now. */
const finish = (now: string): string => `finished_at = ${now}, expires_at = ${now} + retention_ms, deadline_at = NULL,
  webhook_next_at = CASE WHEN webhook IS NOT NULL THEN ${now} ELSE NULL END`;

type FinishArgs = Parameters<Store['finishJob']>[0];

/**
 * A Store on PostgreSQL through a pg Pool. Every call is one statement (several statements only
 * inside a transaction), so a write resolves once committed. Submissions and results of one
 * event-loop turn are each grouped into one multi-row statement (batch.ts); claims take N jobs
 * with FOR UPDATE SKIP LOCKED, so gateways sharing the database never block each other.
 *
 * @example
 * const store = createPostgresStore({ connectionString: 'postgres://gantry@db/gantry' });
 * await store.migrate();
 */
export function createPostgresStore(options: PostgresStoreOptions): PostgresStore {
  const db = openPostgres(options);
  const { query } = db;
  const jobs = async (sql: string, params: unknown[]): Promise<JobRecord[]> => (await query<JobRow>(sql, params)).map(toJob);
  const oneJob = async (sql: string, params: unknown[]): Promise<JobRecord | undefined> => (await jobs(sql, params))[0];

  /** Live jobs in `from` whose deadline has passed → TIMED_OUT with `error`, up to `limit`. */
  const timeOutPastDeadline = (from: 'IN_QUEUE' | 'IN_PROGRESS', error: string, now: number, limit: number): Promise<JobRecord[]> =>
    jobs(
      `WITH due AS (SELECT id FROM jobs WHERE status = $3 AND deadline_at <= $1
         ORDER BY deadline_at LIMIT $2 FOR UPDATE SKIP LOCKED)
       UPDATE jobs j SET status = 'TIMED_OUT', error = $4, ${finish('$1')}
       FROM due WHERE j.id = due.id AND j.status = $3 RETURNING j.*`,
      [now, limit, from, error],
    );

  // Reads of one turn share a round trip too: under load most of a /status read's cost on
  // PostgreSQL is the round trip, not the row.
  const reads = createBatcher<string, JobRecord | undefined>({
    one: (id) => oneJob('SELECT * FROM jobs WHERE id = $1', [id]),
    many: async (ids) => {
      const byId = new Map((await jobs('SELECT * FROM jobs WHERE id = ANY($1::text[])', [ids])).map((job) => [job.id, job]));
      return ids.map((id) => byId.get(id));
    },
  });

  const inserts = createBatcher<NewJob, void>({
    key: (job) => job.id,
    one: (job) => insertMany([job]),
    many: async (list) => {
      await insertMany(list);
      return list.map(() => undefined);
    },
  });

  async function insertMany(list: NewJob[]): Promise<void> {
    // WITH ORDINALITY … ORDER BY keeps the call order as the insertion order (seq).
    await query(
      `INSERT INTO jobs (id, endpoint_id, status, input_json, webhook, s3_config, execution_timeout_ms, low_priority,
         ttl_ms, retention_ms, max_attempts, sync, key_id, created_at, queued_at, deadline_at)
       SELECT id, endpoint_id, 'IN_QUEUE', input_json, webhook, s3_config, execution_timeout_ms, low_priority,
         ttl_ms, retention_ms, max_attempts, sync, key_id, now, now, now + ttl_ms
       FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::text[], $6::bigint[], $7::boolean[], $8::bigint[],
         $9::bigint[], $10::int[], $11::boolean[], $12::text[], $13::bigint[])
         WITH ORDINALITY AS v(id, endpoint_id, input_json, webhook, s3_config, execution_timeout_ms, low_priority, ttl_ms,
           retention_ms, max_attempts, sync, key_id, now, ord)
       ORDER BY ord`,
      [
        list.map((j) => j.id),
        list.map((j) => j.endpointId),
        list.map((j) => j.inputJson),
        list.map((j) => j.webhook),
        list.map((j) => j.s3Config),
        list.map((j) => j.executionTimeoutMs),
        list.map((j) => j.lowPriority),
        list.map((j) => j.ttlMs),
        list.map((j) => j.retentionMs),
        list.map((j) => j.maxAttempts),
        list.map((j) => j.sync),
        list.map((j) => j.keyId),
        list.map((j) => j.now),
      ],
    );
  }

  const finishes = createBatcher<FinishArgs, JobRecord | undefined>({
    key: (args) => args.id,
    one: async (args) => (await finishMany([args]))[0],
    many: finishMany,
  });

  async function finishMany(list: FinishArgs[]): Promise<(JobRecord | undefined)[]> {
    const rows = await jobs(
      `UPDATE jobs j SET status = v.status, output_json = v.output_json, error = v.error, finished_at = v.now,
         expires_at = v.now + j.retention_ms, deadline_at = NULL,
         webhook_next_at = CASE WHEN j.webhook IS NOT NULL THEN v.now ELSE NULL END
       FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::text[], $6::text[], $7::bigint[])
         AS v(id, worker_id, endpoint_id, status, output_json, error, now)
       WHERE j.id = v.id AND j.status = 'IN_PROGRESS' AND j.worker_id = v.worker_id
         AND (v.endpoint_id IS NULL OR j.endpoint_id = v.endpoint_id)
       RETURNING j.*`,
      [
        list.map((a) => a.id),
        list.map((a) => a.workerId),
        list.map((a) => a.endpointId ?? null),
        list.map((a) => a.status),
        list.map((a) => a.outputJson),
        list.map((a) => a.error),
        list.map((a) => a.now),
      ],
    );
    const byId = new Map(rows.map((job) => [job.id, job]));
    return list.map((a) => byId.get(a.id));
  }

  let closing: Promise<void> | undefined;

  const store: PostgresStore = {
    kind: 'postgres',
    pg: db,

    migrate: () => db.migrate(),
    close: () => {
      closing ??= (async () => {
        await Promise.all([inserts.flush(), finishes.flush(), reads.flush()]);
        await db.close();
      })();
      return closing;
    },

    // ---- jobs -------------------------------------------------------------------------------

    insertJob: (job) => inserts.run(job),

    getJob: (id) => reads.run(id),

    claimJobs: async ({ endpointId, workerId, limit, now }) => {
      const rows = await query<JobRow>(
        `WITH next AS (
           SELECT id FROM jobs WHERE endpoint_id = $1 AND status = 'IN_QUEUE' AND deadline_at > $3
           ORDER BY queued_at, seq LIMIT $4 FOR UPDATE SKIP LOCKED)
         UPDATE jobs j SET status = 'IN_PROGRESS', worker_id = $2, started_at = $3, attempts = attempts + 1,
           deadline_at = $3 + execution_timeout_ms, output_json = NULL, error = NULL
         FROM next WHERE j.id = next.id RETURNING j.*`,
        [endpointId, workerId, now, limit],
      );
      return rows.sort(byQueueOrder).map(toJob);
    },

    finishJob: (args) => finishes.run(args),

    setProgress: async ({ id, workerId, endpointId = null, outputJson }) =>
      (
        await query(
          `UPDATE jobs SET output_json = $4 WHERE id = $1 AND status = 'IN_PROGRESS' AND worker_id = $2
             AND ($3::text IS NULL OR endpoint_id = $3) RETURNING 1`,
          [id, workerId, endpointId, outputJson],
        )
      ).length === 1,

    cancelJob: ({ id, now }) =>
      oneJob(`UPDATE jobs SET status = 'CANCELLED', ${finish('$2')} WHERE id = $1 AND status IN ('IN_QUEUE', 'IN_PROGRESS') RETURNING *`, [id, now]),

    purgeQueue: async ({ endpointId, now }) =>
      (
        await query<{ id: string }>(
          `UPDATE jobs SET status = 'CANCELLED', ${finish('$2')} WHERE endpoint_id = $1 AND status = 'IN_QUEUE' RETURNING id`,
          [endpointId, now],
        )
      ).map((row) => row.id),

    retryJob: ({ id, now }) =>
      oneJob(
        `WITH j AS (
           UPDATE jobs SET status = 'IN_QUEUE', output_json = NULL, error = NULL, worker_id = NULL, started_at = NULL,
             finished_at = NULL, expires_at = NULL, webhook_attempts = 0, webhook_next_at = NULL, attempts = 0,
             retries = retries + 1, queued_at = $2, deadline_at = $2 + ttl_ms
           WHERE id = $1 AND status IN ('FAILED', 'TIMED_OUT') AND expires_at > $2 RETURNING *),
         d AS (DELETE FROM job_stream WHERE job_id IN (SELECT id FROM j))
         SELECT * FROM j`,
        [id, now],
      ),

    timeOutRunning: ({ now, limit }) => timeOutPastDeadline('IN_PROGRESS', 'execution timeout exceeded', now, limit),

    expireQueued: ({ now, limit }) => timeOutPastDeadline('IN_QUEUE', 'ttl expired in queue', now, limit),

    releaseWorkerJobs: async ({ workerIds, now }) => {
      const rows = await query<JobRow & { requeued: boolean }>(
        `WITH failed AS (
           UPDATE jobs SET status = 'FAILED', error = 'worker lost', ${finish('$2')}
           WHERE status = 'IN_PROGRESS' AND worker_id = ANY($1::text[]) AND attempts >= max_attempts RETURNING *),
         requeued AS (
           UPDATE jobs SET status = 'IN_QUEUE', queued_at = $2, deadline_at = $2 + ttl_ms, worker_id = NULL,
             started_at = NULL, output_json = NULL
           WHERE status = 'IN_PROGRESS' AND worker_id = ANY($1::text[]) AND attempts < max_attempts RETURNING *)
         SELECT *, false AS requeued FROM failed UNION ALL SELECT *, true AS requeued FROM requeued`,
        [workerIds, now],
      );
      return {
        requeued: rows.filter((r) => r.requeued).map(toJob),
        failed: rows.filter((r) => !r.requeued).map(toJob),
      };
    },

    returnJobs: async ({ ids, workerId }) =>
      (
        await query<{ id: string }>(
          `UPDATE jobs SET status = 'IN_QUEUE', attempts = GREATEST(attempts - 1, 0), worker_id = NULL, started_at = NULL,
             output_json = NULL, deadline_at = queued_at + ttl_ms
           WHERE status = 'IN_PROGRESS' AND worker_id = $2 AND id = ANY($1::text[]) RETURNING id`,
          [ids, workerId],
        )
      ).map((row) => row.id),

    // Batches of `limit`, rows another gateway is deleting skipped: the queue table stays
    // small without one long transaction holding locks (docs/postgres.md).
    deleteExpired: async ({ now, limit }) =>
      (
        await query(
          `DELETE FROM jobs WHERE id IN (SELECT id FROM jobs WHERE expires_at <= $1 AND webhook_next_at IS NULL
             AND status IN ${TERMINAL} ORDER BY expires_at LIMIT $2 FOR UPDATE SKIP LOCKED) RETURNING 1`,
          [now, limit],
        )
      ).length,

    shortenRetention: async ({ id, ttlMs }) => {
      await query(
        `UPDATE jobs SET retention_ms = LEAST(retention_ms, $2),
           expires_at = CASE WHEN finished_at IS NULL THEN expires_at
             WHEN expires_at IS NULL THEN finished_at + $2
             ELSE LEAST(expires_at, finished_at + $2) END
         WHERE id = $1`,
        [id, ttlMs],
      );
    },

    // FOR SHARE: a result for the job waits for this append (and the reverse), so once a
    // reader sees the job terminal, every chunk it will ever have is already committed.
    appendStream: async ({ id, workerId, endpointId = null, chunks }) => {
      const rows = await query<{ held: boolean }>(
        `WITH held AS (SELECT id FROM jobs WHERE id = $1 AND status = 'IN_PROGRESS' AND worker_id = $2
             AND ($3::text IS NULL OR endpoint_id = $3) FOR SHARE),
           ins AS (INSERT INTO job_stream (job_id, chunk)
             SELECT held.id, c.chunk FROM held, unnest($4::text[]) WITH ORDINALITY AS c(chunk, ord) ORDER BY c.ord)
         SELECT EXISTS (SELECT 1 FROM held) AS held`,
        [id, workerId, endpointId, chunks],
      );
      return rows[0]?.held === true;
    },

    drainStream: async (id) =>
      (await query<{ seq: number; chunk: string }>('DELETE FROM job_stream WHERE job_id = $1 RETURNING seq, chunk', [id]))
        .sort((a, b) => a.seq - b.seq)
        .map((row) => row.chunk),

    countJobs: async (endpointId) =>
      tallyJobCounts(
        await query<{ status: JobStatus; n: number; retried: number }>(
          `SELECT status, COUNT(*) AS n, COUNT(*) FILTER (WHERE retries > 0 OR attempts > 1) AS retried
           FROM jobs WHERE endpoint_id = $1 GROUP BY status`,
          [endpointId],
        ),
      ),

    queueStats: async ({ endpointId, now }): Promise<QueueStats> => {
      const [queued, held] = await Promise.all([
        query<{ n: number; normal: number; oldest: number | null }>(
          `SELECT COUNT(*) AS n, COUNT(*) FILTER (WHERE NOT low_priority) AS normal,
             MIN(queued_at) FILTER (WHERE NOT low_priority) AS oldest
           FROM jobs WHERE endpoint_id = $1 AND status = 'IN_QUEUE' AND deadline_at > $2`,
          [endpointId, now],
        ),
        query<{ worker_id: string | null; n: number }>(
          `SELECT worker_id, COUNT(*) AS n FROM jobs WHERE endpoint_id = $1 AND status = 'IN_PROGRESS' GROUP BY worker_id`,
          [endpointId],
        ),
      ]);
      const heldBy: Record<string, number> = {};
      let inProgress = 0;
      for (const row of held) {
        inProgress += row.n;
        if (row.worker_id !== null) heldBy[row.worker_id] = row.n;
      }
      const q = queued[0];
      return { inQueue: q?.n ?? 0, inQueueNormal: q?.normal ?? 0, oldestNormalQueuedAt: q?.oldest ?? null, inProgress, heldBy };
    },

    listJobs: ({ endpointId, limit }) =>
      jobs('SELECT * FROM jobs WHERE endpoint_id = $1 ORDER BY created_at DESC, seq DESC LIMIT $2', [endpointId, limit]),

    jobStates: async (ids) =>
      (
        await query<{ id: string; status: JobStatus; worker_id: string | null }>(
          'SELECT id, status, worker_id FROM jobs WHERE id = ANY($1::text[])',
          [ids],
        )
      ).map((row) => ({ id: row.id, status: row.status, workerId: row.worker_id })),

    dueWebhooks: ({ now, limit }) =>
      jobs(`SELECT * FROM jobs WHERE webhook_next_at <= $1 AND status IN ${TERMINAL} ORDER BY webhook_next_at, seq LIMIT $2`, [now, limit]),

    markWebhook: async ({ id, attempts, nextAt }) => {
      await query('UPDATE jobs SET webhook_attempts = $2, webhook_next_at = $3 WHERE id = $1', [id, attempts, nextAt]);
    },

    // ---- workers ----------------------------------------------------------------------------

    touchWorker: async ({ id, endpointId, now, healthy, reason, version }) => {
      await query(
        `INSERT INTO workers (id, endpoint_id, first_seen_at, last_seen_at, healthy, reason, version)
         VALUES ($1, $2, $3, $3, COALESCE($4::boolean, TRUE), $5, $6)
         ON CONFLICT (id) DO UPDATE SET endpoint_id = excluded.endpoint_id, last_seen_at = excluded.last_seen_at,
           healthy = COALESCE($4::boolean, workers.healthy),
           reason = CASE WHEN $7::boolean THEN excluded.reason ELSE workers.reason END,
           version = CASE WHEN $8::boolean THEN excluded.version ELSE workers.version END`,
        [id, endpointId, now, healthy ?? null, reason ?? null, version ?? null, reason !== undefined, version !== undefined],
      );
    },

    listWorkers: async (endpointId?: string) =>
      (endpointId === undefined
        ? await query<WorkerRow>('SELECT * FROM workers ORDER BY first_seen_at, id')
        : await query<WorkerRow>('SELECT * FROM workers WHERE endpoint_id = $1 ORDER BY first_seen_at, id', [endpointId])
      ).map(toWorker),

    findStaleWorkers: async (cutoff): Promise<WorkerRecord[]> =>
      (await query<WorkerRow>('SELECT * FROM workers WHERE last_seen_at < $1 ORDER BY last_seen_at, id', [cutoff])).map(toWorker),

    deleteWorkers: async (ids) => {
      await query('DELETE FROM workers WHERE id = ANY($1::text[])', [ids]);
    },

    jobsHeldBy: async (workerId) =>
      (
        await query<{ id: string }>(`SELECT id FROM jobs WHERE worker_id = $1 AND status = 'IN_PROGRESS' ORDER BY started_at, seq`, [
          workerId,
        ])
      ).map((row) => row.id),

    // ---- endpoints --------------------------------------------------------------------------

    createEndpoint: async (endpoint: EndpointRecord) =>
      (
        await query(
          `INSERT INTO endpoints (${ENDPOINT_COLUMNS}) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13)
           ON CONFLICT (id) DO NOTHING RETURNING 1`,
          endpointParams(endpoint),
        )
      ).length === 1,

    getEndpoint: async (id) => {
      const row = (await query<EndpointRow>('SELECT * FROM endpoints WHERE id = $1', [id]))[0];
      return row === undefined ? undefined : toEndpoint(row);
    },

    listEndpoints: async () => (await query<EndpointRow>('SELECT * FROM endpoints ORDER BY created_at, id')).map(toEndpoint),

    updateEndpoint: async (endpoint) =>
      (
        await query(
          `UPDATE endpoints SET name = $2, workers_min = $3, workers_max = $4, idle_timeout = $5, execution_timeout_ms = $6,
             scaler_type = $7, scaler_value = $8, max_attempts = $9, worker_json = $10, webhook_secret = $11, updated_at = $12
           WHERE id = $1 RETURNING 1`,
          [...endpointParams(endpoint).slice(0, 11), endpoint.updatedAt],
        )
      ).length === 1,

    deleteEndpoint: async (id) =>
      db.transaction(async (client) => {
        if ((await client.query('DELETE FROM endpoints WHERE id = $1', [id])).rowCount === 0) return false;
        await client.query('DELETE FROM jobs WHERE endpoint_id = $1', [id]); // stream chunks go by ON DELETE CASCADE
        await client.query('DELETE FROM workers WHERE endpoint_id = $1', [id]);
        return true;
      }),

    // ---- API keys ---------------------------------------------------------------------------

    createKey: async (key: KeyRecord) => {
      await query('INSERT INTO api_keys (id, name, hash, scopes, endpoints, created_at) VALUES ($1, $2, $3, $4, $5, $6)', keyParams(key));
    },

    listKeys: async () => (await query<KeyRow>('SELECT * FROM api_keys ORDER BY created_at, id')).map(toKey),

    deleteKey: async (id) => (await query('DELETE FROM api_keys WHERE id = $1 RETURNING 1', [id])).length === 1,

    getKeyByHash: async (hash) => {
      const row = (await query<KeyRow>('SELECT * FROM api_keys WHERE hash = $1', [hash]))[0];
      return row === undefined ? undefined : toKey(row);
    },

    countKeysWithScope: async (scope: Scope) =>
      (await query<{ n: number }>('SELECT COUNT(*) AS n FROM api_keys WHERE scopes::jsonb ? $1', [scope]))[0]?.n ?? 0,

    // ---- usage ------------------------------------------------------------------------------

    recordUsage: async (usage) => {
      await query(
        `INSERT INTO usage_records (job_id, key_id, endpoint_id, pixels, cost_units, created_at)
         VALUES ($1, $2, $3, $4, $5, $6) ON CONFLICT (job_id) DO NOTHING`,
        [usage.jobId, usage.keyId, usage.endpointId, usage.pixels, usage.costUnits.toString(), usage.createdAt],
      );
    },

    // SUM(bigint) is NUMERIC: read as text, so the cost stays exact past 2^53.
    sumUsage: async ({ from, to, groupBy }) => {
      const column = groupBy === 'key' ? 'key_id' : 'endpoint_id';
      const rows = await query<{ grp: string | null; jobs: number; pixels: string; cost: string }>(
        `SELECT ${column} AS grp, COUNT(*) AS jobs, SUM(pixels)::text AS pixels, SUM(cost_units)::text AS cost
         FROM usage_records WHERE created_at >= $1 AND created_at < $2
         GROUP BY ${column} ORDER BY SUM(cost_units) DESC, grp NULLS FIRST`,
        [from, to],
      );
      return rows.map((row) => ({ group: row.grp, jobs: row.jobs, pixels: Number(row.pixels), costUnits: BigInt(row.cost) }));
    },
  };
  return store;
}
