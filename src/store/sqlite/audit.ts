import { AUDIT_COLUMNS, auditParams, auditSelect, toAuditRecord, type AuditRow } from '../audit-rows.js';
import type { AuditEntry, AuditQuery, AuditRecord, AuditStore } from '../audit-store.js';
import { placeholders, type SqliteConnection } from './connection.js';

const INSERT_SQL = `INSERT INTO audit_entries (${AUDIT_COLUMNS}) VALUES (${placeholders(11)})`;

/** The audit_entries table on SQLite (src/store/audit-store.ts). */
export class SqliteAuditStore implements AuditStore {
  constructor(private readonly c: SqliteConnection) {}

  appendAudit(entry: AuditEntry): Promise<void> {
    return this.c.write(() => {
      this.c.q(INSERT_SQL).run(...auditParams(entry));
    });
  }

  listAudit(query: AuditQuery): Promise<AuditRecord[]> {
    const { sql, params } = auditSelect(query, () => '?');
    return this.c.read(() => (this.c.q(sql).all(...params) as AuditRow[]).map(toAuditRecord));
  }

  deleteAuditBefore({ before, limit }: { before: number; limit: number }): Promise<number> {
    return this.c.write(() => this.c.q('DELETE FROM audit_entries WHERE id IN (SELECT id FROM audit_entries WHERE at < ? ORDER BY at LIMIT ?)').run(before, limit).changes);
  }
}
