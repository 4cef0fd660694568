import type { JobStatus } from '../../model/job-states.js';
import { textOf, type JsonTextOrBytes } from '../../model/json.js';
import type { JobCounts, JobRecord, JobWithInput, PurgedJob, QueueByKey, QueueStats } from '../../model/records.js';
import { COL, IDEMPOTENCY_COLUMNS, JOB_COLUMN_COUNT, JOB_COLUMNS, PURGED_COLUMNS, toJob, toPurgedJob, type PurgedRow } from '../job-columns.js';
import { tallyJobCounts, toQueueByKey, toQueueStats, type CountRow, type HeldRow, type KeyQueuedRow, type QueuedRow } from '../job-counts.js';
import { fairPlace, finishedColumns, LIVE_STATUS_LIST, requeuedColumns, RETRYABLE_STATUS_LIST, TERMINAL_STATUS_LIST } from '../job-sql.js';
import { WEBHOOK_ATTEMPTS_KEPT, type IdempotentJob, type JobStore, type StreamChunk, type WebhookAttempt } from '../store.js';
import { placeholders, type SqliteConnection } from './connection.js';
import { INPUT_IN_FILE, type InputFiles } from './input-files.js';

type Args<M extends keyof JobStore> = Parameters<JobStore[M]>[0];

/** The columns a job gets when it reaches a terminal state (bind `now`). */
const FINISH = finishedColumns('@now');
/** Where claimJobs' RETURNING puts the rowid and the queue place (fair_at), after the job columns. */
const ROWID = JOB_COLUMN_COUNT;
const FAIR_AT = JOB_COLUMN_COUNT + 1;
/** The queue place of an inserted job: fairParams bound after its columns. */
const INSERT_FAIR_AT = fairPlace('sqlite', '?', '?', '?');

// Every statement is built once, here: a template literal is a new string at every call, and
// the statement cache then hashes its whole text again (~1 µs of a ~7 µs read).

/** Every column from the record: the job's state is decided by the caller (src/jobs/transitions.ts). */
const INSERT_JOB_SQL = `INSERT INTO jobs (${JOB_COLUMNS}, fair_at) VALUES (${placeholders(JOB_COLUMN_COUNT)}, ${INSERT_FAIR_AT})`;
const GET_JOB_SQL = `SELECT ${JOB_COLUMNS} FROM jobs WHERE id = ?`;
// A job's input lives in job_inputs (migration 0020): written once here, read only where shown.
const INSERT_INPUT_SQL = 'INSERT INTO job_inputs (job_id, input_json) VALUES (?, ?)';
const GET_INPUT_SQL = 'SELECT input_json FROM job_inputs WHERE job_id = ?';
// A large input is in a file (input-files.ts); its row holds INPUT_IN_FILE.
const INPUT_IN_FILE_SQL = `SELECT 1 FROM job_inputs WHERE job_id = ? AND input_json = '${INPUT_IN_FILE}'`;
const DELETE_JOB_SQL = 'DELETE FROM jobs WHERE id = ?';
const FIND_IDEMPOTENT_SQL = `SELECT ${JOB_COLUMNS}, request_digest FROM jobs WHERE idempotency_key = ?`;
const INSERT_JOB_ONCE_SQL = `INSERT INTO jobs (${JOB_COLUMNS}, ${IDEMPOTENCY_COLUMNS.join(', ')}, fair_at)
   VALUES (${placeholders(JOB_COLUMN_COUNT + 2)}, ${INSERT_FAIR_AT})
   ON CONFLICT (idempotency_key) WHERE idempotency_key IS NOT NULL DO NOTHING`;
// Queue order is fair_at (fairPlace), then insertion. The unary + keeps the planner on
// jobs_claim (queue order) instead of jobs_deadline.
const CLAIM_JOBS_SQL = `UPDATE jobs SET status = 'IN_PROGRESS', worker_id = @workerId, started_at = @now,
             attempts = attempts + 1, deadline_at = @now + execution_timeout_ms, output_json = NULL, error = NULL
           WHERE id IN (SELECT id FROM jobs WHERE endpoint_id = @endpointId AND status = 'IN_QUEUE'
             AND +deadline_at > @now ORDER BY fair_at, rowid LIMIT @limit)
           RETURNING ${JOB_COLUMNS}, rowid, fair_at`;
