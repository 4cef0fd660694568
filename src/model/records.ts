import type { JobStatus } from './job-states.js';

/**
 * The records Gantry keeps, as every layer sees them: the store persists them, the services
 * change them, the routes render them. Plain data, no behaviour.
 */

/**
 * What one run of a job metered (job_meters): its execution time for the key that submitted
 * it and what it cost (docs/api.md, "Usage"). Written once per run (jobId, run).
 */
export interface JobMeter {
  jobId: string;
  /** The job's retry count when it ran: a retried job's runs are metered apart. */
  run: number;
  /** The key that submitted the job; null for the console's session. */
  keyId: string | null;
  endpointId: string;
  /** How the run ended: COMPLETED, FAILED, CANCELLED or TIMED_OUT. */
  status: JobStatus;
  /** From the worker's take (startedAt) to the result (finishedAt). */
  executionMs: number;
  /** width × height of a completed image; 0 otherwise. */
  pixels: number;
  /** Cost in units of 1e-10 USD (src/model/money.ts): the image price plus the per-second price. */
  costUnits: bigint;
  /** The worker that ran it (the job's holder when the run ended); null when none is known. */
  workerId: string | null;
  /** When the run ended. */
  createdAt: number;
}

/** What a feature bills for a job on top of its execution time (the image endpoints: per megapixel). */
export interface FeatureCharge {
  pixels: number;
  costUnits: bigint;
}

/** A job with its input (JSON text as submitted): what job-take hands a worker. */
export interface JobWithInput extends JobRecord {
  inputJson: string;
  /**
   * The same input as UTF-8 bytes, where the store read it as such (a large input kept in a file
   * on SQLite): `inputJson` is then decoded from it only when read, and job-take writes these
   * bytes out as they are (docs/benchmarks.md, "Big bodies").
   */
  inputUtf8?: Buffer;
}

/** One pool worker process's life, start to stop (worker_meters). */
export interface WorkerMeter {
  workerId: string;
  startedAt: number;
  endpointId: string;
  /** GPUs the worker holds (0 for none). */
  gpus: number;
  /** Its stop; while it runs, the last time its gateway saw it running. */
  endedAt: number;
  /** True until its stop is written. */
  open: boolean;
}

/** What an API key may do (docs/security.md). */
export type Scope = 'admin' | 'run' | 'read' | 'worker';

/**
 * A job as stored: state, times, holder, retention and webhook bookkeeping. Its input is kept
 * apart (the store's job_inputs) and read only where it is shown (JobWithInput): a transition
 * neither rewrites nor returns it, however large (docs/benchmarks.md, "Big bodies").
 */
export interface JobRecord {
  id: string;
  endpointId: string;
  status: JobStatus;
  /** Final output when COMPLETED; the latest progress update while IN_PROGRESS. */
  outputJson: string | null;
  error: string | null;
  webhook: string | null;
  s3Config: string | null;
  executionTimeoutMs: number;
  lowPriority: boolean;
  ttlMs: number;
  retentionMs: number;
  maxAttempts: number;
  sync: boolean;
  keyId: string | null;
  createdAt: number;
  /**
   * When a client put the job in the queue: its submit, or its last retry. A requeue (lost worker,
   * pool exit, a hand-out that never arrived) leaves it, so delayTime and queue order count from here.
   */
  queuedAt: number;
  startedAt: number | null;
  finishedAt: number | null;
  /** When the current live state must end: queue ttl while IN_QUEUE, execution timeout while IN_PROGRESS. */
  deadlineAt: number | null;
  /** When a terminal job is deleted. */
  expiresAt: number | null;
  workerId: string | null;
  /** Hand-outs to workers since the submit or the last retry (maxAttempts bounds them). */
  attempts: number;
  /** How many times a client retried the job (/retry). */
  retries: number;
  webhookAttempts: number;
  webhookNextAt: number | null;
  /** The input's size in bytes (UTF-8): what the endpoint's queued input bytes are summed from. */
  inputBytes: number;
  /** Times the job was taken back from a worker the allocator stopped for a higher priority (not counted in attempts). */
  preemptions: number;
  /**
   * The job's trace context as a W3C `traceparent` (its submit span): set at the submit while
   * tracing is on (docs/observability.md), null otherwise. Kept with the job so that every
   * gateway continues the same trace.
   */
  traceparent: string | null;
}

/**
 * A job purge-queue cancelled, as the store returns it: enough for its last spans (a wait and
 * its result, docs/observability.md) and to wake its readers, without the input.
 */
export type PurgedJob = Pick<JobRecord, 'id' | 'traceparent' | 'queuedAt' | 'attempts' | 'preemptions' | 'retries'>;

