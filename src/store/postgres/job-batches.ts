import type { JobRecord } from '../../model/records.js';
import { COL, JOB_COLUMN_COUNT, JOB_COLUMN_PG_TYPES, JOB_COLUMNS, jobColumnList, toJob } from '../job-columns.js';
import { fairPlace, finishedColumns } from '../job-sql.js';
import type { JobStore } from '../store.js';
import { createBatcher, type Batcher } from './batch.js';
import type { PgConnection } from './connection.js';

/** The arguments of one finishJob call. */
export type FinishArgs = Parameters<JobStore['finishJob']>[0];

/** One submission: the job's record and its input (JSON text), written to job_inputs. */
export interface NewJob {
  job: JobRecord;
  inputJson: string;
}

/**
 * The job statements that the calls of one event-loop turn share (batch.ts): a round trip and
 * a commit for many jobs. `flush` sends what is pending and waits for what is in flight.
 */
export interface JobBatches {
  reads: Batcher<string, JobRecord | undefined>;
  inserts: Batcher<NewJob, void>;
  finishes: Batcher<FinishArgs, JobRecord | undefined>;
  flush(): Promise<void>;
}

const GET_JOB_SQL = `SELECT ${JOB_COLUMNS} FROM jobs WHERE id = $1`;
const GET_JOBS_SQL = `SELECT ${JOB_COLUMNS} FROM jobs WHERE id = ANY($1::text[])`;

/**
 * Every column of a batch of jobs, as given, one array a column, and their inputs last (into
 * job_inputs, one statement: the foreign key is checked at its end). WITH ORDINALITY … ORDER BY
 * keeps the call order as the insertion order (seq), so queue order follows call order. The
 * queue place (fair_at, fairPlace) is read before the batch's rows exist: the n-th job of one
 * key and endpoint in the batch goes n - 1 places past it.
 */
const INSERT_JOBS_SQL = `WITH v AS (
    SELECT * FROM unnest(${JOB_COLUMN_PG_TYPES.map((type, i) => `$${i + 1}::${type}[]`).join(', ')}, $${JOB_COLUMN_COUNT + 1}::text[])
      WITH ORDINALITY AS v(${JOB_COLUMNS}, input_json, ord)),
  j AS (INSERT INTO jobs (${JOB_COLUMNS}, fair_at)
    SELECT ${JOB_COLUMNS}, ${fairPlace('postgres', 'v.endpoint_id', 'v.key_id', 'v.queued_at')}
        + row_number() OVER (PARTITION BY v.endpoint_id, COALESCE(v.key_id, '') ORDER BY ord) - 1
    FROM v ORDER BY ord)
  INSERT INTO job_inputs (job_id, input_json) SELECT id, input_json FROM v`;

/** finishJob for many jobs; `v` has no retention_ms or webhook, so those of finishedColumns are the job's. */
const FINISH_JOBS_SQL = `UPDATE jobs j SET status = v.status, output_json = v.output_json, error = v.error, ${finishedColumns('v.now')}
  FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::text[], $6::text[], $7::bigint[])
    AS v(id, worker_id, endpoint_id, status, output_json, error, now)
  WHERE j.id = v.id AND j.status = 'IN_PROGRESS' AND j.worker_id = v.worker_id
    AND (v.endpoint_id IS NULL OR j.endpoint_id = v.endpoint_id)
  RETURNING ${jobColumnList('j')}`;

/**
 * A batch of jobs as one array a column, in column order (the parameters of INSERT_JOBS_SQL):
 * every field, as given. One explicit map a field, filled by name: a loop over the column
 * table (or building each job's row first) cost two to four times as much per job.
 */
