import type { UpkeepStore } from '../store.js';
import type { SqliteConnection } from './connection.js';

const PROBE_SQL = 'INSERT INTO store_probe (id, written_at) VALUES (1, ?) ON CONFLICT (id) DO UPDATE SET written_at = excluded.written_at';

/** The store's upkeep on SQLite: the probe row. */
export class SqliteUpkeepStore implements UpkeepStore {
  constructor(private readonly c: SqliteConnection) {}

  probeWrite(now: number): Promise<void> {
    return this.c.write(() => {
      this.c.q(PROBE_SQL).run(now);
    });
  }
}
