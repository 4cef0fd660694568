import type { FileStore, StoredFile } from '../file-store.js';
import type { PgConnection } from './connection.js';

type Args<M extends keyof FileStore> = Parameters<FileStore[M]>[0];

const PUT_SQL = `INSERT INTO files (key, content_type, size, created_at, body) VALUES ($1, $2, $3, $4, $5)
   ON CONFLICT (key) DO UPDATE SET content_type = excluded.content_type, size = excluded.size, created_at = excluded.created_at, body = excluded.body`;
// Only when all files hold more than maxBytes: the newest first, the running total of their
// sizes, and those past maxBytes go (never the one just stored). Reads sizes, not bodies.
const EVICT_SQL = `DELETE FROM files WHERE key IN (
     SELECT key FROM (SELECT key, SUM(size) OVER (ORDER BY key = $1 DESC, created_at DESC, key DESC) AS running FROM files) AS newest
     WHERE running > $2 AND key <> $1)
   AND (SELECT SUM(size) FROM files) > $2 RETURNING 1`;

/** The files table on PostgreSQL (src/store/file-store.ts); a file's body is read by slices (substring of an EXTERNAL bytea). */
export class PgFileStore implements FileStore {
  constructor(private readonly db: PgConnection) {}

  async putFile({ key, contentType, body, now, maxBytes }: Args<'putFile'>): Promise<{ evicted: number }> {
    await this.db.query(PUT_SQL, [key, contentType, body.byteLength, now, Buffer.from(body.buffer, body.byteOffset, body.byteLength)]);
    return { evicted: (await this.db.query(EVICT_SQL, [key, maxBytes])).length };
  }

  async fileInfo(key: string): Promise<StoredFile | undefined> {
    const rows = await this.db.query<{ size: number; content_type: string; created_at: number }>('SELECT size, content_type, created_at FROM files WHERE key = $1', [key]);
    const row = rows[0];
    return row && { size: row.size, contentType: row.content_type, createdAt: row.created_at };
  }

  async readFile({ key, createdAt, offset, length }: Args<'readFile'>): Promise<Uint8Array | undefined> {
    const rows = await this.db.query<{ part: Buffer }>('SELECT substring(body FROM $3::int FOR $4::int) AS part FROM files WHERE key = $1 AND created_at = $2', [key, createdAt, offset + 1, length]);
    return rows[0]?.part;
  }

  async deleteFilesBefore({ before, limit }: Args<'deleteFilesBefore'>): Promise<number> {
    return (await this.db.query('DELETE FROM files WHERE key IN (SELECT key FROM files WHERE created_at < $1 ORDER BY created_at LIMIT $2) RETURNING 1', [before, limit])).length;
  }
}
