import type { Notifier } from '../model/events.js';
import type { JobStatus } from '../model/job-states.js';
import type { JsonTextOrBytes } from '../model/json.js';
import type { EndpointRecord, JobCounts, JobRecord, JobWithInput, KeyRecord, QueueByKey, QueueStats, JobMeter, PurgedJob, RegistryCredentialRecord, Scope, Taker, WorkerMeter, WorkerRecord } from '../model/records.js';
import type { FileStore } from './file-store.js';
import type { LogStore } from './log-store.js';
import type { MinuteStore } from './minute-store.js';
import type { AuditStore } from './audit-store.js';

/**
 * The store: every piece of durable state, behind one interface with one backend per database
 * (sqlite/, postgres/). SQL lives only under src/store/. Each table group has its interface
 * below, implemented by one class per backend (sqlite/jobs.ts, postgres/jobs.ts, …), and the
 * Store callers see is composed from them (compose-store.ts).
 *
 * Rules every backend follows (the conformance suite in test/conformance checks them):
 * - Times are epoch milliseconds and every time-dependent call takes `now` from the caller,
 *   so tests can move the clock.
 * - A state change happens only from the states named in its doc comment; a call that finds
 *   the job elsewhere changes nothing and says so in its return value (never throws).
 * - JSON documents (input, output, endpoint worker settings) cross this interface as JSON
 *   text, so the hot path never parses and re-serialises them.
 * - Writes resolve once they are durable (committed). Backends may group the writes of one
 *   event-loop turn into one transaction.
 */
export interface Store extends JobStore, WorkerStore, EndpointStore, KeyStore, RegistryCredentialStore, UsageStore, MinuteStore, LogStore, UpkeepStore, AuditStore, FileStore {
  /** Which backend, for logs only: nothing outside src/store branches on it. */
  readonly kind: 'sqlite' | 'postgres';

  /** Applies pending migrations; refuses a database whose schema is newer than this code. */
  migrate(): Promise<void>;
  /** Commits what is pending and closes. A second call does nothing. */
  close(): Promise<void>;
}

/** The store looking after itself: whether writes commit (readiness while it faults). */
export interface UpkeepStore {
  /** Writes the one row of store_probe (written_at = now); resolves once it is committed, rejects with the driver's error. */
  probeWrite(now: number): Promise<void>;
}

/** The jobs table (and each job's stream chunks): every job transition is one call here. */
export interface JobStore {
  /**
   * Writes a new job exactly as given (its initial state is decided by the caller,
   * src/jobs/transitions.ts), its input (JSON text, or a RawJson of its bytes that the store
   * decodes only if it must) beside it in job_inputs. (One argument, as
   * every store method: the wrappers in store-faults.ts and metrics/store-timing.ts pass one.) No other call
   * writes the input, and only getJobInput and the claims read it back: every other job read
   * and transition leaves it out, however large (docs/benchmarks.md, "Big bodies").
   */
  insertJob(args: { job: JobRecord; inputJson: JsonTextOrBytes }): Promise<void>;
  /** The job without its input (getJobInput). */
  getJob(id: string): Promise<JobRecord | undefined>;
  /** The job's input as submitted (JSON text); undefined when the job does not exist. */
  getJobInput(id: string): Promise<string | undefined>;

  /**
   * The job that holds an idempotency key (`keyDigest`: jobs/idempotency.ts), with the digest
   * of the request that made it; undefined when none does (never one, or deleted with its job).
   */
  findIdempotentJob(keyDigest: string): Promise<IdempotentJob | undefined>;

  /**
   * insertJob under an idempotency key, atomically: writes the job holding the key and the
   * request's digest unless a job already holds the key; then nothing is written and that job
   * is returned. Calls with one key at once, from one gateway or several, write one job.
   */
  insertJobOnce(args: { job: JobRecord; inputJson: JsonTextOrBytes; keyDigest: string; requestDigest: string }): Promise<{ created: true } | { created: false; existing: IdempotentJob }>;

  /**
   * IN_QUEUE → IN_PROGRESS for up to `limit` jobs of the endpoint whose queue deadline has not
   * passed, oldest `queuedAt` first (insertion order breaks ties). Sets workerId, startedAt=now,
   * attempts+1, deadlineAt = now + executionTimeoutMs, clears output/error.
   * Returns the claimed jobs in queue order, each with its input (the worker's to run).
   */
  claimJobs(args: { endpointId: string; workerId: string; limit: number; now: number }): Promise<JobWithInput[]>;

