import type { UpkeepStore } from '../store.js';
import type { PgConnection } from './connection.js';

const PROBE_SQL = 'INSERT INTO store_probe (id, written_at) VALUES (1, $1) ON CONFLICT (id) DO UPDATE SET written_at = excluded.written_at';

/** The store's upkeep on PostgreSQL: the probe row. */
export class PgUpkeepStore implements UpkeepStore {
  constructor(private readonly db: Pick<PgConnection, 'query'>) {}

  async probeWrite(now: number): Promise<void> {
    await this.db.query(PROBE_SQL, [now]);
  }
}
