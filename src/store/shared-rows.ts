import type { EndpointRecord, KeyRecord, Scope } from './store.js';

/**
 * Rows of the endpoints and api_keys tables, the same on every backend (text, integers and JSON
 * text only), with their mapping to records. The jobs and workers rows differ per backend
 * (booleans, bigint parsing, raw mode) and live beside each backend.
 */
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
  webhook_secret: string | null;
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
    webhookSecret: row.webhook_secret ?? null,
    createdAt: row.created_at,
    updatedAt: row.updated_at,
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

/** A key's row values in column order: id, name, hash, scopes, endpoints, created_at (JSON as text). */
export function keyParams(key: KeyRecord): [string, string, string, string, string | null, number] {
  return [key.id, key.name, key.hash, JSON.stringify(key.scopes), key.endpoints === null ? null : JSON.stringify(key.endpoints), key.createdAt];
}
