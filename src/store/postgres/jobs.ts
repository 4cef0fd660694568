import type { JobStatus } from '../../model/job-states.js';
import { textOf } from '../../model/json.js';
import type { JobCounts, JobRecord, JobWithInput, PurgedJob, QueueByKey, QueueStats } from '../../model/records.js';
import { COL, IDEMPOTENCY_COLUMNS, JOB_COLUMN_COUNT, JOB_COLUMNS, jobColumnList, PURGED_COLUMNS, toJob, toPurgedJob, type PurgedRow } from '../job-columns.js';
import { tallyJobCounts, toQueueByKey, toQueueStats, type CountRow, type HeldRow, type KeyQueuedRow, type QueuedRow } from '../job-counts.js';
import { fairPlace, finishedColumns, LIVE_STATUS_LIST, requeuedColumns, RETRYABLE_STATUS_LIST, TERMINAL_STATUS_LIST } from '../job-sql.js';
import { WEBHOOK_ATTEMPTS_KEPT, type IdempotentJob, type JobStore, type StreamChunk, type WebhookAttempt } from '../store.js';
import type { PgConnection } from './connection.js';
import { createJobBatches, jobColumnArrays, type FinishArgs, type JobBatches } from './job-batches.js';

type Args<M extends keyof JobStore> = Parameters<JobStore[M]>[0];

/** Where claimJobs' RETURNING puts seq and the queue place (fair_at), after the job columns. */
const SEQ = JOB_COLUMN_COUNT;
const FAIR_AT = JOB_COLUMN_COUNT + 1;
/** Where claimJobs' rows carry the job's input, after seq and fair_at. */
const INPUT = JOB_COLUMN_COUNT + 2;
/** Where requeueJobs' rows carry their requeued flag, after the job columns. */
const REQUEUED = JOB_COLUMN_COUNT;

// `jobs j` in an UPDATE … FROM returns its columns qualified: the other relation has an id too.
// $2 holds a worker id per job to claim, in taker order ($4 of them): the n-th job in queue
// order (fair_at, then seq: fairPlace) goes to $2[n]. Window functions cannot sit beside FOR UPDATE, so rows are numbered
// after they are locked.
// The claimed rows' inputs are read from job_inputs (migration 0020), never rewritten.
const CLAIM_JOBS_SQL = `WITH next AS (
     SELECT id, fair_at, seq FROM jobs WHERE endpoint_id = $1 AND status = 'IN_QUEUE' AND deadline_at > $3
     ORDER BY fair_at, seq LIMIT $4 FOR UPDATE SKIP LOCKED),
   numbered AS (SELECT id, row_number() OVER (ORDER BY fair_at, seq) AS n FROM next),
   claimed AS (UPDATE jobs j SET status = 'IN_PROGRESS', worker_id = ($2::text[])[numbered.n], started_at = $3, attempts = attempts + 1,
     deadline_at = $3 + execution_timeout_ms, output_json = NULL, error = NULL
     FROM numbered WHERE j.id = numbered.id RETURNING ${jobColumnList('j')}, j.seq, j.fair_at)
   SELECT ${jobColumnList('c')}, c.seq, c.fair_at, i.input_json FROM claimed c JOIN job_inputs i ON i.job_id = c.id`;
const FIND_IDEMPOTENT_SQL = `SELECT ${JOB_COLUMNS}, request_digest FROM jobs WHERE idempotency_key = $1`;
// The unique index on idempotency_key decides between gateways: a second insert of one key
// waits for the first's commit, then does nothing.
const INSERT_JOB_ONCE_SQL = `WITH ins AS (INSERT INTO jobs (${JOB_COLUMNS}, ${IDEMPOTENCY_COLUMNS.join(', ')}, fair_at)
   VALUES (${Array.from({ length: JOB_COLUMN_COUNT + 2 }, (_, i) => `$${i + 1}`).join(', ')},
     ${fairPlace('postgres', `$${COL.endpointId + 1}::text`, `$${COL.keyId + 1}::text`, `$${COL.queuedAt + 1}::bigint`)})
   ON CONFLICT (idempotency_key) WHERE idempotency_key IS NOT NULL DO NOTHING RETURNING id)
   INSERT INTO job_inputs (job_id, input_json) SELECT id, $${JOB_COLUMN_COUNT + 3}::text FROM ins RETURNING 1`;
