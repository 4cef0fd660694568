import type { KeyRecord, Scope } from '../../model/records.js';
import { KEY_COLUMNS, keyParams, toKey, type KeyRow } from '../key-rows.js';
import type { KeyStore } from '../store.js';
import { placeholders, type SqliteConnection } from './connection.js';

const CREATE_KEY_SQL = `INSERT INTO api_keys (${KEY_COLUMNS}) VALUES (${placeholders(12)})`;

/** The api_keys table on SQLite; scopes and endpoint limits are JSON arrays in text columns. */
export class SqliteKeyStore implements KeyStore {
  constructor(private readonly c: SqliteConnection) {}

  createKey(key: KeyRecord): Promise<void> {
    return this.c.write(() => {
      const params = keyParams(key);
      // SQLite binds no booleans: managed is 0 or 1.
      this.c.q(CREATE_KEY_SQL).run(...params.slice(0, -1), key.managed ? 1 : 0);
    });
  }

  listKeys(): Promise<KeyRecord[]> {
    return this.c.read(() => (this.c.q('SELECT * FROM api_keys ORDER BY created_at, id').all() as KeyRow[]).map(toKey));
  }

  deleteKey(id: string): Promise<boolean> {
    return this.c.write(() => this.c.q('DELETE FROM api_keys WHERE id = ?').run(id).changes === 1);
  }

  getKeyByHash(hash: string): Promise<KeyRecord | undefined> {
    return this.c.read(() => {
      const row = this.c.q('SELECT * FROM api_keys WHERE hash = ?').get(hash) as KeyRow | undefined;
      return row === undefined ? undefined : toKey(row);
    });
  }

  countKeysWithScope(scope: Scope): Promise<number> {
    return this.c.read(
      () =>
        (
          this.c.q(`SELECT COUNT(*) AS n FROM api_keys
             WHERE EXISTS (SELECT 1 FROM json_each(api_keys.scopes) WHERE value = ?)`).get(scope) as { n: number }
        ).n,
    );
  }

  getKey(id: string): Promise<KeyRecord | undefined> {
    return this.c.read(() => {
      const row = this.c.q('SELECT * FROM api_keys WHERE id = ?').get(id) as KeyRow | undefined;
      return row === undefined ? undefined : toKey(row);
    });
  }

  updateKeyLimits(args: Parameters<KeyStore['updateKeyLimits']>[0]): Promise<KeyRecord | undefined> {
    return this.c.write(() => {
      const row = this.c
        .q('UPDATE api_keys SET budget_units = ?, budget_period = ?, max_concurrent_jobs = ? WHERE id = ? RETURNING *')
        .get(args.budgetUnits, args.budgetPeriod, args.maxConcurrentJobs, args.id) as KeyRow | undefined;
      return row === undefined ? undefined : toKey(row);
    });
  }

  touchKey({ id, at, minGapMs }: Parameters<KeyStore['touchKey']>[0]): Promise<void> {
    return this.c.write(() => {
      this.c.q('UPDATE api_keys SET last_used_at = ? WHERE id = ? AND (last_used_at IS NULL OR last_used_at <= ?)').run(at, id, at - minGapMs);
    });
  }
}
