import { AUDIT_COLUMNS, auditParams, auditSelect, toAuditRecord, type AuditRow } from '../audit-rows.js';
import type { AuditEntry, AuditQuery, AuditRecord, AuditStore } from '../audit-store.js';
import type { PgConnection } from './connection.js';

const INSERT_SQL = `INSERT INTO audit_entries (${AUDIT_COLUMNS}) VALUES (${Array.from({ length: 11 }, (_, i) => `$${i + 1}`).join(', ')})`;

/** The audit_entries table on PostgreSQL (src/store/audit-store.ts); BIGINTs read back as numbers. */
export class PgAuditStore implements AuditStore {
  constructor(private readonly db: PgConnection) {}

  async appendAudit(entry: AuditEntry): Promise<void> {
    await this.db.query(INSERT_SQL, auditParams(entry));
  }

  async listAudit(query: AuditQuery): Promise<AuditRecord[]> {
    const { sql, params } = auditSelect(query, (i) => `$${i}`);
    return (await this.db.query<AuditRow>(sql, params)).map(toAuditRecord);
  }

  async deleteAuditBefore({ before, limit }: { before: number; limit: number }): Promise<number> {
    return (await this.db.query('DELETE FROM audit_entries WHERE id IN (SELECT id FROM audit_entries WHERE at < $1 ORDER BY at LIMIT $2) RETURNING 1', [before, limit])).length;
  }
}
