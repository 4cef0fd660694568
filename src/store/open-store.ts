import { join } from 'node:path';
import type { GantryConfig } from '../config.js';
import { createPostgresStore } from './postgres/postgres-store.js';
import { createSqliteStore } from './sqlite/sqlite-store.js';
import type { Store } from './store.js';

/**
 * The store the environment asks for: PostgreSQL when DATABASE_URL is set (postgres:// or
 * postgresql://; several gateways may share it), otherwise the SQLite file
 * `<dataDir>/gantry.db`. A DATABASE_URL of another kind is refused, never ignored.
 * The store is not migrated yet.
 *
 * @example const store = openStore(loadConfig(), { DATABASE_URL: 'postgres://gantry@db/gantry' }); await store.migrate();
 */
export function openStore(config: GantryConfig, env: NodeJS.ProcessEnv = process.env): Store {
  const url = env.DATABASE_URL;
  if (url === undefined || url === '') return createSqliteStore({ file: join(config.dataDir, 'gantry.db'), backgroundCheckpoint: true });
  if (!/^postgres(ql)?:\/\//.test(url)) {
    throw new Error('Invalid DATABASE_URL: expected postgres://user:password@host:port/database (leave it unset for SQLite)');
  }
  return createPostgresStore({ connectionString: url, poolSize: config.pgPoolSize });
}