const GET_INPUT_SQL = 'SELECT input_json FROM job_inputs WHERE job_id = $1';
/** How often insertJobOnce tries again when the key's holder was deleted between its two statements. */
const INSERT_ONCE_TRIES = 3;
const SET_PROGRESS_SQL = `UPDATE jobs SET output_json = $4 WHERE id = $1 AND status = 'IN_PROGRESS' AND worker_id = $2
     AND ($3::text IS NULL OR endpoint_id = $3) RETURNING 1`;
const CANCEL_JOB_SQL = `UPDATE jobs SET status = 'CANCELLED', ${finishedColumns('$2')}
   WHERE id = $1 AND status IN ${LIVE_STATUS_LIST} RETURNING ${JOB_COLUMNS}`;
// In batches of $3, oldest first, each its own statement: a purge of a million jobs holds no
// million-row transaction and no million-entry answer. Jobs that entered the queue after the
// purge began are left alone, so a steady stream of submissions cannot keep it going.
const PURGE_QUEUE_SQL = `WITH due AS (SELECT id FROM jobs WHERE endpoint_id = $1 AND status = 'IN_QUEUE' AND queued_at <= $2
     ORDER BY queued_at LIMIT $3 FOR UPDATE)
   UPDATE jobs j SET status = 'CANCELLED', ${finishedColumns('$2')}
   FROM due WHERE j.id = due.id AND j.status = 'IN_QUEUE' RETURNING ${PURGED_COLUMNS.split(', ').map((c) => `j.${c}`).join(', ')}`;
const RETRY_JOB_SQL = `WITH j AS (
     UPDATE jobs SET status = 'IN_QUEUE', output_json = NULL, error = NULL, worker_id = NULL, started_at = NULL,
       finished_at = NULL, expires_at = NULL, webhook_attempts = 0, webhook_next_at = NULL, attempts = 0,
       retries = retries + 1, queued_at = $2, deadline_at = $2 + ttl_ms, stream_bytes = 0, stream_cut = 0,
       fair_at = ${fairPlace('postgres', 'jobs.endpoint_id', 'jobs.key_id', '$2::bigint')}
     WHERE id = $1 AND status IN ${RETRYABLE_STATUS_LIST} AND expires_at > $2 RETURNING ${JOB_COLUMNS}),
   d AS (DELETE FROM job_stream WHERE job_id IN (SELECT id FROM j))
   SELECT ${JOB_COLUMNS} FROM j`;
const TIME_OUT_SQL = `WITH due AS (SELECT id FROM jobs WHERE status = $3 AND deadline_at <= $1
     ORDER BY deadline_at LIMIT $2 FOR UPDATE SKIP LOCKED)
   UPDATE jobs j SET status = 'TIMED_OUT', error = $4, ${finishedColumns('$1')}
   FROM due WHERE j.id = due.id AND j.status = $3 RETURNING ${jobColumnList('j')}`;