const FINISH_JOB_SQL = `UPDATE jobs SET status = @status, output_json = @outputJson, error = @error, ${FINISH}
   WHERE id = @id AND status = 'IN_PROGRESS' AND worker_id = @workerId
     AND (@endpointId IS NULL OR endpoint_id = @endpointId) RETURNING ${JOB_COLUMNS}`;
const SET_PROGRESS_SQL = `UPDATE jobs SET output_json = @outputJson
   WHERE id = @id AND status = 'IN_PROGRESS' AND worker_id = @workerId
     AND (@endpointId IS NULL OR endpoint_id = @endpointId)`;
const CANCEL_JOB_SQL = `UPDATE jobs SET status = 'CANCELLED', ${FINISH}
   WHERE id = @id AND status IN ${LIVE_STATUS_LIST} RETURNING ${JOB_COLUMNS}`;
// A purge goes in batches of @limit jobs, each its own commit followed by a checkpoint step, so a
// queue of any length never makes one long transaction or one large WAL (the inputs, in
// job_inputs, are not rewritten); jobs that entered the queue after the purge began are left
// alone, so a steady stream of submissions cannot keep it going.
const PURGE_QUEUE_SQL = `UPDATE jobs SET status = 'CANCELLED', ${FINISH}
   WHERE id IN (SELECT id FROM jobs WHERE endpoint_id = @endpointId AND status = 'IN_QUEUE' AND queued_at <= @now
       ORDER BY queued_at, rowid LIMIT @limit)
   RETURNING ${PURGED_COLUMNS}`;
const RETRY_JOB_SQL = `UPDATE jobs SET status = 'IN_QUEUE', output_json = NULL, error = NULL, worker_id = NULL,
     started_at = NULL, finished_at = NULL, expires_at = NULL, webhook_attempts = 0,
     webhook_next_at = NULL, attempts = 0, retries = retries + 1, queued_at = @now, stream_bytes = 0, stream_cut = 0,
     deadline_at = @now + ttl_ms, fair_at = ${fairPlace('sqlite', 'jobs.endpoint_id', 'jobs.key_id', '@now')}
   WHERE id = @id AND status IN ${RETRYABLE_STATUS_LIST} AND expires_at > @now RETURNING ${JOB_COLUMNS}`;
const TIME_OUT_SQL = `UPDATE jobs SET status = 'TIMED_OUT', error = @error, ${FINISH}
   WHERE id IN (SELECT id FROM jobs WHERE status = @from AND deadline_at <= @now
     ORDER BY deadline_at LIMIT @limit) RETURNING ${JOB_COLUMNS}`;
// The jobs a requeue touches: IN_PROGRESS, held by one of @workers, among @ids when given.
const REQUEUE_WHERE = `status = 'IN_PROGRESS' AND worker_id IN (SELECT value FROM json_each(@workers))
     AND (@ids IS NULL OR id IN (SELECT value FROM json_each(@ids)))`;
// Run first: a counted hand-out at maxAttempts ends the job instead of requeueing it.
const REQUEUE_FAILED_SQL = `UPDATE jobs SET status = 'FAILED', error = REPLACE(@error, '{attempts}', attempts), ${FINISH}
   WHERE ${REQUEUE_WHERE} AND @counted = 1 AND attempts >= max_attempts RETURNING ${JOB_COLUMNS}`;
const REQUEUE_SQL = `UPDATE jobs SET ${requeuedColumns('@counted = 1', '@preempted = 1')} WHERE ${REQUEUE_WHERE} RETURNING ${JOB_COLUMNS}`;
// The abandoned run's undelivered chunks of the requeued jobs (@ids: their ids as JSON).
const DROP_RUN_STREAM_SQL = 'DELETE FROM job_stream WHERE job_id IN (SELECT value FROM json_each(?))';
const DELETE_EXPIRED_SQL = `DELETE FROM jobs WHERE id IN (SELECT id FROM jobs WHERE expires_at <= @now
     AND webhook_next_at IS NULL AND status IN ${TERMINAL_STATUS_LIST} ORDER BY expires_at LIMIT @limit)`;
const SHORTEN_RETENTION_SQL = `UPDATE jobs SET retention_ms = MIN(retention_ms, @ttlMs),
     expires_at = CASE WHEN finished_at IS NULL THEN expires_at
       WHEN expires_at IS NULL THEN finished_at + @ttlMs
       ELSE MIN(expires_at, finished_at + @ttlMs) END
   WHERE id = @id`;