/** Retained jobs of an endpoint by state (/health). */
export interface JobCounts {
  inQueue: number;
  inProgress: number;
  completed: number;
  failed: number;
  cancelled: number;
  timedOut: number;
  /** Retained jobs that a client retried (/retry) at least once. */
  retried: number;
  /** Retained jobs handed to a worker more than once since their submit or last retry (a worker lost them). */
  reattempted: number;
}

/** What the autoscaler and the queue-overload check read of an endpoint's live jobs. */
export interface QueueStats {
  inQueue: number;
  /** Bytes of input the queued jobs hold (their input_bytes): the bytes bound of the queue-overload check. */
  inQueueBytes: number;
  /** Queued jobs without policy.lowPriority: only these make the autoscaler add workers. */
  inQueueNormal: number;
  /** queuedAt of the oldest queued normal job; null when there is none. */
  oldestNormalQueuedAt: number | null;
  inProgress: number;
  /** IN_PROGRESS jobs per worker id (workers holding none are absent). */
  heldBy: ReadonlyMap<string, number>;
  /** When the job a worker took last of those it holds started (the allocator preempts the least run first); absent: not known. */
  heldSince?: ReadonlyMap<string, number>;
}

/**
 * An endpoint's queue per submitting key (the queue gauge's shares, jobs/queue-gauge.ts): the
 * totals over every key, and the keys holding the most queued jobs.
 */
export interface QueueByKey {
  jobs: number;
  bytes: number;
  /** Per key id ('' for jobs submitted without a key), most jobs first. */
  keys: { keyId: string; jobs: number; bytes: number }[];
}

/** A worker id as the store last heard from it. */
export interface WorkerRecord {
  id: string;
  endpointId: string;
  firstSeenAt: number;
  lastSeenAt: number;
  healthy: boolean;
  reason: string | null;
  version: string | null;
}

/** An endpoint's settings (RunPod's names). */
export interface EndpointRecord {
  id: string;
  name: string;
  workersMin: number;
  workersMax: number;
  /** Seconds a started worker may sit idle before it is stopped. */
  idleTimeout: number;
  executionTimeoutMs: number;
  scalerType: 'QUEUE_DELAY' | 'REQUEST_COUNT';
  scalerValue: number;
  maxAttempts: number;
  /** `{command, env?, cwd?}` as JSON text, or null for workers connected by hand. */
  workerJson: string | null;
  /** Standard Webhooks signing secret, sealed (SecretBox); null when webhooks go unsigned. */
  webhookSecret: string | null;
  /** Per-endpoint rate limits as JSON text: `"off"` or `{operation: {per10s?, concurrent?} | "off"}`; null for the defaults. */
  rateLimitsJson: string | null;
  /** The allocator's order between endpoints (0-100, higher first; docs/scaling.md). */
  priority: number;
  /** Whether running workers may be stopped for a higher priority (their jobs requeued, no attempt counted). */
  preemptible: boolean;
  /** Whether scaled-down workers are kept (stopped, not removed) to start again fast. */
  flashboot: boolean;
  /** Weight of the endpoint's fair share among equal priorities (1-100). */
  shareWeight: number;
  /** USD per second of execution in units of 1e-10 USD; null: metered, not priced. */
  priceUnitsPerSecond: number | null;
  createdAt: number;
  updatedAt: number;
}

/** A container registry login as stored (registry_credentials): the password sealed (SecretBox), never plain. */
export interface RegistryCredentialRecord {
  id: string;
  name: string;
  username: string;
  /** Sealed with the gateway's secret key. */
  password: string;
  createdAt: number;
}

/** An API key as stored: its digest, never the key. */
export interface KeyRecord {
  id: string;
  name: string;
  /** SHA-256 hex digest of the key; the key itself is never stored. */
  hash: string;
  scopes: Scope[];
  /** Endpoint ids the key is limited to; null for all. */
  endpoints: string[] | null;
  createdAt: number;
  /** Spend allowed per budgetPeriod, in units of 1e-10 USD; null: no budget. */
  budgetUnits: number | null;
  /** The budget's period (UTC); null when there is no budget. */
  budgetPeriod: BudgetPeriod | null;
  /** Queued + running jobs the key may have at once; null: no cap. */
  maxConcurrentJobs: number | null;
  /** The key's first characters (keyPrefix), to recognise it by; null for keys made before prefixes were kept. */
  prefix: string | null;
  /** When the key was last used (epoch ms, written at most once a minute per gateway); null: never since prefixes were kept. */
  lastUsedAt: number | null;
  /** Made and revoked by the gateway itself (a pool worker's own key): revoking it by hand needs force. */
  managed: boolean;
}

/** A key budget's period, calendar UTC. */
export type BudgetPeriod = 'day' | 'month';

/** A worker's waiting take: who gets the jobs, and how many at most. */
export interface Taker {
  workerId: string;
  limit: number;
}