  /**
   * claimJobs for several waiting takers at once, in one store round trip: up to the sum of
   * their limits, the jobs in queue order, the first `takers[0].limit` for takers[0], the next
   * for takers[1], and so on (a short queue leaves the last takers with fewer or none). Returns
   * the claimed jobs in queue order, each with its taker's workerId and its input.
   */
  claimJobsFor(args: { endpointId: string; takers: readonly Taker[]; now: number }): Promise<JobWithInput[]>;

  /**
   * IN_PROGRESS (held by `workerId`) → COMPLETED or FAILED. Sets outputJson / error,
   * finishedAt=now, expiresAt = now + retentionMs, deadlineAt=null, and webhookNextAt=now
   * when the job has a webhook. Returns the updated job, or undefined when the job is not
   * IN_PROGRESS under that worker (the caller reads the job to tell why).
   */
  finishJob(args: {
    id: string;
    workerId: string;
    /** When given, the job must also belong to this endpoint (the worker's key may be limited to it). */
    endpointId?: string;
    status: 'COMPLETED' | 'FAILED';
    outputJson: string | null;
    error: string | null;
    now: number;
  }): Promise<JobRecord | undefined>;

  /** Sets the progress output of an IN_PROGRESS job held by `workerId`. False when not held. */
  setProgress(args: { id: string; workerId: string; endpointId?: string; outputJson: string }): Promise<boolean>;

  /**
   * IN_QUEUE or IN_PROGRESS → CANCELLED (finishedAt, expiresAt, webhook as finishJob).
   * workerId is kept so the worker can be told to stop. Undefined when not live.
   */
  cancelJob(args: { id: string; now: number }): Promise<JobRecord | undefined>;

  /**
   * Up to `limit` IN_QUEUE jobs of the endpoint that entered the queue at or before `now`
   * (queuedAt ≤ now) → CANCELLED, oldest first (finishedAt, expiresAt, webhook as cancelJob).
   * Running jobs are untouched. Returns them (ids and trace contexts, no inputs); [] when
   * none is left. A backend may return fewer than `limit` while more wait (SQLite stops a
   * batch at 8 MB of input): the caller calls again until [].
   */
  purgeQueue(args: { endpointId: string; now: number; limit: number }): Promise<PurgedJob[]>;

  /**
   * FAILED or TIMED_OUT, not yet expired (expiresAt > now) → IN_QUEUE with the same id and input:
   * output, error, workerId, startedAt, finishedAt, expiresAt, webhook state cleared;
   * attempts=0, retries+1, queuedAt=now (a retry is the client queueing the job again: its delayTime
   * counts from here), deadlineAt=now+ttlMs; its stream chunks deleted (and their byte count).
   */
  retryJob(args: { id: string; now: number }): Promise<JobRecord | undefined>;

  /** IN_PROGRESS past deadlineAt → TIMED_OUT with error 'execution timeout exceeded'. Up to `limit`. */
  timeOutRunning(args: { now: number; limit: number }): Promise<JobRecord[]>;

  /** IN_QUEUE past deadlineAt (queuedAt + ttlMs) → TIMED_OUT with error 'ttl expired in queue'. */
  expireQueued(args: { now: number; limit: number }): Promise<JobRecord[]>;

  /**
   * The one requeue of the job state machine (docs/states.md, "Requeues"), whatever the cause: a
   * lost worker, a pool worker that exited, a hand-out that never reached its worker. The
   * IN_PROGRESS jobs held by one of `workerIds` (with `ids`, only those) go back to IN_QUEUE:
   * workerId, startedAt and the lost run's progress output cleared; queuedAt kept, so delayTime
   * and queue order still count from the submit or the last retry; the queue deadline back to
   * queuedAt + ttlMs. `counted`: the hand-out stays counted in `attempts`, and a job that has had
   * maxAttempts hand-outs ends FAILED with `error` instead (`{attempts}` in it replaced by its
   * count; finished as finishJob). Not counted: attempts − 1, the hand-out did not happen.
   * `preempted` (with counted false): preemptions + 1, the allocator stopped the worker for a
   * higher priority (docs/scaling.md). A requeued job's buffered stream chunks are deleted and
   * its stream byte count and cut are reset: the abandoned run's output is void, and the next
   * run streams from its start under its own number (StreamChunk.attempt), so readers never get
   * two runs spliced together. A job ended FAILED keeps its chunks for its readers.
   */
  requeueJobs(args: { workerIds: string[]; ids?: string[]; counted: boolean; preempted?: boolean; error: string; now: number }): Promise<{ requeued: JobRecord[]; failed: JobRecord[] }>;

  /**
   * Deletes up to `limit` terminal jobs with expiresAt <= now and no webhook delivery pending,
   * with their stream chunks. Returns how many were deleted.
   */
  deleteExpired(args: { now: number; limit: number }): Promise<number>;