// The job a worker posts for: IN_PROGRESS, held by it, of its endpoint.
const HELD_WHERE = `id = @id AND status = 'IN_PROGRESS' AND worker_id = @workerId AND (@endpointId IS NULL OR endpoint_id = @endpointId)`;
// The run a chunk belongs to: the runs the job has begun, attempts + preemptions (docs/api.md).
const RUN = 'attempts + preemptions AS run';
// Counts the chunks in (bytes, seqs) when they fit under the cap and the run's stream is not cut.
const APPEND_COUNT_SQL = `UPDATE jobs SET stream_bytes = stream_bytes + @bytes, stream_seq = stream_seq + @n
   WHERE ${HELD_WHERE} AND stream_cut < attempts AND stream_bytes + @bytes <= @maxBytes RETURNING stream_seq, ${RUN}`;
// The cap refused a post of a run not yet cut: cut it, with a marker chunk at the next seq.
const CUT_STREAM_SQL = `UPDATE jobs SET stream_cut = attempts, stream_seq = stream_seq + 1
   WHERE ${HELD_WHERE} AND stream_cut < attempts RETURNING stream_seq, ${RUN}`;
const HELD_SQL = `SELECT 1 FROM jobs WHERE ${HELD_WHERE}`;
// Each chunk carries the run that posted it (RUN).
const INSERT_CHUNK_SQL = 'INSERT INTO job_stream (job_id, seq, chunk, attempt) VALUES (?, ?, ?, ?)';
// A page: at most @limit chunks after @after, none once @maxBytes are read (the first always
// comes); n counts the chunks looked at (up to @limit + 1), so n > the page's length means more.
const READ_STREAM_SQL = `SELECT seq, chunk, attempt, n FROM (
     SELECT seq, chunk, attempt, SUM(octet_length(chunk)) OVER (ORDER BY seq) - octet_length(chunk) AS before, COUNT(*) OVER () AS n
     FROM (SELECT seq, chunk, attempt FROM job_stream WHERE job_id = @id AND seq > @after ORDER BY seq LIMIT @limit + 1))
   WHERE before < @maxBytes ORDER BY seq LIMIT @limit`;
const DELETE_STREAM_SQL = 'DELETE FROM job_stream WHERE job_id = ? AND seq <= ? RETURNING octet_length(chunk) AS bytes';
const UNCOUNT_STREAM_SQL = 'UPDATE jobs SET stream_bytes = MAX(0, stream_bytes - ?) WHERE id = ?';
const COUNT_JOBS_SQL = `SELECT status, COUNT(*) AS n, SUM(retries > 0) AS retried, SUM(attempts > 1) AS reattempted
   FROM jobs WHERE endpoint_id = ? GROUP BY status`;
// The unary + keeps the planner on jobs_claim, as in claimJobs.
const QUEUED_STATS_SQL = `SELECT COUNT(*) AS n, COALESCE(SUM(low_priority = 0), 0) AS normal, COALESCE(SUM(input_bytes), 0) AS bytes,
     MIN(CASE WHEN low_priority = 0 THEN queued_at END) AS oldest
   FROM jobs WHERE endpoint_id = ? AND status = 'IN_QUEUE' AND +deadline_at > ?`;
// Grouped on the key as jobs_fair indexes it; the window sums give the totals over every key
// before LIMIT keeps the largest.
const QUEUE_BY_KEY_SQL = `SELECT key, n, bytes, SUM(n) OVER () AS total_n, SUM(bytes) OVER () AS total_bytes FROM (
     SELECT COALESCE(key_id, '') AS key, COUNT(*) AS n, COALESCE(SUM(input_bytes), 0) AS bytes
     FROM jobs WHERE endpoint_id = ? AND status = 'IN_QUEUE' AND +deadline_at > ? GROUP BY COALESCE(key_id, ''))
   ORDER BY n DESC, key LIMIT ?`;
const HELD_STATS_SQL = `SELECT worker_id, COUNT(*) AS n, MAX(started_at) AS since FROM jobs
   WHERE endpoint_id = ? AND status = 'IN_PROGRESS' GROUP BY worker_id`;
