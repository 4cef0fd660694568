import { join } from 'node:path';
import type { Logger } from 'pino';
import type { GantryConfig } from '../config/config.js';
import { systemClock } from '../util/clock.js';
import { openPostgresStore } from './postgres/postgres-store.js';
import { openSqliteStore } from './sqlite/sqlite-store.js';
import type { OpenedStore } from './store.js';

/**
 * The store the environment asks for, with what the gateway needs beside it: PostgreSQL when
 * DATABASE_URL is set (postgres:// or postgresql://; several gateways may share it: events
 * travel by LISTEN/NOTIFY and a database lock picks the leader), otherwise the SQLite file
 * `<dataDir>/gantry.db` (one gateway: an in-process notifier, and it always leads). A
 * DATABASE_URL of another kind is refused, never ignored. Nothing is migrated, connected or
 * started yet. Only the choice is made here; each backend wires its own parts.
 *
 * @example const { store, notifier, leaderLock } = openStore(loadConfig(), process.env, logger); await store.migrate();
 */
export function openStore(config: GantryConfig, env: NodeJS.ProcessEnv, logger: Logger): OpenedStore {
  const url = env.DATABASE_URL;
  if (url === undefined || url === '') {
    return openSqliteStore({
      file: join(config.dataDir, 'gantry.db'),
      backgroundCheckpoint: true,
      walLimitBytes: config.sqliteWalLimitMb * 1024 * 1024,
      upkeep: { logger, clock: systemClock },
    });
  }
  if (!/^postgres(ql)?:\/\//.test(url)) {
    throw new Error('Invalid DATABASE_URL: expected postgres://user:password@host:port/database (leave it unset for SQLite)');
  }
  return openPostgresStore({ connectionString: url, poolSize: config.pgPoolSize }, logger);
}