export function jobColumnArrays(list: JobRecord[]): unknown[][] {
  const c = new Array<unknown[]>(JOB_COLUMN_COUNT);
  c[COL.id] = list.map((j) => j.id);
  c[COL.endpointId] = list.map((j) => j.endpointId);
  c[COL.status] = list.map((j) => j.status);
  c[COL.outputJson] = list.map((j) => j.outputJson);
  c[COL.error] = list.map((j) => j.error);
  c[COL.webhook] = list.map((j) => j.webhook);
  c[COL.s3Config] = list.map((j) => j.s3Config);
  c[COL.executionTimeoutMs] = list.map((j) => j.executionTimeoutMs);
  c[COL.lowPriority] = list.map((j) => j.lowPriority);
  c[COL.ttlMs] = list.map((j) => j.ttlMs);
  c[COL.retentionMs] = list.map((j) => j.retentionMs);
  c[COL.maxAttempts] = list.map((j) => j.maxAttempts);
  c[COL.sync] = list.map((j) => j.sync);
  c[COL.keyId] = list.map((j) => j.keyId);
  c[COL.createdAt] = list.map((j) => j.createdAt);
  c[COL.queuedAt] = list.map((j) => j.queuedAt);
  c[COL.startedAt] = list.map((j) => j.startedAt);
  c[COL.finishedAt] = list.map((j) => j.finishedAt);
  c[COL.deadlineAt] = list.map((j) => j.deadlineAt);
  c[COL.expiresAt] = list.map((j) => j.expiresAt);
  c[COL.workerId] = list.map((j) => j.workerId);
  c[COL.attempts] = list.map((j) => j.attempts);
  c[COL.retries] = list.map((j) => j.retries);
  c[COL.webhookAttempts] = list.map((j) => j.webhookAttempts);
  c[COL.webhookNextAt] = list.map((j) => j.webhookNextAt);
  c[COL.inputBytes] = list.map((j) => j.inputBytes);
  c[COL.preemptions] = list.map((j) => j.preemptions);
  c[COL.traceparent] = list.map((j) => j.traceparent);
  return c;
}

/** The finishJob calls of a batch as one array a column (the parameters of FINISH_JOBS_SQL). */
function finishColumnArrays(list: FinishArgs[]): unknown[][] {
  return [
    list.map((a) => a.id),
    list.map((a) => a.workerId),
    list.map((a) => a.endpointId ?? null),
    list.map((a) => a.status),
    list.map((a) => a.outputJson),
    list.map((a) => a.error),
    list.map((a) => a.now),
  ];
}

/** `ids`' jobs in the order of `ids` (undefined where a row is missing), from rows in any order. */
function inOrder(ids: string[], jobs: JobRecord[]): (JobRecord | undefined)[] {
  const byId = new Map(jobs.map((job) => [job.id, job]));
  return ids.map((id) => byId.get(id));
}

/**
 * The batchers of the jobs table: reads (one `id = ANY` SELECT), submissions (one INSERT …
 * SELECT FROM unnest) and results (one UPDATE … FROM unnest) of a turn. Submissions and
 * results of one job id never share a statement (batch.ts `key`).
 */
export function createJobBatches(db: PgConnection): JobBatches {
  const jobs = async (sql: string, params: unknown[]): Promise<JobRecord[]> => (await db.queryArrays(sql, params)).map(toJob);
  const insertMany = async (list: NewJob[]): Promise<void> => {
    await db.query(INSERT_JOBS_SQL, [...jobColumnArrays(list.map((n) => n.job)), list.map((n) => n.inputJson)]);
  };
  const finishMany = async (list: FinishArgs[]): Promise<(JobRecord | undefined)[]> =>
    inOrder(
      list.map((a) => a.id),
      await jobs(FINISH_JOBS_SQL, finishColumnArrays(list)),
    );

  // Reads of one turn share a round trip too: under load most of a /status read's cost on
  // PostgreSQL is the round trip, not the row.
  const reads = createBatcher<string, JobRecord | undefined>({
    one: async (id) => (await jobs(GET_JOB_SQL, [id]))[0],
    many: async (ids) => inOrder(ids, await jobs(GET_JOBS_SQL, [ids])),
  });
  const inserts = createBatcher<NewJob, void>({
    key: (n) => n.job.id,
    one: (n) => insertMany([n]),
    many: async (list) => {
      await insertMany(list);
      return list.map(() => undefined);
    },
  });
  const finishes = createBatcher<FinishArgs, JobRecord | undefined>({
    key: (args) => args.id,
    one: async (args) => (await finishMany([args]))[0],
    many: finishMany,
  });
  return {
    reads,
    inserts,
    finishes,
    flush: async () => {
      await Promise.all([inserts.flush(), finishes.flush(), reads.flush()]);
    },
  };
}
