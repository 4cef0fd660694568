import pg from 'pg';
import { startEmbedded } from './embedded-postgres.js';

export { startEmbedded } from './embedded-postgres.js';

/**
 * PostgreSQL for tests: DATABASE_URL when set, else the machine's server at
 * 127.0.0.1:5432 (database `test`), else an embedded-postgres started for this test process.
 * Every test file (or test) works in a schema of its own, named in the connection string's
 * search_path, and drops it at the end.
 */
export const LOCAL = 'postgres://postgres@127.0.0.1:5432/test';

let base: Promise<string> | undefined;

/** Whether a PostgreSQL server answers at `url`. */
export async function answers(url: string): Promise<boolean> {
  const client = new pg.Client({ connectionString: url, connectionTimeoutMillis: 3_000 });
  try {
    await client.connect();
    await client.query('SELECT 1');
    return true;
  } catch {
    return false;
  } finally {
    await client.end().catch(() => undefined);
  }
}

/** The server tests use (see above); found once per test process. */
export function testDatabaseUrl(): Promise<string> {
  base ??= (async () => {
    const configured = process.env.GANTRY_TEST_DATABASE_URL ?? process.env.DATABASE_URL;
    if (configured) return configured;
    if (await answers(LOCAL)) return LOCAL;
    return (await startEmbedded()).url;
  })();
  return base;
}

/** `url` whose connections use `schema` (search_path in the startup options). */
export function withSchema(url: string, schema: string): string {
  const parsed = new URL(url);
  parsed.searchParams.set('options', `-c search_path=${schema}`);
  return parsed.toString();
}

export interface TestSchema {
  /** A connection string whose search_path is the new schema. */
  url: string;
  schema: string;
  /** Drops the schema and everything in it. */
  drop(): Promise<void>;
}

let counter = 0;

/** Creates an empty schema `gantry_<label>_<random>` for one test file or test. */
export async function createTestSchema(label = 't'): Promise<TestSchema> {
  const server = await testDatabaseUrl();
  const schema = `gantry_${label.replace(/[^a-z0-9_]/gi, '_').toLowerCase()}_${process.pid}_${++counter}_${Math.random().toString(36).slice(2, 8)}`;
  await admin(server, `CREATE SCHEMA ${schema}`);
  return {
    url: withSchema(server, schema),
    schema,
    drop: () => admin(server, `DROP SCHEMA IF EXISTS ${schema} CASCADE`),
  };
}

async function admin(url: string, sql: string): Promise<void> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    await client.query(sql);
  } finally {
    await client.end();
  }
}
