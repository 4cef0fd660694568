import type { WorkerRecord } from '../model/records.js';

/** A workers row as the drivers return it: snake_case; `healthy` is 0/1 on SQLite, a boolean on PostgreSQL. */
export interface WorkerRow {
  id: string;
  endpoint_id: string;
  first_seen_at: number;
  last_seen_at: number;
  healthy: number | boolean;
  reason: string | null;
  version: string | null;
}

/** A workers row (SELECT *) → WorkerRecord. */
export function toWorker(row: WorkerRow): WorkerRecord {
  return {
    id: row.id,
    endpointId: row.endpoint_id,
    firstSeenAt: row.first_seen_at,
    lastSeenAt: row.last_seen_at,
    healthy: Boolean(row.healthy),
    reason: row.reason,
    version: row.version,
  };
}