const LIST_JOBS_SQL = `SELECT ${JOB_COLUMNS} FROM jobs WHERE endpoint_id = ? ORDER BY created_at DESC, rowid DESC LIMIT ?`;
const DUE_WEBHOOKS_SQL = `SELECT ${JOB_COLUMNS} FROM jobs WHERE webhook_next_at <= ? AND status IN ${TERMINAL_STATUS_LIST}
   ORDER BY webhook_next_at, rowid LIMIT ?`;
const DUE_WEBHOOKS_SKIPPING_SQL = `SELECT ${JOB_COLUMNS} FROM jobs WHERE webhook_next_at <= ? AND status IN ${TERMINAL_STATUS_LIST}
   AND COALESCE(key_id, '') NOT IN (SELECT value FROM json_each(?)) ORDER BY webhook_next_at, rowid LIMIT ?`;
// The running total stops the read at maxChars, so a long stream of large chunks is not all read.
// Markers ('') of a cut stream are not chunks: left out.
const PEEK_STREAM_SQL = `SELECT chunk FROM (SELECT seq, chunk, SUM(length(chunk)) OVER (ORDER BY seq) - length(chunk) AS before
     FROM job_stream WHERE job_id = @id AND chunk <> '' ORDER BY seq LIMIT @limit) WHERE before < @maxChars ORDER BY seq`;
const COUNT_STREAM_SQL = "SELECT COUNT(*) AS n FROM job_stream WHERE job_id = ? AND chunk <> ''";
const MARK_WEBHOOK_SQL = 'UPDATE jobs SET webhook_attempts = ?, webhook_next_at = ? WHERE id = ?';
const INSERT_ATTEMPT_SQL = `INSERT INTO webhook_attempts (job_id, seq, retries, attempt, at, http_status, error)
   VALUES (@id, COALESCE((SELECT MAX(seq) FROM webhook_attempts WHERE job_id = @id), 0) + 1, @retries, @attempt, @at, @httpStatus, @error)`;
// Keeps the job's newest WEBHOOK_ATTEMPTS_KEPT records.
const PRUNE_ATTEMPTS_SQL = `DELETE FROM webhook_attempts WHERE job_id = @id AND seq <= COALESCE(
     (SELECT seq FROM webhook_attempts WHERE job_id = @id ORDER BY seq DESC LIMIT 1 OFFSET @kept), 0)`;
const LIST_ATTEMPTS_SQL = `SELECT retries, attempt, at, http_status AS httpStatus, error FROM webhook_attempts
   WHERE job_id = ? ORDER BY seq`;

/** What counting an append (or a cut) returns: the stream's last seq and the run posting. */
interface StreamCount {
  stream_seq: number;
  run: number;
}

/**
 * A job's parameters in column order (INSERT_JOB_SQL), booleans as 0/1: every field, as given.
 * Filled by name, so it follows the column order of job-columns.ts.
 */
function jobParams(job: JobRecord): unknown[] {
  const v = new Array<unknown>(JOB_COLUMN_COUNT);
  v[COL.id] = job.id;
  v[COL.endpointId] = job.endpointId;
  v[COL.status] = job.status;
  v[COL.outputJson] = job.outputJson;
  v[COL.error] = job.error;
  v[COL.webhook] = job.webhook;
  v[COL.s3Config] = job.s3Config;
  v[COL.executionTimeoutMs] = job.executionTimeoutMs;
  v[COL.lowPriority] = job.lowPriority ? 1 : 0;
  v[COL.ttlMs] = job.ttlMs;
  v[COL.retentionMs] = job.retentionMs;
  v[COL.maxAttempts] = job.maxAttempts;
  v[COL.sync] = job.sync ? 1 : 0;
  v[COL.keyId] = job.keyId;
  v[COL.createdAt] = job.createdAt;
  v[COL.queuedAt] = job.queuedAt;
  v[COL.startedAt] = job.startedAt;
  v[COL.finishedAt] = job.finishedAt;
  v[COL.deadlineAt] = job.deadlineAt;
  v[COL.expiresAt] = job.expiresAt;
  v[COL.workerId] = job.workerId;
  v[COL.attempts] = job.attempts;
  v[COL.retries] = job.retries;
  v[COL.webhookAttempts] = job.webhookAttempts;
  v[COL.webhookNextAt] = job.webhookNextAt;
  v[COL.inputBytes] = job.inputBytes;
  v[COL.preemptions] = job.preemptions;
  v[COL.traceparent] = job.traceparent;
  return v;
}