// One statement: the counted hand-outs at maxAttempts end FAILED, the others are requeued (both
// parts see the same snapshot, so the second leaves out what the first ends) and the abandoned
// run's undelivered chunks of those go.
const REQUEUE_WHERE = `status = 'IN_PROGRESS' AND worker_id = ANY($1::text[]) AND ($2::text[] IS NULL OR id = ANY($2::text[]))`;
const REQUEUE_SQL = `WITH failed AS (
     UPDATE jobs SET status = 'FAILED', error = replace($4, '{attempts}', attempts::text), ${finishedColumns('$5')}
     WHERE ${REQUEUE_WHERE} AND $3 AND attempts >= max_attempts RETURNING ${JOB_COLUMNS}),
   requeued AS (
     UPDATE jobs SET ${requeuedColumns('$3', '$6')}
     WHERE ${REQUEUE_WHERE} AND NOT ($3 AND attempts >= max_attempts) RETURNING ${JOB_COLUMNS}),
   gone AS (DELETE FROM job_stream WHERE job_id IN (SELECT id FROM requeued))
   SELECT ${JOB_COLUMNS}, false AS requeued FROM failed UNION ALL SELECT ${JOB_COLUMNS}, true AS requeued FROM requeued`;
// Batches of `limit`, rows another gateway is deleting skipped: the queue table stays
// small without one long transaction holding locks (docs/postgres.md).
const DELETE_EXPIRED_SQL = `DELETE FROM jobs WHERE id IN (SELECT id FROM jobs WHERE expires_at <= $1 AND webhook_next_at IS NULL
     AND status IN ${TERMINAL_STATUS_LIST} ORDER BY expires_at LIMIT $2 FOR UPDATE SKIP LOCKED) RETURNING 1`;
const SHORTEN_RETENTION_SQL = `UPDATE jobs SET retention_ms = LEAST(retention_ms, $2),
     expires_at = CASE WHEN finished_at IS NULL THEN expires_at
       WHEN expires_at IS NULL THEN finished_at + $2
       ELSE LEAST(expires_at, finished_at + $2) END
   WHERE id = $1`;
// One statement. The job row is locked (FOR UPDATE): a result for the job waits for this append
// (and the reverse), so once a reader sees the job terminal every chunk it will have is
// committed; appends of one job are counted one after the other. `fits`: the chunks go in and
// their bytes are counted; `cut`: the cap refuses a run not yet cut, which is cut with a marker
// chunk ''. Identity seqs follow the insert order (ORDER BY ord). Each chunk carries the run
// that posted it (attempts + preemptions: the runs the job has begun, docs/api.md).
const APPEND_STREAM_SQL = `WITH job AS (
       SELECT id, attempts, attempts + preemptions AS run, stream_bytes, stream_cut FROM jobs WHERE id = $1 AND status = 'IN_PROGRESS' AND worker_id = $2
         AND ($3::text IS NULL OR endpoint_id = $3) FOR UPDATE),
     fits AS (SELECT id, run FROM job WHERE stream_cut < attempts AND stream_bytes + $5 <= $6),
     cut AS (SELECT id, attempts, run FROM job WHERE stream_cut < attempts AND stream_bytes + $5 > $6),
     counted AS (UPDATE jobs SET stream_bytes = jobs.stream_bytes + $5 FROM fits WHERE jobs.id = fits.id),
     marked AS (UPDATE jobs SET stream_cut = cut.attempts FROM cut WHERE jobs.id = cut.id),
     ins AS (INSERT INTO job_stream (job_id, chunk, attempt)
       SELECT fits.id, c.chunk, fits.run FROM fits, unnest($4::text[]) WITH ORDINALITY AS c(chunk, ord) ORDER BY c.ord),
     marker AS (INSERT INTO job_stream (job_id, chunk, attempt) SELECT id, '', run FROM cut)
   SELECT EXISTS (SELECT 1 FROM job) AS held, EXISTS (SELECT 1 FROM fits) AS appended`;
// A page: as on SQLite, n counts the chunks looked at (up to $3 + 1): n > the page's length means more.
const READ_STREAM_SQL = `SELECT seq, chunk, attempt, n FROM (
     SELECT seq, chunk, attempt, SUM(octet_length(chunk)) OVER (ORDER BY seq) - octet_length(chunk) AS before, COUNT(*) OVER () AS n
     FROM (SELECT seq, chunk, attempt FROM job_stream WHERE job_id = $1 AND seq > $2 ORDER BY seq LIMIT $3 + 1) AS head) AS page
   WHERE before < $4 ORDER BY seq LIMIT $3`;
