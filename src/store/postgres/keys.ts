import type { KeyRecord, Scope } from '../../model/records.js';
import { KEY_COLUMNS, keyParams, toKey, type KeyRow } from '../key-rows.js';
import type { KeyStore } from '../store.js';
import type { PgConnection } from './connection.js';

/** The api_keys table on PostgreSQL; scopes and endpoint limits are JSON arrays in text columns. */
export class PgKeyStore implements KeyStore {
  constructor(private readonly db: PgConnection) {}

  async createKey(key: KeyRecord): Promise<void> {
    await this.db.query(`INSERT INTO api_keys (${KEY_COLUMNS}) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12)`, keyParams(key));
  }

  async listKeys(): Promise<KeyRecord[]> {
    return (await this.db.query<KeyRow>('SELECT * FROM api_keys ORDER BY created_at, id')).map(toKey);
  }

  async deleteKey(id: string): Promise<boolean> {
    return (await this.db.query('DELETE FROM api_keys WHERE id = $1 RETURNING 1', [id])).length === 1;
  }

  async getKeyByHash(hash: string): Promise<KeyRecord | undefined> {
    const row = (await this.db.query<KeyRow>('SELECT * FROM api_keys WHERE hash = $1', [hash]))[0];
    return row === undefined ? undefined : toKey(row);
  }

  async countKeysWithScope(scope: Scope): Promise<number> {
    return (await this.db.query<{ n: number }>('SELECT COUNT(*) AS n FROM api_keys WHERE scopes::jsonb ? $1', [scope]))[0]?.n ?? 0;
  }

  async getKey(id: string): Promise<KeyRecord | undefined> {
    const row = (await this.db.query<KeyRow>('SELECT * FROM api_keys WHERE id = $1', [id]))[0];
    return row === undefined ? undefined : toKey(row);
  }

  async updateKeyLimits(args: Parameters<KeyStore['updateKeyLimits']>[0]): Promise<KeyRecord | undefined> {
    const row = (
      await this.db.query<KeyRow>('UPDATE api_keys SET budget_units = $1, budget_period = $2, max_concurrent_jobs = $3 WHERE id = $4 RETURNING *', [
        args.budgetUnits,
        args.budgetPeriod,
        args.maxConcurrentJobs,
        args.id,
      ])
    )[0];
    return row === undefined ? undefined : toKey(row);
  }

  async touchKey({ id, at, minGapMs }: Parameters<KeyStore['touchKey']>[0]): Promise<void> {
    await this.db.query('UPDATE api_keys SET last_used_at = $1 WHERE id = $2 AND (last_used_at IS NULL OR last_used_at <= $3)', [at, id, at - minGapMs]);
  }
}
