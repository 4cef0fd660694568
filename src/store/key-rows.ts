import type { BudgetPeriod, KeyRecord, Scope } from '../model/records.js';

/** An api_keys row as both drivers return it; scopes and endpoints are JSON text. */
export interface KeyRow {
  id: string;
  name: string;
  hash: string;
  scopes: string;
  endpoints: string | null;
  created_at: number;
  budget_units: number | string | null;
  budget_period: string | null;
  max_concurrent_jobs: number | null;
  prefix: string | null;
  last_used_at: number | string | null;
  /** 0/1 on SQLite, a boolean on PostgreSQL. */
  managed: number | boolean;
}

/** An api_keys row (SELECT *) → KeyRecord, its JSON parsed. */
export function toKey(row: KeyRow): KeyRecord {
  return {
    id: row.id,
    name: row.name,
    hash: row.hash,
    scopes: JSON.parse(row.scopes) as Scope[],
    endpoints: row.endpoints === null ? null : (JSON.parse(row.endpoints) as string[]),
    createdAt: row.created_at,
    budgetUnits: row.budget_units === null || row.budget_units === undefined ? null : Number(row.budget_units),
    budgetPeriod: (row.budget_period ?? null) as BudgetPeriod | null,
    maxConcurrentJobs: row.max_concurrent_jobs ?? null,
    prefix: row.prefix ?? null,
    lastUsedAt: row.last_used_at === null || row.last_used_at === undefined ? null : Number(row.last_used_at),
    managed: Boolean(row.managed),
  };
}

/** The api_keys columns in order, for INSERT lists. */
export const KEY_COLUMNS = 'id, name, hash, scopes, endpoints, created_at, budget_units, budget_period, max_concurrent_jobs, prefix, last_used_at, managed';

/** A key's values in KEY_COLUMNS order (JSON as text). */
export function keyParams(key: KeyRecord): [string, string, string, string, string | null, number, number | null, string | null, number | null, string | null, number | null, boolean] {
  return [
    key.id,
    key.name,
    key.hash,
    JSON.stringify(key.scopes),
    key.endpoints === null ? null : JSON.stringify(key.endpoints),
    key.createdAt,
    key.budgetUnits,
    key.budgetPeriod,
    key.maxConcurrentJobs,
    key.prefix,
    key.lastUsedAt,
    key.managed,
  ];
}