// The delivered chunks go, and their bytes come off the job's count, in one statement.
const DELETE_STREAM_SQL = `WITH gone AS (DELETE FROM job_stream WHERE job_id = $1 AND seq <= $2 RETURNING octet_length(chunk) AS bytes),
     uncounted AS (UPDATE jobs SET stream_bytes = GREATEST(0, stream_bytes - (SELECT SUM(bytes) FROM gone))
       WHERE id = $1 AND EXISTS (SELECT 1 FROM gone))
   SELECT COUNT(*)::int AS n FROM gone`;
const COUNT_JOBS_SQL = `SELECT status, COUNT(*) AS n, COUNT(*) FILTER (WHERE retries > 0) AS retried, COUNT(*) FILTER (WHERE attempts > 1) AS reattempted
   FROM jobs WHERE endpoint_id = $1 GROUP BY status`;
const QUEUED_STATS_SQL = `SELECT COUNT(*) AS n, COUNT(*) FILTER (WHERE NOT low_priority) AS normal, COALESCE(SUM(input_bytes), 0) AS bytes,
     MIN(queued_at) FILTER (WHERE NOT low_priority) AS oldest
   FROM jobs WHERE endpoint_id = $1 AND status = 'IN_QUEUE' AND deadline_at > $2`;
// Grouped on the key as jobs_fair indexes it; the window sums give the totals over every key
// before LIMIT keeps the largest.
const QUEUE_BY_KEY_SQL = `SELECT key, n, bytes, SUM(n) OVER () AS total_n, SUM(bytes) OVER () AS total_bytes FROM (
     SELECT COALESCE(key_id, '') AS key, COUNT(*) AS n, COALESCE(SUM(input_bytes), 0) AS bytes
     FROM jobs WHERE endpoint_id = $1 AND status = 'IN_QUEUE' AND deadline_at > $2 GROUP BY COALESCE(key_id, '')) AS per_key
   ORDER BY n DESC, key LIMIT $3`;
const HELD_STATS_SQL = `SELECT worker_id, COUNT(*) AS n, MAX(started_at) AS since FROM jobs WHERE endpoint_id = $1 AND status = 'IN_PROGRESS' GROUP BY worker_id`;
const LIST_JOBS_SQL = `SELECT ${JOB_COLUMNS} FROM jobs WHERE endpoint_id = $1 ORDER BY created_at DESC, seq DESC LIMIT $2`;
const DUE_WEBHOOKS_SQL = `SELECT ${JOB_COLUMNS} FROM jobs WHERE webhook_next_at <= $1 AND status IN ${TERMINAL_STATUS_LIST}
   AND NOT (COALESCE(key_id, '') = ANY($3::text[])) ORDER BY webhook_next_at, seq LIMIT $2`;
// The running total stops the read at maxChars, so a long stream of large chunks is not all read.
// Markers ('') of a cut stream are not chunks: left out.
const PEEK_STREAM_SQL = `SELECT chunk FROM (SELECT seq, chunk, SUM(length(chunk)) OVER (ORDER BY seq) - length(chunk) AS before
     FROM job_stream WHERE job_id = $1 AND chunk <> '' ORDER BY seq LIMIT $2) AS head WHERE before < $3 ORDER BY seq`;
