import type { EndpointRecord, JobRecord, WorkerRecord } from '../store.js';
import type { EndpointRow } from '../shared-rows.js';
export { toEndpoint, toKey, type EndpointRow, type KeyRow } from '../shared-rows.js';

/** Rows as better-sqlite3 returns them: snake_case columns, booleans as 0/1, JSON as text. */
export interface WorkerRow {
  id: string;
  endpoint_id: string;
  first_seen_at: number;
  last_seen_at: number;
  healthy: number;
  reason: string | null;
  version: string | null;
}

/**
 * The job columns in a fixed order. Job queries select exactly these and read rows in raw
 * (array) mode: better-sqlite3 builds a 26-key object per row otherwise, which made a
 * primary-key read cost ~11 µs instead of ~6 µs.
 */
export const JOB_COLUMNS = 'id, endpoint_id, status, input_json, output_json, error, webhook, s3_config, execution_timeout_ms, low_priority, ttl_ms, retention_ms, max_attempts, sync, key_id, created_at, queued_at, started_at, finished_at, deadline_at, expires_at, worker_id, attempts, retries, webhook_attempts, webhook_next_at';

/** A raw row of JOB_COLUMNS (plus anything after them) → JobRecord. */
export function toJobRaw(r: unknown[]): JobRecord {
  return {
    id: r[0] as JobRecord['id'],
    endpointId: r[1] as JobRecord['endpointId'],
    status: r[2] as JobRecord['status'],
    inputJson: r[3] as JobRecord['inputJson'],
    outputJson: r[4] as JobRecord['outputJson'],
    error: r[5] as JobRecord['error'],
    webhook: r[6] as JobRecord['webhook'],
    s3Config: r[7] as JobRecord['s3Config'],
    executionTimeoutMs: r[8] as JobRecord['executionTimeoutMs'],
    lowPriority: r[9] !== 0,
    ttlMs: r[10] as JobRecord['ttlMs'],
    retentionMs: r[11] as JobRecord['retentionMs'],
    maxAttempts: r[12] as JobRecord['maxAttempts'],
    sync: r[13] !== 0,
    keyId: r[14] as JobRecord['keyId'],
    createdAt: r[15] as JobRecord['createdAt'],
    queuedAt: r[16] as JobRecord['queuedAt'],
    startedAt: r[17] as JobRecord['startedAt'],
    finishedAt: r[18] as JobRecord['finishedAt'],
    deadlineAt: r[19] as JobRecord['deadlineAt'],
    expiresAt: r[20] as JobRecord['expiresAt'],
    workerId: r[21] as JobRecord['workerId'],
    attempts: r[22] as JobRecord['attempts'],
    retries: r[23] as JobRecord['retries'],
    webhookAttempts: r[24] as JobRecord['webhookAttempts'],
    webhookNextAt: r[25] as JobRecord['webhookNextAt'],
  };
}

export function toWorker(row: WorkerRow): WorkerRecord {
  return {
    id: row.id,
    endpointId: row.endpoint_id,
    firstSeenAt: row.first_seen_at,
    lastSeenAt: row.last_seen_at,
    healthy: row.healthy !== 0,
    reason: row.reason,
    version: row.version,
  };
}

/** Named parameters for the endpoints table. */
export function endpointParams(endpoint: EndpointRecord): EndpointRow {
  return {
    id: endpoint.id,
    name: endpoint.name,
    workers_min: endpoint.workersMin,
    workers_max: endpoint.workersMax,
    idle_timeout: endpoint.idleTimeout,
    execution_timeout_ms: endpoint.executionTimeoutMs,
    scaler_type: endpoint.scalerType,
    scaler_value: endpoint.scalerValue,
    max_attempts: endpoint.maxAttempts,
    worker_json: endpoint.workerJson,
    webhook_secret: endpoint.webhookSecret,
    created_at: endpoint.createdAt,
    updated_at: endpoint.updatedAt,
  };
}