/** The parameters of INSERT_FAIR_AT, in the order of its placeholders. */
function fairParams(job: JobRecord): unknown[] {
  return [job.endpointId, job.keyId, job.endpointId, job.queuedAt, job.queuedAt];
}

/** Restores queue order (fair_at, then rowid) among claimed rows: RETURNING has no set order. */
function byQueueOrder(a: unknown[], b: unknown[]): number {
  return (a[FAIR_AT] as number) - (b[FAIR_AT] as number) || (a[ROWID] as number) - (b[ROWID] as number);
}

/**
 * The jobs table (and job_stream) on SQLite. Job rows are read in raw (array) mode and mapped
 * by toJob; every write goes through the connection's group commit, and writes of several
 * statements run as one db.transaction (a savepoint inside the turn's transaction).
 */
export class SqliteJobStore implements JobStore {
  /** `inputs`: where large inputs go (input-files.ts); without it every input is in the table. */
  constructor(
    private readonly c: SqliteConnection,
    private readonly inputs?: InputFiles,
  ) {}

  /** A job query in raw (array) mode; its SQL selects or returns JOB_COLUMNS first. */
  private jq(sql: string) {
    return this.c.q(sql).raw(true);
  }

  private oneJob(sql: string, params: unknown): JobRecord | undefined {
    const row = this.jq(sql).get(params) as unknown[] | undefined;
    return row === undefined ? undefined : toJob(row);
  }

  private jobs(sql: string, ...params: unknown[]): JobRecord[] {
    return (this.jq(sql).all(...params) as unknown[][]).map(toJob);
  }

  insertJob({ job, inputJson }: Args<'insertJob'>): Promise<void> {
    if (this.inputs?.wanted(job.id, inputJson)) return this.withInputFile(this.inputs, job.id, inputJson, () => this.insertJob({ job, inputJson: INPUT_IN_FILE }), () => true);
    return this.c.write(() => {
      // Positional, filled by name (no object): binding 26 named parameters took ~2 µs more a job.
      this.c.q(INSERT_JOB_SQL).run(...jobParams(job), ...fairParams(job));
      // All or nothing without a savepoint (SAVEPOINT and RELEASE cost ~10 µs a submission, as
      // much as the two inserts): an input that cannot be written takes its job row back out.
      try {
        this.c.q(INSERT_INPUT_SQL).run(job.id, textOf(inputJson));
      } catch (err) {
        this.c.q(DELETE_JOB_SQL).run(job.id);
        throw err;
      }
    });
  }

  getJob(id: string): Promise<JobRecord | undefined> {
    return this.c.read(() => this.oneJob(GET_JOB_SQL, id));
  }

  getJobInput(id: string): Promise<string | undefined> {
    return this.c.read(() => this.inputOf(id)).then((text) => (text === INPUT_IN_FILE && this.inputs ? this.inputs.read(id).then((bytes) => bytes.toString('utf8')) : text));
  }

  /**
   * Writes a large input's file, then inserts the rows (`insert`, whose row holds INPUT_IN_FILE);
   * the file is deleted at once when the insert fails or (`kept`) made no job.
   */
  private async withInputFile<T>(inputs: InputFiles, id: string, inputJson: JsonTextOrBytes, insert: () => Promise<T>, kept: (result: T) => boolean): Promise<T> {
    await inputs.write(id, inputJson);
    let keep = false;
    try {
      const result = await insert();
      keep = kept(result);
      return result;
    } finally {
      await inputs.settled(id, keep);
    }
  }

  /**
   * Reads from their files the inputs of `jobs` kept there (the claim's, after its commit), as
   * bytes: job-take writes them out as they are, and `inputJson` is decoded only if read.
   */
  private async withFileInputs(inputs: InputFiles, jobs: JobWithInput[]): Promise<JobWithInput[]> {
    await Promise.all(jobs.map(async (job) => {
      if (job.inputJson !== INPUT_IN_FILE) return;
      const bytes = await inputs.read(job.id);
      let text: string | undefined;
      job.inputUtf8 = bytes;
      Object.defineProperty(job, 'inputJson', { enumerable: true, configurable: true, get: () => (text ??= bytes.toString('utf8')) });
    }));
    return jobs;
  }

