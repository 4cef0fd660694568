import { logFilter, logLineOf, type LogQuery, type LogRecord, type LogRow, type LogStore, type StoredLogLine } from '../log-store.js';
import type { PgConnection } from './connection.js';

// One statement for the whole batch: the columns as arrays, unnested in order (ids follow it).
const INSERT_SQL = `INSERT INTO worker_logs (at, endpoint_id, worker_id, job_id, stream, level, line, bytes)
  SELECT at, e, w, j, s, l, line, octet_length(line) FROM unnest($1::bigint[], $2::text[], $3::text[], $4::text[], $5::text[], $6::text[], $7::text[]) WITH ORDINALITY AS t(at, e, w, j, s, l, line, n) ORDER BY n`;

/** The worker_logs table on PostgreSQL (src/store/log-store.ts). */
export class PgLogStore implements LogStore {
  constructor(private readonly db: PgConnection) {}

  async appendLogs(lines: readonly LogRecord[]): Promise<void> {
    if (lines.length === 0) return;
    await this.db.query(INSERT_SQL, [
      lines.map((l) => l.at),
      lines.map((l) => l.endpointId),
      lines.map((l) => l.workerId),
      lines.map((l) => l.jobId),
      lines.map((l) => l.stream),
      lines.map((l) => l.level),
      lines.map((l) => l.line),
    ]);
  }

  async readLogs(query: LogQuery): Promise<StoredLogLine[]> {
    const { where, params, order } = logFilter(query, (i) => `$${i}`, 'ILIKE');
    const sql = `SELECT id, at, endpoint_id, worker_id, job_id, stream, level, line FROM worker_logs WHERE ${where} ORDER BY id ${order} LIMIT $${params.length + 1}`;
    return (await this.db.query<LogRow & Record<string, unknown>>(sql, [...params, query.limit])).map(logLineOf);
  }

  async lastLogId(): Promise<number> {
    const [row] = await this.db.query<{ id: number }>('SELECT COALESCE(MAX(id), 0)::bigint AS id FROM worker_logs');
    return row?.id ?? 0;
  }

  async deleteLogsBefore({ before, limit }: { before: number; limit: number }): Promise<number> {
    const rows = await this.db.query('DELETE FROM worker_logs WHERE id IN (SELECT id FROM worker_logs WHERE at < $1 ORDER BY at LIMIT $2) RETURNING 1', [before, limit]);
    return rows.length;
  }

  async trimEndpointLogs({ endpointId, keep, keepBytes, limit }: { endpointId: string; keep: number; keepBytes: number; limit: number }): Promise<number> {
    // The newer of the edges by count and by bytes (the running sum of the newest lines' sizes
    // stops at the first line past it); GREATEST skips the one that is NULL (within its bound).
    const rows = await this.db.query(
      `WITH by_lines AS (SELECT id FROM worker_logs WHERE endpoint_id = $1 ORDER BY id DESC LIMIT 1 OFFSET $2),
       by_bytes AS (SELECT id FROM (SELECT id, SUM(bytes) OVER (ORDER BY id DESC ROWS UNBOUNDED PRECEDING) AS total
         FROM worker_logs WHERE endpoint_id = $1) t WHERE total > $4 LIMIT 1),
       edge AS (SELECT GREATEST((SELECT id FROM by_lines), (SELECT id FROM by_bytes)) AS id)
       DELETE FROM worker_logs WHERE id IN (SELECT id FROM worker_logs WHERE endpoint_id = $1 AND id <= (SELECT id FROM edge) ORDER BY id LIMIT $3) RETURNING 1`,
      [endpointId, keep, limit, keepBytes],
    );
    return rows.length;
  }
}
