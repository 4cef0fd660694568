import type { JobStatus } from './job-states.js';

/**
 * The records Gantry keeps, as every layer sees them: the store persists them, the services
 * change them, the routes render them. Plain data, no behaviour.
 */

/** What one completed job of a priced endpoint cost. */
export interface UsageRecord {
  jobId: string;
  /** The key that submitted the job; null for the console's session. */
  keyId: string | null;
  endpointId: string;
  /** width × height of the image. */
  pixels: number;
  /** Cost in units of 1e-10 USD (src/images/pricing.ts). */
  costUnits: bigint;
  createdAt: number;
}

/** What an API key may do (docs/security.md). */
export type Scope = 'admin' | 'run' | 'read' | 'worker';

/** A job as stored: input, state, times, holder, retention and webhook bookkeeping. */
export interface JobRecord {
  id: string;
  endpointId: string;
  status: JobStatus;
  inputJson: string;
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
}

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
}

/** A worker's waiting take: who gets the jobs, and how many at most. */
export interface Taker {
  workerId: string;
  limit: number;
}
