import type { JobRecord, PurgedJob } from '../model/records.js';

/** A job column's PostgreSQL type: the element type of its array in the batched insert (unnest). */
export type JobColumnPgType = 'text' | 'int' | 'bigint' | 'boolean';

/**
 * The one definition of the jobs table's columns, for both backends: JobRecord field →
 * [column, PostgreSQL type], in the order every job query selects them. `satisfies` makes the
 * compiler refuse a field of JobRecord left out or a field that does not exist.
 */
const JOB_COLUMN_TABLE = {
  id: ['id', 'text'],
  endpointId: ['endpoint_id', 'text'],
  status: ['status', 'text'],
  outputJson: ['output_json', 'text'],
  error: ['error', 'text'],
  webhook: ['webhook', 'text'],
  s3Config: ['s3_config', 'text'],
  executionTimeoutMs: ['execution_timeout_ms', 'bigint'],
  lowPriority: ['low_priority', 'boolean'],
  ttlMs: ['ttl_ms', 'bigint'],
  retentionMs: ['retention_ms', 'bigint'],
  maxAttempts: ['max_attempts', 'int'],
  sync: ['sync', 'boolean'],
  keyId: ['key_id', 'text'],
  createdAt: ['created_at', 'bigint'],
  queuedAt: ['queued_at', 'bigint'],
  startedAt: ['started_at', 'bigint'],
  finishedAt: ['finished_at', 'bigint'],
  deadlineAt: ['deadline_at', 'bigint'],
  expiresAt: ['expires_at', 'bigint'],
  workerId: ['worker_id', 'text'],
  attempts: ['attempts', 'int'],
  retries: ['retries', 'int'],
  webhookAttempts: ['webhook_attempts', 'int'],
  webhookNextAt: ['webhook_next_at', 'bigint'],
  inputBytes: ['input_bytes', 'bigint'],
  preemptions: ['preemptions', 'int'],
  traceparent: ['traceparent', 'text'],
} as const satisfies { readonly [F in keyof JobRecord]: readonly [string, JobColumnPgType] };

const FIELDS = Object.keys(JOB_COLUMN_TABLE) as (keyof JobRecord)[];

/**
 * Columns of the jobs table after the job columns that no JobRecord carries: the stream buffer's
 * bookkeeping (migration 0009), read and written only by the stream's own statements, so a job
 * read costs no more for them. SQLite also keeps `stream_seq` (PostgreSQL's chunk seqs are an
 * identity column).
 */
export const JOB_STREAM_COLUMNS = { sqlite: ['stream_bytes', 'stream_seq', 'stream_cut'], postgres: ['stream_bytes', 'stream_cut'] } as const;

/**
 * Where each field's column sits in a job row read in array mode: `row[COL.queuedAt]`. Frozen
 * and module-constant, so V8 folds `COL.x` to a number: reading by name costs what `row[16]` did.
 */
export const COL: { readonly [F in keyof JobRecord]: number } = Object.freeze(
  Object.fromEntries(FIELDS.map((field, index) => [field, index])) as { [F in keyof JobRecord]: number },
);

/**
 * How many columns a job row has. A query that selects more after them (SQLite's rowid,
 * PostgreSQL's seq, a flag) finds the first extra one at this index.
 */
export const JOB_COLUMN_COUNT = FIELDS.length;

/** The PostgreSQL type of each job column, in column order. */
export const JOB_COLUMN_PG_TYPES: readonly JobColumnPgType[] = FIELDS.map((field) => JOB_COLUMN_TABLE[field][1]);

/**
 * The job columns in order, for SELECT, RETURNING and INSERT lists; qualified with `alias`
 * when given (an UPDATE … FROM whose other relation has columns of the same names).
 *
 * @example jobColumnList('j') // 'j.id, j.endpoint_id, j.status, …'
 */
export function jobColumnList(alias?: string): string {
  const prefix = alias === undefined ? '' : `${alias}.`;
  return FIELDS.map((field) => prefix + JOB_COLUMN_TABLE[field][0]).join(', ');
}

