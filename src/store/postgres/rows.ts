import type { JobStatus } from '../../jobs/states.js';
import type { EndpointRecord, JobRecord, WorkerRecord } from '../store.js';
export { toEndpoint, toKey, type EndpointRow, type KeyRow } from '../shared-rows.js';

/** Rows as pg returns them (int8 parsed to number, see connection.ts): snake_case, real booleans. */
export interface JobRow {
  id: string;
  seq: number;
  endpoint_id: string;
  status: JobStatus;
  input_json: string;
  output_json: string | null;
  error: string | null;
  webhook: string | null;
  s3_config: string | null;
  execution_timeout_ms: number;
  low_priority: boolean;
  ttl_ms: number;
  retention_ms: number;
  max_attempts: number;
  sync: boolean;
  key_id: string | null;
  created_at: number;
  queued_at: number;
  started_at: number | null;
  finished_at: number | null;
  deadline_at: number | null;
  expires_at: number | null;
  worker_id: string | null;
  attempts: number;
  retries: number;
  webhook_attempts: number;
  webhook_next_at: number | null;
}

export interface WorkerRow {
  id: string;
  endpoint_id: string;
  first_seen_at: number;
  last_seen_at: number;
  healthy: boolean;
  reason: string | null;
  version: string | null;
}

export function toJob(row: JobRow): JobRecord {
  return {
    id: row.id,
    endpointId: row.endpoint_id,
    status: row.status,
    inputJson: row.input_json,
    outputJson: row.output_json,
    error: row.error,
    webhook: row.webhook,
    s3Config: row.s3_config,
    executionTimeoutMs: row.execution_timeout_ms,
    lowPriority: row.low_priority,
    ttlMs: row.ttl_ms,
    retentionMs: row.retention_ms,
    maxAttempts: row.max_attempts,
    sync: row.sync,
    keyId: row.key_id,
    createdAt: row.created_at,
    queuedAt: row.queued_at,
    startedAt: row.started_at,
    finishedAt: row.finished_at,
    deadlineAt: row.deadline_at,
    expiresAt: row.expires_at,
    workerId: row.worker_id,
    attempts: row.attempts,
    retries: row.retries,
    webhookAttempts: row.webhook_attempts,
    webhookNextAt: row.webhook_next_at,
  };
}

export function toWorker(row: WorkerRow): WorkerRecord {
  return {
    id: row.id,
    endpointId: row.endpoint_id,
    firstSeenAt: row.first_seen_at,
    lastSeenAt: row.last_seen_at,
    healthy: row.healthy,
    reason: row.reason,
    version: row.version,
  };
}

/** Positional parameters $1…$13 for the endpoints table, in ENDPOINT_COLUMNS order. */
export const ENDPOINT_COLUMNS =
  'id, name, workers_min, workers_max, idle_timeout, execution_timeout_ms, scaler_type, scaler_value, max_attempts, worker_json, webhook_secret, created_at, updated_at';

export function endpointParams(e: EndpointRecord): unknown[] {
  return [e.id, e.name, e.workersMin, e.workersMax, e.idleTimeout, e.executionTimeoutMs, e.scalerType, e.scalerValue, e.maxAttempts, e.workerJson, e.webhookSecret, e.createdAt, e.updatedAt];
}

/** Rows come back from UPDATE … RETURNING in no set order; this restores queue order. */
export function byQueueOrder(a: JobRow, b: JobRow): number {
  return a.queued_at - b.queued_at || a.seq - b.seq;
}