  /** Deletes the input files whose job is gone (sweep of input-files.ts); the count deleted. */
  sweepInputFiles(): Promise<number> {
    if (!this.inputs) return Promise.resolve(0);
    return this.inputs.sweep((id) => this.c.q(INPUT_IN_FILE_SQL).get(id) !== undefined);
  }

  private inputOf(id: string): string | undefined {
    return (this.c.q(GET_INPUT_SQL).pluck(true).get(id) as string | undefined);
  }

  findIdempotentJob(keyDigest: string): Promise<IdempotentJob | undefined> {
    return this.c.read(() => this.idempotentJob(keyDigest));
  }

  /** Looks the key up and inserts in one write: nothing else writes between the two. */
  insertJobOnce({ job, inputJson, keyDigest, requestDigest }: Args<'insertJobOnce'>): Promise<{ created: true } | { created: false; existing: IdempotentJob }> {
    if (this.inputs?.wanted(job.id, inputJson)) {
      const insert = () => this.insertJobOnce({ job, inputJson: INPUT_IN_FILE, keyDigest, requestDigest });
      return this.withInputFile(this.inputs, job.id, inputJson, insert, (outcome) => outcome.created);
    }
    return this.c.write(
      this.c.db.transaction(() => {
        const held = this.idempotentJob(keyDigest);
        if (held) return { created: false as const, existing: held };
        this.c.q(INSERT_JOB_ONCE_SQL).run(...jobParams(job), keyDigest, requestDigest, ...fairParams(job));
        this.c.q(INSERT_INPUT_SQL).run(job.id, textOf(inputJson));
        return { created: true as const };
      }),
    );
  }

  private idempotentJob(keyDigest: string): IdempotentJob | undefined {
    const row = this.jq(FIND_IDEMPOTENT_SQL).get(keyDigest) as unknown[] | undefined;
    return row === undefined ? undefined : { job: toJob(row), requestDigest: row[JOB_COLUMN_COUNT] as string };
  }

  claimJobs({ endpointId, workerId, limit, now }: Args<'claimJobs'>): Promise<JobWithInput[]> {
    return this.claimJobsFor({ endpointId, takers: [{ workerId, limit }], now });
  }

  /**
   * One claim statement per taker, all in one write (one commit); stops when the queue runs
   * short. The claim rewrites the jobs rows only; each input is read from job_inputs, not rewritten.
   */
  claimJobsFor({ endpointId, takers, now }: Args<'claimJobsFor'>): Promise<JobWithInput[]> {
    let inFiles = false;
    const claimed = this.c.write(() => {
      const claimed: JobWithInput[] = [];
      for (const { workerId, limit } of takers) {
        if (limit <= 0) continue;
        const rows = (this.jq(CLAIM_JOBS_SQL).all({ endpointId, workerId, now, limit }) as unknown[][]).sort(byQueueOrder);
        for (const row of rows) {
          const job = toJob(row) as JobWithInput;
          // Written with the job in one transaction: a claimed job has its input.
          job.inputJson = this.inputOf(job.id)!;
          if (job.inputJson === INPUT_IN_FILE) inFiles = true;
          claimed.push(job);
        }
        if (rows.length < limit) break;
      }
      return claimed;
    });
    return inFiles && this.inputs ? claimed.then((jobs) => this.withFileInputs(this.inputs!, jobs)) : claimed;
  }

  finishJob({ id, workerId, endpointId, status, outputJson, error, now }: Args<'finishJob'>): Promise<JobRecord | undefined> {
    return this.c.write(() =>
      this.oneJob(FINISH_JOB_SQL, { id, workerId, endpointId: endpointId ?? null, status, outputJson, error, now }),
    );
  }

  setProgress({ id, workerId, endpointId, outputJson }: Args<'setProgress'>): Promise<boolean> {
    return this.c.write(
      () => this.c.q(SET_PROGRESS_SQL).run({ id, workerId, endpointId: endpointId ?? null, outputJson }).changes === 1,
    );
  }

  cancelJob({ id, now }: Args<'cancelJob'>): Promise<JobRecord | undefined> {
    return this.c.write(() => this.oneJob(CANCEL_JOB_SQL, { id, now }));
  }

  async purgeQueue({ endpointId, now, limit }: Args<'purgeQueue'>): Promise<PurgedJob[]> {
    const rows = await this.c.write(() => this.c.q(PURGE_QUEUE_SQL).all({ endpointId, now, limit }) as PurgedRow[]);
    if (rows.length === 0) return [];
    // The WAL starts over only once the checkpointer has copied it: one step before the next batch.
    await this.c.checkpointNow();
    return rows.map(toPurgedJob);
  }