// One statement: the job's delivery state, the attempt's record, and the records past the
// newest WEBHOOK_ATTEMPTS_KEPT deleted. Every part sees the snapshot from before the insert,
// so the delete keeps KEPT - 1 old records beside the new one.
const RECORD_ATTEMPT_SQL = `WITH job AS (
     UPDATE jobs SET webhook_attempts = $2, webhook_next_at = $3 WHERE id = $1 RETURNING id),
   ins AS (INSERT INTO webhook_attempts (job_id, retries, attempt, at, http_status, error)
     SELECT id, $4::integer, $5::integer, $6::bigint, $7::integer, $8::text FROM job),
   old AS (SELECT seq FROM webhook_attempts WHERE job_id = $1 AND EXISTS (SELECT 1 FROM job)
     ORDER BY seq DESC OFFSET ${WEBHOOK_ATTEMPTS_KEPT - 1})
   DELETE FROM webhook_attempts WHERE job_id = $1 AND seq IN (SELECT seq FROM old)`;
const LIST_ATTEMPTS_SQL = `SELECT retries, attempt, at, http_status AS "httpStatus", error FROM webhook_attempts
   WHERE job_id = $1 ORDER BY seq`;

/** A claimed row → the job with its input (INPUT). */
function withInput(row: unknown[]): JobWithInput {
  const job = toJob(row) as JobWithInput;
  job.inputJson = row[INPUT] as string;
  return job;
}

/** Restores queue order (fair_at, then seq) among claimed rows: RETURNING has no set order. */
function byQueueOrder(a: unknown[], b: unknown[]): number {
  return Number(a[FAIR_AT]) - Number(b[FAIR_AT]) || Number(a[SEQ]) - Number(b[SEQ]);
}

/**
 * The jobs table (and job_stream) on PostgreSQL. Every call is one statement, so a write
 * resolves once committed; submissions, results and reads of one event-loop turn are each
 * grouped into one statement (job-batches.ts). Claims take N jobs with FOR UPDATE SKIP LOCKED,
 * so gateways sharing the database never block each other. Job rows are read as arrays and
 * mapped by toJob, as on SQLite.
 */
export class PgJobStore implements JobStore {
  private readonly batches: JobBatches;

  constructor(private readonly db: PgConnection) {
    this.batches = createJobBatches(db);
  }

  /** Sends the pending batches and waits for those in flight (before the pool closes). */
  flush(): Promise<void> {
    return this.batches.flush();
  }

  private async jobs(sql: string, params: unknown[]): Promise<JobRecord[]> {
    return (await this.db.queryArrays(sql, params)).map(toJob);
  }

  insertJob({ job, inputJson }: Args<'insertJob'>): Promise<void> {
    return this.batches.inserts.run({ job, inputJson: textOf(inputJson) });
  }

  getJob(id: string): Promise<JobRecord | undefined> {
    return this.batches.reads.run(id);
  }

  async getJobInput(id: string): Promise<string | undefined> {
    return (await this.db.query<{ input_json: string }>(GET_INPUT_SQL, [id]))[0]?.input_json;
  }

  async findIdempotentJob(keyDigest: string): Promise<IdempotentJob | undefined> {
    const row = (await this.db.queryArrays(FIND_IDEMPOTENT_SQL, [keyDigest]))[0];
    return row === undefined ? undefined : { job: toJob(row), requestDigest: row[JOB_COLUMN_COUNT] as string };
  }

  /** Not batched: a submission with a key is rare, and its conflict must be seen alone. */
  async insertJobOnce({ job, inputJson, keyDigest, requestDigest }: Args<'insertJobOnce'>): Promise<{ created: true } | { created: false; existing: IdempotentJob }> {
    const values = jobColumnArrays([job]).map((column) => column[0]);
    for (let i = 0; i < INSERT_ONCE_TRIES; i++) {
      if ((await this.db.query(INSERT_JOB_ONCE_SQL, [...values, keyDigest, requestDigest, textOf(inputJson)])).length === 1) return { created: true };
      // A new statement sees the holder's commit (READ COMMITTED), unless it was deleted meanwhile.
      const existing = await this.findIdempotentJob(keyDigest);
      if (existing) return { created: false, existing };
    }
    throw new Error(`idempotency key of job ${job.id}: its holder kept disappearing between insert and read`);
  }