/** `id, endpoint_id, status, …, webhook_next_at`: what every job query selects first. */
export const JOB_COLUMNS = jobColumnList();

/**
 * The jobs table's columns outside JobRecord, after JOB_COLUMNS: a submission's Idempotency-Key
 * digest and its request's digest, written and read only by insertJobOnce and findIdempotentJob.
 */
export const IDEMPOTENCY_COLUMNS = ['idempotency_key', 'request_digest'] as const;

/**
 * A job row read in array mode (its first JOB_COLUMN_COUNT values are the job columns; any
 * after them are ignored) → JobRecord. One straight indexed read per field and no loop: this
 * runs for every job read. Array mode because building a 26-key object per row first made a
 * SQLite primary-key read cost ~11 µs instead of ~6 µs. Booleans arrive as 0/1 (SQLite) or
 * true/false (PostgreSQL); Boolean() reads both.
 */
export function toJob(r: unknown[]): JobRecord {
  return {
    id: r[COL.id] as JobRecord['id'],
    endpointId: r[COL.endpointId] as JobRecord['endpointId'],
    status: r[COL.status] as JobRecord['status'],
    outputJson: r[COL.outputJson] as JobRecord['outputJson'],
    error: r[COL.error] as JobRecord['error'],
    webhook: r[COL.webhook] as JobRecord['webhook'],
    s3Config: r[COL.s3Config] as JobRecord['s3Config'],
    executionTimeoutMs: r[COL.executionTimeoutMs] as JobRecord['executionTimeoutMs'],
    lowPriority: Boolean(r[COL.lowPriority]),
    ttlMs: r[COL.ttlMs] as JobRecord['ttlMs'],
    retentionMs: r[COL.retentionMs] as JobRecord['retentionMs'],
    maxAttempts: r[COL.maxAttempts] as JobRecord['maxAttempts'],
    sync: Boolean(r[COL.sync]),
    keyId: r[COL.keyId] as JobRecord['keyId'],
    createdAt: r[COL.createdAt] as JobRecord['createdAt'],
    queuedAt: r[COL.queuedAt] as JobRecord['queuedAt'],
    startedAt: r[COL.startedAt] as JobRecord['startedAt'],
    finishedAt: r[COL.finishedAt] as JobRecord['finishedAt'],
    deadlineAt: r[COL.deadlineAt] as JobRecord['deadlineAt'],
    expiresAt: r[COL.expiresAt] as JobRecord['expiresAt'],
    workerId: r[COL.workerId] as JobRecord['workerId'],
    attempts: r[COL.attempts] as JobRecord['attempts'],
    retries: r[COL.retries] as JobRecord['retries'],
    webhookAttempts: r[COL.webhookAttempts] as JobRecord['webhookAttempts'],
    webhookNextAt: r[COL.webhookNextAt] as JobRecord['webhookNextAt'],
    inputBytes: r[COL.inputBytes] as JobRecord['inputBytes'],
    preemptions: r[COL.preemptions] as JobRecord['preemptions'],
    traceparent: r[COL.traceparent] as JobRecord['traceparent'],
  };
}

/** The columns a purge returns (PurgedJob): the id and what the job's last spans are made from, never the input. */
export const PURGED_COLUMNS = 'id, traceparent, queued_at, attempts, preemptions, retries';

/** A row of PURGED_COLUMNS, as both drivers return it (BIGINT as a number). */
export interface PurgedRow {
  id: string;
  traceparent: string | null;
  queued_at: number;
  attempts: number;
  preemptions: number;
  retries: number;
}

/** @example toPurgedJob({ id: 'j1', traceparent: null, queued_at: 5, attempts: 0, preemptions: 0, retries: 0 }).queuedAt // 5 */
export function toPurgedJob(r: PurgedRow): PurgedJob {
  return { id: r.id, traceparent: r.traceparent, queuedAt: r.queued_at, attempts: r.attempts, preemptions: r.preemptions, retries: r.retries };
}
