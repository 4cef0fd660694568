import pg from 'pg';
import type { ClientConfig, PoolClient, QueryResultRow } from 'pg';
import { checkLedger, listMigrations, migrationsDir, type Migration } from '../migrations.js';

/** BIGINT (int8) comes back as a JS number: times are epoch ms and counts, far below 2^53. */
const types = {
  getTypeParser(oid: number, format?: 'text' | 'binary') {
    if (oid === pg.types.builtins.INT8) return (value: string) => Number(value);
    return pg.types.getTypeParser(oid, format);
  },
} as ClientConfig['types'];

/**
 * One PostgreSQL database (and schema, through the connection's search_path) for a store: a
 * pool for queries plus what the notifier and the leader need to open their own connections.
 */
export interface PgConnection {
  readonly pool: pg.Pool;
  /** Settings for a dedicated connection (LISTEN, the leader's advisory lock). */
  readonly clientConfig: ClientConfig;
  query<R extends QueryResultRow>(sql: string, params?: unknown[]): Promise<R[]>;
  /** Like query, rows as arrays of column values in select order (job rows: see job-columns.ts). */
  queryArrays(sql: string, params?: unknown[]): Promise<unknown[][]>;
  /** Runs `work` in one transaction on one connection; rolls back when it throws. */
  transaction<T>(work: (client: PoolClient) => Promise<T>): Promise<T>;
  /** The schema that holds the tables (the first of search_path), read on first use. */
  schema(): Promise<string>;
  migrate(): Promise<void>;
  close(): Promise<void>;
}

/** The database to open and the size of its pool. */
export interface PgConnectionOptions {
  /** postgres://user:pass@host:port/db[?options=-c%20search_path%3Dmy_schema] */
  connectionString: string;
  /** Connections in the pool (default 10). */
  poolSize?: number;
}

/** A bigint advisory-lock key scoped to the schema, so two Gantry schemas in one database never share a lock. */
export const lockKeySql = (purpose: string): string => `hashtextextended(current_schema() || ':gantry-${purpose}', 0)`;

/** Applies one migration and its ledger row in one transaction on `client`. */
async function applyMigration(client: PoolClient, migration: Migration): Promise<void> {
  await client.query('BEGIN');
  try {
    await client.query(migration.sql);
    await client.query('INSERT INTO schema_migrations (version, name, applied_at) VALUES ($1, $2, $3)', [
      migration.version,
      migration.name,
      Date.now(),
    ]);
    await client.query('COMMIT');
  } catch (err) {
    await client.query('ROLLBACK');
    throw new Error(`migration ${migration.file} failed: ${(err as Error).message}`, { cause: err });
  }
}

/**
 * Applies the pending migrations of migrations/postgres/, each in its own transaction with its
 * ledger row, under a session advisory lock on a connection of its own: two gateways starting
 * at once apply each migration exactly once; the second waits, then finds nothing to do.
 * Refuses a schema whose ledger does not fit this code. Needs a second pooled connection
 * (`schema` reads through the pool while the lock's connection is held).
 */
async function migratePostgres(pool: pg.Pool, schema: () => Promise<string>): Promise<void> {
  const migrations = listMigrations(migrationsDir('postgres'));
  const client = await pool.connect();
  let broken: Error | undefined;
  try {
    await client.query(`SELECT pg_advisory_lock(${lockKeySql('migrate')})`);
    try {
      await client.query(`CREATE TABLE IF NOT EXISTS schema_migrations (
        version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at BIGINT NOT NULL)`);
      const applied = (await client.query<{ version: number; name: string }>('SELECT version, name FROM schema_migrations ORDER BY version')).rows;
      checkLedger(applied, migrations, `database schema ${await schema()}`);
      const done = new Set(applied.map((row) => row.version));
      for (const migration of migrations) {
        if (!done.has(migration.version)) await applyMigration(client, migration);
      }
    } finally {
      await client.query(`SELECT pg_advisory_unlock(${lockKeySql('migrate')})`);
    }
  } catch (err) {
    broken = err as Error;
    throw err;
  } finally {
    // A connection in an unknown state is destroyed, not returned to the pool.
    client.release(broken);
  }
}

/** Opens a pool; nothing connects until the first query. */
export function openPostgres(options: PgConnectionOptions): PgConnection {
  const clientConfig: ClientConfig = { connectionString: options.connectionString, types, keepAlive: true, application_name: 'gantry' };
  const pool = new pg.Pool({ ...clientConfig, max: options.poolSize ?? 10, idleTimeoutMillis: 30_000 });
  // An idle connection that breaks (server restart) is dropped by the pool; without a
  // listener the 'error' event would crash the process.
  pool.on('error', () => undefined);
  let closed = false;
  let schemaName: Promise<string> | undefined;

  const query = async <R extends QueryResultRow>(sql: string, params?: unknown[]): Promise<R[]> => {
    if (closed) throw new Error('store is closed');
    return (await pool.query<R>(sql, params)).rows;
  };

  const queryArrays = async (sql: string, params?: unknown[]): Promise<unknown[][]> => {
    if (closed) throw new Error('store is closed');
    return (await pool.query<unknown[]>({ text: sql, values: params, rowMode: 'array' })).rows;
  };

  const transaction = async <T>(work: (client: PoolClient) => Promise<T>): Promise<T> => {
    if (closed) throw new Error('store is closed');
    const client = await pool.connect();
    try {
      await client.query('BEGIN');
      const value = await work(client);
      await client.query('COMMIT');
      client.release();
      return value;
    } catch (err) {
      await client.query('ROLLBACK').then(
        () => client.release(),
        (rollbackErr: unknown) => client.release(rollbackErr as Error),
      );
      throw err;
    }
  };

  const schema = (): Promise<string> => {
    schemaName ??= query<{ schema: string | null }>('SELECT current_schema() AS schema').then((rows) => {
      const name = rows[0]?.schema;
      if (!name) throw new Error('no schema: the search_path of DATABASE_URL names no existing schema');
      return name;
    });
    return schemaName;
  };

  const migrate = (): Promise<void> => migratePostgres(pool, schema);

  const close = async (): Promise<void> => {
    if (closed) return;
    closed = true;
    await pool.end();
  };

  return { pool, clientConfig, query, queryArrays, transaction, schema, migrate, close };
}