  /**
   * Shortens a job's retention to `ttlMs` (never lengthens it): retentionMs = min(retentionMs, ttlMs);
   * a finished job's expiresAt = min(expiresAt, finishedAt + ttlMs).
   */
  shortenRetention(args: { id: string; ttlMs: number }): Promise<void>;

  /**
   * Appends chunks (JSON text, `bytes` in all) to the stream of an IN_PROGRESS job held by
   * `workerId`, unless the job's undelivered chunks would then pass `maxBytes`: 'appended';
   * 'not-held' (nothing changed) when the worker does not hold the job; 'full' when the cap
   * refuses them. The first refusal of a run cuts that run's stream: a marker chunk '' is
   * appended in their place and every later post of the run is refused as well, so readers
   * get a prefix of the run's stream and a sign that it was cut, never a stream with a gap.
   * The job's undelivered byte count is kept beside it: the check reads one column. Every
   * chunk (and marker) is tagged with the job's `attempts`: the run that posted it.
   */
  appendStream(args: { id: string; workerId: string; endpointId?: string; chunks: string[]; bytes: number; maxBytes: number }): Promise<'appended' | 'not-held' | 'full'>;

  /**
   * A page of the job's buffered chunks after seq `after`, oldest first, left in place (they are
   * deleted only once delivered, by deleteStream): at most `limit`, and none after the chunks
   * read so far reach `maxBytes` bytes (the first always comes); `more` when chunks remain after
   * the page. Empty for an unknown job.
   */
  readStream(args: { id: string; after: number; limit: number; maxBytes: number }): Promise<{ chunks: StreamChunk[]; more: boolean }>;

  /**
   * Deletes the job's chunks up to seq `through`, the ones a reader has delivered, and takes
   * their bytes off the job's undelivered count. Chunks appended after them stay. Returns how
   * many were deleted (0 when another reader deleted them first).
   */
  deleteStream(args: { id: string; through: number }): Promise<number>;

  /**
   * The first buffered stream chunks of a job, oldest first, left in place (the console shows
   * them; only a client's read drains them): at most `limit`, and none after the chunks read so
   * far reach `maxChars` characters (the first chunk always comes); with `total`, how many are
   * buffered in all. No chunks and total 0 for an unknown job.
   */
  peekStream(args: { id: string; limit: number; maxChars: number }): Promise<{ chunks: string[]; total: number }>;

  /** Job counts of one endpoint for /health (retained jobs only). */
  countJobs(endpointId: string): Promise<JobCounts>;

  /**
   * What the autoscaler reads of one endpoint's live jobs: the IN_QUEUE jobs whose queue
   * deadline is after `now` (all of them, and those without policy.lowPriority), the queuedAt
   * of the oldest such normal job, and the IN_PROGRESS jobs per holding worker.
   */
  queueStats(args: { endpointId: string; now: number }): Promise<QueueStats>;

  /**
   * The same IN_QUEUE jobs (queue deadline after `now`) counted and their input bytes summed per
   * submitting key: the totals over all keys, and the `limit` keys with the most jobs.
   */
  queueByKey(args: { endpointId: string; now: number; limit: number }): Promise<QueueByKey>;

  /** Most recent jobs of an endpoint, newest first. */
  listJobs(args: { endpointId: string; limit: number }): Promise<JobRecord[]>;

  /** Status and holder of the given jobs (ids that no longer exist are left out). */
  jobStates(ids: string[]): Promise<{ id: string; status: JobStatus; workerId: string | null }[]>;

  /**
   * Terminal jobs whose webhook delivery is due (webhookNextAt <= now), oldest first; those of
   * the keys in `skipKeys` (key ids, '' for jobs without a key) left out: the webhook sender's
   * keys at their share of the connections (webhook-sender.ts).
   */
  dueWebhooks(args: { now: number; limit: number; skipKeys?: string[] }): Promise<JobRecord[]>;

  /**
   * Sets the job's delivery state: `attempts` made, the next one due at `nextAt` (null: done,
   * delivered or given up). With `attempt`, also records what that attempt met, in the same
   * write, keeping the job's last WEBHOOK_ATTEMPTS_KEPT records (older ones are deleted).
   * Without it (the sender's lease before a call) nothing is recorded. Records go with the job.
   */
  markWebhook(args: { id: string; attempts: number; nextAt: number | null; attempt?: WebhookAttempt }): Promise<void>;

