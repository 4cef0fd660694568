import type { FileStore, StoredFile } from '../file-store.js';
import type { SqliteConnection } from './connection.js';

type Args<M extends keyof FileStore> = Parameters<FileStore[M]>[0];

const PUT_SQL = `INSERT INTO files (key, content_type, size, created_at, body) VALUES (?, ?, ?, ?, ?)
   ON CONFLICT (key) DO UPDATE SET content_type = excluded.content_type, size = excluded.size, created_at = excluded.created_at, body = excluded.body`;
// The newest files first, the running total of their sizes: those past maxBytes go.
const EVICT_SQL = `DELETE FROM files WHERE key IN (
     SELECT key FROM (SELECT key, SUM(size) OVER (ORDER BY key = @key DESC, created_at DESC, key DESC) AS running FROM files)
     WHERE running > @maxBytes AND key <> @key)`;
const TOTAL_SQL = 'SELECT COALESCE(SUM(size), 0) AS total FROM files';

/** The files table on SQLite (src/store/file-store.ts). */
export class SqliteFileStore implements FileStore {
  constructor(private readonly c: SqliteConnection) {}

  putFile({ key, contentType, body, now, maxBytes }: Args<'putFile'>): Promise<{ evicted: number }> {
    return this.c.write(() => {
      this.c.q(PUT_SQL).run(key, contentType, body.byteLength, now, Buffer.from(body.buffer, body.byteOffset, body.byteLength));
      const { total } = this.c.q(TOTAL_SQL).get() as { total: number };
      return { evicted: total > maxBytes ? this.c.q(EVICT_SQL).run({ key, maxBytes }).changes : 0 };
    });
  }

  fileInfo(key: string): Promise<StoredFile | undefined> {
    return this.c.read(() => {
      const row = this.c.q('SELECT size, content_type, created_at FROM files WHERE key = ?').get(key) as { size: number; content_type: string; created_at: number } | undefined;
      return row && { size: row.size, contentType: row.content_type, createdAt: row.created_at };
    });
  }

  readFile({ key, createdAt, offset, length }: Args<'readFile'>): Promise<Uint8Array | undefined> {
    return this.c.read(() => {
      const row = this.c.q('SELECT substr(body, ?, ?) AS part FROM files WHERE key = ? AND created_at = ?').get(offset + 1, length, key, createdAt) as { part: Buffer } | undefined;
      return row?.part;
    });
  }

  deleteFilesBefore({ before, limit }: Args<'deleteFilesBefore'>): Promise<number> {
    return this.c.write(() => this.c.q('DELETE FROM files WHERE key IN (SELECT key FROM files WHERE created_at < ? ORDER BY created_at LIMIT ?)').run(before, limit).changes);
  }
}