  /** Passes the count of deleted rows through, telling the free-page reclaimer when rows went (a large input leaves many free pages). */
  private freed(deleted: number): number {
    if (deleted > 0) this.c.pagesFreed();
    return deleted;
  }

  retryJob({ id, now }: Args<'retryJob'>): Promise<JobRecord | undefined> {
    return this.c.write(
      this.c.db.transaction(() => {
        const job = this.oneJob(RETRY_JOB_SQL, { id, now });
        if (job) this.c.q('DELETE FROM job_stream WHERE job_id = ?').run(id);
        return job;
      }),
    );
  }

  timeOutRunning({ now, limit }: Args<'timeOutRunning'>): Promise<JobRecord[]> {
    return this.c.write(() => this.timeOutPastDeadline('IN_PROGRESS', 'execution timeout exceeded', now, limit));
  }

  expireQueued({ now, limit }: Args<'expireQueued'>): Promise<JobRecord[]> {
    return this.c.write(() => this.timeOutPastDeadline('IN_QUEUE', 'ttl expired in queue', now, limit));
  }

  /** Live jobs in `from` whose deadline has passed → TIMED_OUT with `error`, up to `limit`. */
  private timeOutPastDeadline(from: 'IN_QUEUE' | 'IN_PROGRESS', error: string, now: number, limit: number): JobRecord[] {
    return this.jobs(TIME_OUT_SQL, { from, error, now, limit });
  }

  requeueJobs({ workerIds, ids, counted, preempted, error, now }: Args<'requeueJobs'>): Promise<{ requeued: JobRecord[]; failed: JobRecord[] }> {
    return this.c.write(
      this.c.db.transaction(() => {
        const params = { workers: JSON.stringify(workerIds), ids: ids === undefined ? null : JSON.stringify(ids), counted: counted ? 1 : 0, preempted: preempted === true ? 1 : 0, error, now };
        const failed = this.jobs(REQUEUE_FAILED_SQL, params);
        const requeued = this.jobs(REQUEUE_SQL, params);
        if (requeued.length > 0) this.c.q(DROP_RUN_STREAM_SQL).run(JSON.stringify(requeued.map((job) => job.id)));
        return { requeued, failed };
      }),
    );
  }

  deleteExpired({ now, limit }: Args<'deleteExpired'>): Promise<number> {
    return this.c.write(() => this.freed(this.c.q(DELETE_EXPIRED_SQL).run({ now, limit }).changes));
  }

  shortenRetention({ id, ttlMs }: Args<'shortenRetention'>): Promise<void> {
    return this.c.write(() => {
      this.c.q(SHORTEN_RETENTION_SQL).run({ id, ttlMs });
    });
  }

  appendStream({ id, workerId, endpointId, chunks, bytes, maxBytes }: Args<'appendStream'>): Promise<'appended' | 'not-held' | 'full'> {
    return this.c.write(
      this.c.db.transaction(() => {
        const held = { id, workerId, endpointId: endpointId ?? null };
        const counted = this.c.q(APPEND_COUNT_SQL).get({ ...held, bytes, n: chunks.length, maxBytes }) as StreamCount | undefined;
        const insert = this.c.q(INSERT_CHUNK_SQL);
        if (counted) {
          let seq = counted.stream_seq - chunks.length;
          for (const chunk of chunks) insert.run(id, ++seq, chunk, counted.run);
          return 'appended';
        }
        if (this.c.q(HELD_SQL).get(held) === undefined) return 'not-held';
        const cut = this.c.q(CUT_STREAM_SQL).get(held) as StreamCount | undefined;
        if (cut) insert.run(id, cut.stream_seq, '', cut.run);
        return 'full';
      }),
    );
  }

  readStream({ id, after, limit, maxBytes }: Args<'readStream'>): Promise<{ chunks: StreamChunk[]; more: boolean }> {
    return this.c.read(() => {
      const rows = this.c.q(READ_STREAM_SQL).all({ id, after, limit, maxBytes }) as (StreamChunk & { n: number })[];
      return { chunks: rows.map((row) => ({ seq: row.seq, chunk: row.chunk, attempt: row.attempt })), more: rows.length > 0 && rows[0]!.n > rows.length };
    });
  }