  /**
   * A terminal job with a webhook and no delivery pending (webhookNextAt null: delivered or
   * given up) → its delivery due at `now` again, the attempts made kept (the sender makes one
   * more). False, changing nothing, for a live job, one without a webhook, one whose delivery is
   * pending, or none.
   */
  redeliverWebhook(args: { id: string; now: number }): Promise<boolean>;
  /** The recorded delivery attempts of a job, oldest first (at most WEBHOOK_ATTEMPTS_KEPT). */
  listWebhookAttempts(id: string): Promise<WebhookAttempt[]>;
}

/** One buffered chunk of a job's stream, as store.readStream returns it. */
export interface StreamChunk {
  /** Its place in the job's stream: increasing, never reused. */
  seq: number;
  /** JSON text; '' is the marker where the byte cap cut the run's stream. */
  chunk: string;
  /** The run that posted it: the job's `attempts` then (docs/api.md, "A job that runs again"). */
  attempt: number;
}

/** A job that holds an idempotency key, and the digest of the request that made it. */
export interface IdempotentJob {
  job: JobRecord;
  requestDigest: string;
}

/** How many webhook attempt records a job keeps: its latest ones, across retries of the job. */
export const WEBHOOK_ATTEMPTS_KEPT = 10;

/**
 * What one webhook delivery attempt met. Never the receiver's body or the webhook URL: a status
 * or a short error class is all that is kept.
 */
export interface WebhookAttempt {
  /** The job's `retries` when the attempt was made: which outcome of the job it delivered (webhook-id `{job}.{retries}`). */
  retries: number;
  /** 1, 2, 3 … within that delivery. */
  attempt: number;
  /** When the attempt ended (epoch ms). */
  at: number;
  /** The receiver's HTTP status, or null when none came. */
  httpStatus: number | null;
  /** Without an answer: a short class (`timeout`, `refused`, `blocked by outbound policy`, …); null otherwise. */
  error: string | null;
}

/** The workers table: which worker ids were heard from when, and how they feel. */
export interface WorkerStore {
  /**
   * Creates or refreshes a worker's liveness row (lastSeenAt=now). A worker id belongs to the
   * endpoint that first registered it: false (and nothing changed) when it is another endpoint's.
   */
  touchWorker(args: {
    id: string;
    endpointId: string;
    now: number;
    healthy?: boolean;
    reason?: string | null;
    version?: string | null;
  }): Promise<boolean>;

  listWorkers(endpointId?: string): Promise<WorkerRecord[]>;

  /** Workers whose lastSeenAt < cutoff. */
  findStaleWorkers(cutoff: number): Promise<WorkerRecord[]>;

  deleteWorkers(ids: string[]): Promise<void>;

  /** Ids of the IN_PROGRESS jobs a worker holds. */
  jobsHeldBy(workerId: string): Promise<string[]>;
}

/** The endpoints table. */
export interface EndpointStore {
  /** False when the id is taken. */
  createEndpoint(endpoint: EndpointRecord): Promise<boolean>;
  getEndpoint(id: string): Promise<EndpointRecord | undefined>;
  listEndpoints(): Promise<EndpointRecord[]>;
  /** Replaces the settings of an existing endpoint; false when it does not exist. */
  updateEndpoint(endpoint: EndpointRecord): Promise<boolean>;
  /** Deletes the endpoint, its jobs, its workers and its per-minute aggregates; false when it does not exist. */
  deleteEndpoint(id: string): Promise<boolean>;
}

/** The api_keys table. */
export interface KeyStore {
  createKey(key: KeyRecord): Promise<void>;
  listKeys(): Promise<KeyRecord[]>;
  deleteKey(id: string): Promise<boolean>;
  /** The key whose SHA-256 hex digest is `hash`. */
  getKeyByHash(hash: string): Promise<KeyRecord | undefined>;
  countKeysWithScope(scope: Scope): Promise<number>;
  getKey(id: string): Promise<KeyRecord | undefined>;
  /** Sets a key's budget and job cap; the key as stored now, or undefined when there is none. */
  updateKeyLimits(args: { id: string } & Pick<KeyRecord, 'budgetUnits' | 'budgetPeriod' | 'maxConcurrentJobs'>): Promise<KeyRecord | undefined>;
  /** Sets the key's lastUsedAt to `at` unless it is later than `at - minGapMs` already (so a busy key is written once a gap, not per request). */
  touchKey(args: { id: string; at: number; minGapMs: number }): Promise<void>;
}

/** The registry_credentials table: registry logins endpoints pull their images with. */
export interface RegistryCredentialStore {
  createRegistryCredential(credential: RegistryCredentialRecord): Promise<void>;
  /** Every credential, oldest first. */
  listRegistryCredentials(): Promise<RegistryCredentialRecord[]>;
  getRegistryCredential(id: string): Promise<RegistryCredentialRecord | undefined>;
  deleteRegistryCredential(id: string): Promise<boolean>;
}

