import type { AuditEntry, AuditQuery, AuditRecord } from './audit-store.js';

/** An audit_entries row as both drivers return it. */
export interface AuditRow {
  id: number | string;
  at: number | string;
  action: string;
  outcome: string;
  actor_kind: string;
  actor_key_id: string | null;
  actor_name: string | null;
  session: string | null;
  address: string;
  target_kind: string | null;
  target_id: string | null;
  detail: string;
}

/** The columns an INSERT writes, in order (the id is the store's). */
export const AUDIT_COLUMNS = 'at, action, outcome, actor_kind, actor_key_id, actor_name, session, address, target_kind, target_id, detail';

/** An entry's values in AUDIT_COLUMNS order. */
export function auditParams(e: AuditEntry): unknown[] {
  const { actor, target } = e;
  return [e.at, e.action, e.outcome, actor.kind, actor.keyId, actor.keyName, actor.session, e.address, target?.kind ?? null, target?.id ?? null, e.detailJson];
}

/** An audit_entries row → AuditRecord. */
export function toAuditRecord(row: AuditRow): AuditRecord {
  return {
    id: Number(row.id),
    at: Number(row.at),
    action: row.action,
    outcome: row.outcome as AuditRecord['outcome'],
    actor: { kind: row.actor_kind as AuditRecord['actor']['kind'], keyId: row.actor_key_id, keyName: row.actor_name, session: row.session },
    address: row.address,
    target: row.target_kind === null || row.target_id === null ? null : { kind: row.target_kind, id: row.target_id },
    detailJson: row.detail,
  };
}

/**
 * The SELECT of listAudit for both backends: `param(i)` writes the placeholder of the i-th
 * parameter (`?` or `$i`). An action ending in `.` matches as a prefix (actions are made of
 * lowercase letters, `-` and `.`, checked above the store, so LIKE sees no wildcard in it).
 *
 * @example auditSelect({ action: 'key.', limit: 50 }, () => '?') // { sql: 'SELECT * … WHERE action LIKE ? …', params: ['key.%', 50] }
 */
export function auditSelect(query: AuditQuery, param: (i: number) => string): { sql: string; params: unknown[] } {
  const where: string[] = [];
  const params: unknown[] = [];
  const add = (clause: (p: string) => string, value: unknown): void => {
    params.push(value);
    where.push(clause(param(params.length)));
  };
  if (query.before !== undefined) add((p) => `id < ${p}`, query.before);
  if (query.since !== undefined) add((p) => `at >= ${p}`, query.since);
  if (query.until !== undefined) add((p) => `at < ${p}`, query.until);
  if (query.action !== undefined) add((p) => (query.action!.endsWith('.') ? `action LIKE ${p}` : `action = ${p}`), query.action.endsWith('.') ? `${query.action}%` : query.action);
  if (query.target !== undefined) add((p) => `target_id = ${p}`, query.target);
  if (query.actor !== undefined) {
    // Each placeholder its own parameter: SQLite's `?` are positional.
    const ps = ['actor_key_id', 'actor_name', 'session'].map((column) => {
      params.push(query.actor);
      return `${column} = ${param(params.length)}`;
    });
    where.push(`(${ps.join(' OR ')})`);
  }
  params.push(query.limit);
  const sql = `SELECT * FROM audit_entries${where.length > 0 ? ` WHERE ${where.join(' AND ')}` : ''} ORDER BY id DESC LIMIT ${param(params.length)}`;
  return { sql, params };
}