  deleteStream({ id, through }: Args<'deleteStream'>): Promise<number> {
    return this.c.write(
      this.c.db.transaction(() => {
        const deleted = this.c.q(DELETE_STREAM_SQL).all(id, through) as { bytes: number }[];
        let bytes = 0;
        for (const row of deleted) bytes += row.bytes;
        if (bytes > 0) this.c.q(UNCOUNT_STREAM_SQL).run(bytes, id);
        return this.freed(deleted.length);
      }),
    );
  }

  peekStream({ id, limit, maxChars }: Args<'peekStream'>): Promise<{ chunks: string[]; total: number }> {
    return this.c.read(() => ({
      chunks: (this.c.q(PEEK_STREAM_SQL).all({ id, limit, maxChars }) as { chunk: string }[]).map((row) => row.chunk),
      total: (this.c.q(COUNT_STREAM_SQL).get(id) as { n: number }).n,
    }));
  }

  countJobs(endpointId: string): Promise<JobCounts> {
    return this.c.read(() =>
      tallyJobCounts(this.c.q(COUNT_JOBS_SQL).all(endpointId) as CountRow[]),
    );
  }

  queueStats({ endpointId, now }: Args<'queueStats'>): Promise<QueueStats> {
    return this.c.read(() =>
      toQueueStats(
        this.c.q(QUEUED_STATS_SQL).get(endpointId, now) as QueuedRow,
        this.c.q(HELD_STATS_SQL).all(endpointId) as HeldRow[],
      ),
    );
  }

  queueByKey({ endpointId, now, limit }: Args<'queueByKey'>): Promise<QueueByKey> {
    return this.c.read(() => toQueueByKey(this.c.q(QUEUE_BY_KEY_SQL).all(endpointId, now, limit) as KeyQueuedRow[]));
  }

  listJobs({ endpointId, limit }: Args<'listJobs'>): Promise<JobRecord[]> {
    return this.c.read(() => this.jobs(LIST_JOBS_SQL, endpointId, limit));
  }

  jobStates(ids: string[]): Promise<{ id: string; status: JobStatus; workerId: string | null }[]> {
    return this.c.read(() =>
      (
        this.c.q('SELECT id, status, worker_id FROM jobs WHERE id IN (SELECT value FROM json_each(?))').all(JSON.stringify(ids)) as {
          id: string;
          status: JobStatus;
          worker_id: string | null;
        }[]
      ).map((row) => ({ id: row.id, status: row.status, workerId: row.worker_id })),
    );
  }

  dueWebhooks({ now, limit, skipKeys }: Args<'dueWebhooks'>): Promise<JobRecord[]> {
    return this.c.read(() =>
      skipKeys === undefined || skipKeys.length === 0
        ? this.jobs(DUE_WEBHOOKS_SQL, now, limit)
        : this.jobs(DUE_WEBHOOKS_SKIPPING_SQL, now, JSON.stringify(skipKeys), limit),
    );
  }

  markWebhook({ id, attempts, nextAt, attempt }: Args<'markWebhook'>): Promise<void> {
    if (attempt === undefined) {
      return this.c.write(() => {
        this.c.q(MARK_WEBHOOK_SQL).run(attempts, nextAt, id);
      });
    }
    return this.c.write(
      this.c.db.transaction(() => {
        // A job deleted meanwhile has no row to hang the record on.
        if (this.c.q(MARK_WEBHOOK_SQL).run(attempts, nextAt, id).changes === 0) return;
        this.c.q(INSERT_ATTEMPT_SQL).run({ id, ...attempt });
        this.c.q(PRUNE_ATTEMPTS_SQL).run({ id, kept: WEBHOOK_ATTEMPTS_KEPT });
      }),
    );
  }

  redeliverWebhook({ id, now }: Args<'redeliverWebhook'>): Promise<boolean> {
    return this.c.write(
      () =>
        this.c.q(`UPDATE jobs SET webhook_next_at = ? WHERE id = ? AND webhook IS NOT NULL AND webhook_next_at IS NULL AND status IN ${TERMINAL_STATUS_LIST}`).run(now, id).changes === 1,
    );
  }

  listWebhookAttempts(id: string): Promise<WebhookAttempt[]> {
    return this.c.read(() => this.c.q(LIST_ATTEMPTS_SQL).all(id) as WebhookAttempt[]);
  }
}