/** What usage may be grouped by: the submitting key, the endpoint, the UTC day. */
export type UsageGroup = 'key' | 'endpoint' | 'day';

/** The job_meters and worker_meters tables: what ran, for whom, and what it cost (docs/api.md, "Usage"). */
export interface UsageStore {
  /** Writes one run's meter; a second write of the same run (jobId, run) changes nothing. */
  recordJobMeter(meter: JobMeter): Promise<void>;
  /** Sums the job meters written in [from, to), grouped by the named columns (none: one total), largest cost first. */
  sumUsage(args: { from: number; to: number; groupBy: readonly UsageGroup[] }): Promise<UsageSum[]>;
  /** How many metered runs ended on each of the given workers of the endpoint (`jobsDone`), and how many of them COMPLETED; workers with none left out. */
  countWorkerRuns(args: { endpointId: string; workerIds: readonly string[] }): Promise<{ workerId: string; runs: number; completed: number }[]>;
  /** The meters of one job, a row per run, oldest first (the job page's cost). */
  listJobMeters(jobId: string): Promise<JobMeter[]>;
  /** What the key's job meters written since `from` cost, in units of 1e-10 USD (its budget's spend). */
  keySpend(args: { keyId: string; from: number }): Promise<bigint>;
  /** The key's jobs IN_QUEUE or IN_PROGRESS (maxConcurrentJobs). */
  countLiveJobs(keyId: string): Promise<number>;
  /** Writes a worker's meter at its start; a second write of the same (workerId, startedAt) changes nothing. */
  openWorkerMeter(meter: WorkerMeter): Promise<void>;
  /** Moves the end of these open meters to `at` (they still run); closed ones are left. */
  advanceWorkerMeters(args: { meters: readonly { workerId: string; startedAt: number }[]; at: number }): Promise<void>;
  /** Writes a worker's stop at `at`, once: false when the meter is closed already (or unknown). */
  closeWorkerMeter(args: { workerId: string; startedAt: number; at: number }): Promise<boolean>;
  /** Worker meters that overlap [from, to), oldest start first, at most `limit`. */
  listWorkerMeters(args: { from: number; to: number; limit: number }): Promise<WorkerMeter[]>;
  /**
   * Adds one cold start of an endpoint (docs/scaling.md, "Cold starts"): its kind's count, sum
   * and latest, histogram `bucket` + 1, and `ms` into the ring of the last `window` (the slot
   * of the count before it, modulo `window`, replacing what was there).
   */
  recordColdStart(args: { endpointId: string; kind: 'start' | 'resume'; ms: number; bucket: number; at: number; window: number }): Promise<void>;
  /** The endpoint's cold starts per kind as recordColdStart left them; kinds without any left out. */
  readColdStarts(endpointId: string): Promise<StoredColdStarts[]>;
}

/** One endpoint's cold starts of one kind, as stored. */
export interface StoredColdStarts {
  kind: 'start' | 'resume';
  count: number;
  sumMs: number;
  lastMs: number;
  lastAt: number;
  /** Counts by histogram bucket (index → count; buckets never hit left out). */
  buckets: { bucket: number; count: number }[];
  /** The ring: slot → duration (ms). */
  recent: { slot: number; ms: number }[];
}

/** One group of sumUsage: the job runs of a key, endpoint and/or day in the range, and what they cost. */
export interface UsageSum {
  /** The key id when grouped by key (null: jobs submitted without a key), else undefined. */
  key?: string | null;
  /** The endpoint id when grouped by endpoint. */
  endpoint?: string;
  /** The UTC day's start (epoch ms) when grouped by day. */
  day?: number;
  jobs: number;
  executionMs: number;
  pixels: number;
  costUnits: bigint;
}

/**
 * Which gateway runs the singletons (reaper, webhook sender, autoscaler). On SQLite there is one
 * gateway and it always leads; on PostgreSQL the holder of a database lock does.
 */
export interface LeaderLock {
  isLeader(): boolean;
  /** Called with true when this gateway becomes the leader and false when it stops being it. */
  onChange(listener: (leader: boolean) => void): () => void;
  start(): void;
  /** Gives the lock up (and tells the listeners). A second call does nothing. */
  stop(): Promise<void>;
}

/** What openStore hands the gateway: the store, how events reach other gateways, and who leads. */
export interface OpenedStore {
  store: Store;
  notifier: Notifier;
  leaderLock: LeaderLock;
  /** True when other gateways may share the database (their events can be lost: poll as well). */
  shared: boolean;
}
