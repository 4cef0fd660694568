import { logFilter, logLineOf, type LogQuery, type LogRecord, type LogRow, type LogStore, type StoredLogLine } from '../log-store.js';
import type { SqliteConnection } from './connection.js';

const INSERT_SQL = 'INSERT INTO worker_logs (at, endpoint_id, worker_id, job_id, stream, level, line, bytes) VALUES (?, ?, ?, ?, ?, ?, ?, ?)';
// The id of the newest line past those kept by count, and by bytes (the running sum of the
// newest lines' sizes, read from the endpoint index alone, stops at the first line past it).
const LINE_EDGE_SQL = 'SELECT id FROM worker_logs WHERE endpoint_id = ? ORDER BY id DESC LIMIT 1 OFFSET ?';
const BYTE_EDGE_SQL = `SELECT id FROM (SELECT id, SUM(bytes) OVER (ORDER BY id DESC ROWS UNBOUNDED PRECEDING) AS total
   FROM worker_logs WHERE endpoint_id = ?) WHERE total > ? LIMIT 1`;

/** The worker_logs table on SQLite (src/store/log-store.ts). */
export class SqliteLogStore implements LogStore {
  constructor(private readonly c: SqliteConnection) {}

  appendLogs(lines: readonly LogRecord[]): Promise<void> {
    if (lines.length === 0) return Promise.resolve();
    return this.c.write(
      this.c.db.transaction(() => {
        const insert = this.c.q(INSERT_SQL);
        for (const l of lines) insert.run(l.at, l.endpointId, l.workerId, l.jobId, l.stream, l.level, l.line, Buffer.byteLength(l.line));
      }),
    );
  }

  readLogs(query: LogQuery): Promise<StoredLogLine[]> {
    const { where, params, order } = logFilter(query, () => '?', 'LIKE');
    // The filters are a fixed set of clauses, so the statements cached by q() stay few.
    const sql = `SELECT id, at, endpoint_id, worker_id, job_id, stream, level, line FROM worker_logs WHERE ${where} ORDER BY id ${order} LIMIT ?`;
    return this.c.read(() => (this.c.q(sql).all(...params, query.limit) as LogRow[]).map(logLineOf));
  }

  lastLogId(): Promise<number> {
    return this.c.read(() => (this.c.q('SELECT COALESCE(MAX(id), 0) AS id FROM worker_logs').get() as { id: number }).id);
  }

  deleteLogsBefore({ before, limit }: { before: number; limit: number }): Promise<number> {
    return this.c.write(() => {
      const n = this.c.q('DELETE FROM worker_logs WHERE id IN (SELECT id FROM worker_logs WHERE at < ? ORDER BY at LIMIT ?)').run(before, limit).changes;
      if (n > 0) this.c.pagesFreed();
      return n;
    });
  }

  trimEndpointLogs({ endpointId, keep, keepBytes, limit }: { endpointId: string; keep: number; keepBytes: number; limit: number }): Promise<number> {
    return this.c.write(() => {
      // The newer of the two edges: it and every older line of the endpoint go.
      const byLines = this.c.q(LINE_EDGE_SQL).get(endpointId, keep) as { id: number } | undefined;
      const byBytes = this.c.q(BYTE_EDGE_SQL).get(endpointId, keepBytes) as { id: number } | undefined;
      const edge = Math.max(byLines?.id ?? 0, byBytes?.id ?? 0);
      if (edge === 0) return 0;
      const n = this.c
        .q('DELETE FROM worker_logs WHERE id IN (SELECT id FROM worker_logs WHERE endpoint_id = ? AND id <= ? ORDER BY id LIMIT ?)')
        .run(endpointId, edge, limit).changes;
      if (n > 0) this.c.pagesFreed();
      return n;
    });
  }
}