  claimJobs({ endpointId, workerId, limit, now }: Args<'claimJobs'>): Promise<JobWithInput[]> {
    return this.claimJobsFor({ endpointId, takers: [{ workerId, limit }], now });
  }

  async claimJobsFor({ endpointId, takers, now }: Args<'claimJobsFor'>): Promise<JobWithInput[]> {
    const owners: string[] = [];
    for (const t of takers) for (let i = 0; i < t.limit; i++) owners.push(t.workerId);
    if (owners.length === 0) return [];
    return (await this.db.queryArrays(CLAIM_JOBS_SQL, [endpointId, owners, now, owners.length])).sort(byQueueOrder).map(withInput);
  }

  finishJob(args: FinishArgs): Promise<JobRecord | undefined> {
    return this.batches.finishes.run(args);
  }

  async setProgress({ id, workerId, endpointId, outputJson }: Args<'setProgress'>): Promise<boolean> {
    return (await this.db.query(SET_PROGRESS_SQL, [id, workerId, endpointId ?? null, outputJson])).length === 1;
  }

  async cancelJob({ id, now }: Args<'cancelJob'>): Promise<JobRecord | undefined> {
    return (await this.jobs(CANCEL_JOB_SQL, [id, now]))[0];
  }

  async purgeQueue({ endpointId, now, limit }: Args<'purgeQueue'>): Promise<PurgedJob[]> {
    return (await this.db.query<PurgedRow>(PURGE_QUEUE_SQL, [endpointId, now, limit])).map(toPurgedJob);
  }

  async retryJob({ id, now }: Args<'retryJob'>): Promise<JobRecord | undefined> {
    return (await this.jobs(RETRY_JOB_SQL, [id, now]))[0];
  }

  timeOutRunning({ now, limit }: Args<'timeOutRunning'>): Promise<JobRecord[]> {
    return this.jobs(TIME_OUT_SQL, [now, limit, 'IN_PROGRESS', 'execution timeout exceeded']);
  }

  expireQueued({ now, limit }: Args<'expireQueued'>): Promise<JobRecord[]> {
    return this.jobs(TIME_OUT_SQL, [now, limit, 'IN_QUEUE', 'ttl expired in queue']);
  }

  async requeueJobs({ workerIds, ids, counted, preempted, error, now }: Args<'requeueJobs'>): Promise<{ requeued: JobRecord[]; failed: JobRecord[] }> {
    const rows = await this.db.queryArrays(REQUEUE_SQL, [workerIds, ids ?? null, counted, error, now, preempted === true]);
    return {
      requeued: rows.filter((r) => r[REQUEUED] === true).map(toJob),
      failed: rows.filter((r) => r[REQUEUED] !== true).map(toJob),
    };
  }

  async deleteExpired({ now, limit }: Args<'deleteExpired'>): Promise<number> {
    return (await this.db.query(DELETE_EXPIRED_SQL, [now, limit])).length;
  }

  async shortenRetention({ id, ttlMs }: Args<'shortenRetention'>): Promise<void> {
    await this.db.query(SHORTEN_RETENTION_SQL, [id, ttlMs]);
  }

  async appendStream({ id, workerId, endpointId, chunks, bytes, maxBytes }: Args<'appendStream'>): Promise<'appended' | 'not-held' | 'full'> {
    const rows = await this.db.query<{ held: boolean; appended: boolean }>(APPEND_STREAM_SQL, [id, workerId, endpointId ?? null, chunks, bytes, maxBytes]);
    if (rows[0]?.held !== true) return 'not-held';
    return rows[0].appended ? 'appended' : 'full';
  }

  async readStream({ id, after, limit, maxBytes }: Args<'readStream'>): Promise<{ chunks: StreamChunk[]; more: boolean }> {
    const rows = await this.db.query<{ seq: string; chunk: string; attempt: number; n: string }>(READ_STREAM_SQL, [id, after, limit, maxBytes]);
    return { chunks: rows.map((row) => ({ seq: Number(row.seq), chunk: row.chunk, attempt: row.attempt })), more: rows.length > 0 && Number(rows[0]!.n) > rows.length };
  }

