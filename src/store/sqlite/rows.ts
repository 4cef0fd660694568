import type { EndpointRecord, JobRecord, KeyRecord, Scope, WorkerRecord } from '../store.js';

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

export interface EndpointRow {
  id: string;
  name: string;
  workers_min: number;
  workers_max: number;
  idle_timeout: number;
  execution_timeout_ms: number;
  scaler_type: EndpointRecord['scalerType'];
  scaler_value: number;
  max_attempts: number;
  worker_json: string | null;
  created_at: number;
  updated_at: number;
}

export interface KeyRow {
  id: string;
  name: string;
  hash: string;
  scopes: string;
  endpoints: string | null;
  created_at: number;
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

export function toEndpoint(row: EndpointRow): EndpointRecord {
  return {
    id: row.id,
    name: row.name,
    workersMin: row.workers_min,
    workersMax: row.workers_max,
    idleTimeout: row.idle_timeout,
    executionTimeoutMs: row.execution_timeout_ms,
    scalerType: row.scaler_type,
    scalerValue: row.scaler_value,
    maxAttempts: row.max_attempts,
    workerJson: row.worker_json,
    createdAt: row.created_at,
    updatedAt: row.updated_at,
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
    created_at: endpoint.createdAt,
    updated_at: endpoint.updatedAt,
  };
}

export function toKey(row: KeyRow): KeyRecord {
  return {
    id: row.id,
    name: row.name,
    hash: row.hash,
    scopes: JSON.parse(row.scopes) as Scope[],
    endpoints: row.endpoints === null ? null : (JSON.parse(row.endpoints) as string[]),
    createdAt: row.created_at,
  };
}
