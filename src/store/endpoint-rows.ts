import type { EndpointRecord } from '../model/records.js';

/**
 * The one definition of the endpoints table's columns: EndpointRecord field → column, in
 * column order. Both backends build their INSERT and UPDATE lists and parameters from it.
 */
const ENDPOINT_COLUMN_TABLE = {
  id: 'id',
  name: 'name',
  workersMin: 'workers_min',
  workersMax: 'workers_max',
  idleTimeout: 'idle_timeout',
  executionTimeoutMs: 'execution_timeout_ms',
  scalerType: 'scaler_type',
  scalerValue: 'scaler_value',
  maxAttempts: 'max_attempts',
  workerJson: 'worker_json',
  webhookSecret: 'webhook_secret',
  rateLimitsJson: 'rate_limits',
  priority: 'priority',
  preemptible: 'preemptible',
  flashboot: 'flashboot',
  shareWeight: 'share_weight',
  priceUnitsPerSecond: 'price_units_per_second',
  createdAt: 'created_at',
  updatedAt: 'updated_at',
} as const satisfies { readonly [F in keyof EndpointRecord]: string };

type EndpointColumnTable = typeof ENDPOINT_COLUMN_TABLE;

/** An endpoints row as both drivers return it: text, integers (booleans as 0/1) and JSON text, named by column. */
export type EndpointRow = { [F in keyof EndpointRecord as EndpointColumnTable[F]]: EndpointRecord[F] extends boolean ? number : EndpointRecord[F] };

const ENDPOINT_FIELDS = Object.keys(ENDPOINT_COLUMN_TABLE) as (keyof EndpointRecord)[];
/** What updateEndpoint replaces: every field but the id and createdAt. */
const SETTING_FIELDS = ENDPOINT_FIELDS.filter((field) => field !== 'id' && field !== 'createdAt');

/** The endpoint columns in order (`id, name, …, updated_at`), for INSERT lists. */
export const ENDPOINT_COLUMN_NAMES: readonly string[] = ENDPOINT_FIELDS.map((field) => ENDPOINT_COLUMN_TABLE[field]);
/** `id, name, …, updated_at`. */
export const ENDPOINT_COLUMNS = ENDPOINT_COLUMN_NAMES.join(', ');
/** The columns updateEndpoint sets, in order (all but id and created_at). */
export const ENDPOINT_SETTING_COLUMNS: readonly string[] = SETTING_FIELDS.map((field) => ENDPOINT_COLUMN_TABLE[field]);

/** An endpoint's values in ENDPOINT_COLUMN_NAMES order. */
export function endpointValues(endpoint: EndpointRecord): unknown[] {
  return ENDPOINT_FIELDS.map((field) => columnValue(endpoint[field]));
}

/** A field as its column holds it: booleans as 0/1 (INTEGER on both backends). */
const columnValue = (value: unknown): unknown => (typeof value === 'boolean' ? (value ? 1 : 0) : value);

/** An endpoint's values in ENDPOINT_SETTING_COLUMNS order. */
export function endpointSettingValues(endpoint: EndpointRecord): unknown[] {
  return SETTING_FIELDS.map((field) => columnValue(endpoint[field]));
}

/** An endpoints row (SELECT *) → EndpointRecord. */
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
    rateLimitsJson: row.rate_limits ?? null,
    priority: Number(row.priority),
    preemptible: Number(row.preemptible) === 1,
    flashboot: Number(row.flashboot) === 1,
    shareWeight: Number(row.share_weight),
    priceUnitsPerSecond: row.price_units_per_second === null || row.price_units_per_second === undefined ? null : Number(row.price_units_per_second),
    createdAt: row.created_at,
    updatedAt: row.updated_at,
  };
}