  async deleteStream({ id, through }: Args<'deleteStream'>): Promise<number> {
    return (await this.db.query<{ n: number }>(DELETE_STREAM_SQL, [id, through]))[0]?.n ?? 0;
  }

  async peekStream({ id, limit, maxChars }: Args<'peekStream'>): Promise<{ chunks: string[]; total: number }> {
    const [rows, count] = await Promise.all([
      this.db.query<{ chunk: string }>(PEEK_STREAM_SQL, [id, limit, maxChars]),
      this.db.query<{ n: number }>("SELECT COUNT(*) AS n FROM job_stream WHERE job_id = $1 AND chunk <> ''", [id]),
    ]);
    return { chunks: rows.map((row) => row.chunk), total: count[0]?.n ?? 0 };
  }

  async countJobs(endpointId: string): Promise<JobCounts> {
    return tallyJobCounts(await this.db.query<CountRow>(COUNT_JOBS_SQL, [endpointId]));
  }

  async queueStats({ endpointId, now }: Args<'queueStats'>): Promise<QueueStats> {
    const [queued, held] = await Promise.all([
      this.db.query<QueuedRow>(QUEUED_STATS_SQL, [endpointId, now]),
      this.db.query<HeldRow>(HELD_STATS_SQL, [endpointId]),
    ]);
    return toQueueStats(queued[0], held);
  }

  async queueByKey({ endpointId, now, limit }: Args<'queueByKey'>): Promise<QueueByKey> {
    return toQueueByKey(await this.db.query<KeyQueuedRow>(QUEUE_BY_KEY_SQL, [endpointId, now, limit]));
  }

  listJobs({ endpointId, limit }: Args<'listJobs'>): Promise<JobRecord[]> {
    return this.jobs(LIST_JOBS_SQL, [endpointId, limit]);
  }

  async jobStates(ids: string[]): Promise<{ id: string; status: JobStatus; workerId: string | null }[]> {
    const rows = await this.db.query<{ id: string; status: JobStatus; worker_id: string | null }>(
      'SELECT id, status, worker_id FROM jobs WHERE id = ANY($1::text[])',
      [ids],
    );
    return rows.map((row) => ({ id: row.id, status: row.status, workerId: row.worker_id }));
  }

  dueWebhooks({ now, limit, skipKeys }: Args<'dueWebhooks'>): Promise<JobRecord[]> {
    return this.jobs(DUE_WEBHOOKS_SQL, [now, limit, skipKeys ?? []]);
  }

  async markWebhook({ id, attempts, nextAt, attempt }: Args<'markWebhook'>): Promise<void> {
    if (attempt === undefined) {
      await this.db.query('UPDATE jobs SET webhook_attempts = $2, webhook_next_at = $3 WHERE id = $1', [id, attempts, nextAt]);
      return;
    }
    const { retries, attempt: n, at, httpStatus, error } = attempt;
    await this.db.query(RECORD_ATTEMPT_SQL, [id, attempts, nextAt, retries, n, at, httpStatus, error]);
  }

  async redeliverWebhook({ id, now }: Args<'redeliverWebhook'>): Promise<boolean> {
    const rows = await this.db.query(
      `UPDATE jobs SET webhook_next_at = $1 WHERE id = $2 AND webhook IS NOT NULL AND webhook_next_at IS NULL AND status IN ${TERMINAL_STATUS_LIST} RETURNING 1`,
      [now, id],
    );
    return rows.length === 1;
  }

  listWebhookAttempts(id: string): Promise<WebhookAttempt[]> {
    return this.db.query<{ retries: number; attempt: number; at: number; httpStatus: number | null; error: string | null }>(LIST_ATTEMPTS_SQL, [id]);
  }
}
