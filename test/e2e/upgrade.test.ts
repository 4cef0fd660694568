// Upgrades (issue 26.5): a database of the previous release — built with v0.1.0's own migrations
// (test/fixtures/upgrade/v0.1.0, copied out of git at a39f984 by
// scripts/extract-release-migrations.sh) and v0.1.0's ledger, then filled with v0.1.0-era SQL —
// migrates forward when this version's `gantry serve` starts on it, on both stores: every job,
// key, endpoint, usage and per-minute row is still there and served (the keys of v0.1.0 work, its
// queued jobs run on a real worker); /healthz reports the new schema version. A database newer
// than the code is refused with a message naming both versions.
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import Database from 'better-sqlite3';
import pg from 'pg';
import { afterAll, describe, expect, it } from 'vitest';
import { codeSchemaVersion, listMigrations } from '../../src/store/migrations.js';
import { waitForJobs } from '../helpers/jobs.js';
import { createTestSchema, type TestSchema } from '../helpers/postgres.js';
import { spawnOwned } from '../helpers/processes.js';
import { scratchDir } from '../helpers/scratch.js';
import { CLI, startGateway, type ServeProcess } from '../helpers/serve-process.js';

const FIXTURE = fileURLToPath(new URL('../fixtures/upgrade/v0.1.0/', import.meta.url));
const ECHO = fileURLToPath(new URL('../../dist/examples/echo-worker.js', import.meta.url));
const RUN_KEY = 'gk_v010fixture_run_key_0123456789abcdefghijklmnopqrstuv';
const WORKER_KEY = 'gk_v010fixture_worker_key_0123456789abcdefghijklmnopqr';
const TABLES = ['jobs', 'api_keys', 'endpoints', 'usage', 'job_minutes'] as const;
/**
 * Rows counted per table: the built-in image endpoints get rows of their own on start; usage
 * rows are v0.1.0's usage_records, which migration 0012 carries into job_meters.
 */
const countSql = (table: string, migrated: boolean): string => {
  if (table === 'usage') return `SELECT count(*) AS n FROM ${migrated ? 'job_meters' : 'usage_records'}`;
  return `SELECT count(*) AS n FROM ${table}${table === 'endpoints' ? " WHERE id LIKE 'v010-%'" : ''}`;
};
/** The jobs of populate.sql: id suffix, endpoint, status, output. */
const JOBS = [
  [1, 'v010-echo', 'COMPLETED', { n: 1 }],
  [2, 'v010-echo', 'COMPLETED', { n: 2, note: 'ok' }],
  [3, 'v010-echo', 'FAILED', undefined],
  [4, 'v010-echo', 'CANCELLED', undefined],
  [5, 'v010-echo', 'IN_QUEUE', undefined],
  [6, 'v010-echo', 'IN_QUEUE', undefined],
  [7, 'v010-quiet', 'COMPLETED', 'done'],
] as const;
const jobId = (n: number): string => `0193a000-0000-7000-8000-${String(n).padStart(12, '0')}`;

/** populate.sql with its times made from `now`, as statements. */
function populateStatements(now: number): string[] {
  const sql = readFileSync(join(FIXTURE, 'populate.sql'), 'utf8').replaceAll('{{NOW}}', String(now));
  return sql
    .split('\n')
    .filter((line) => !line.startsWith('--'))
    .join('\n')
    .split(/;\s*\n/)
    .map((s) => s.trim())
    .filter((s) => s !== '');
}

/** The v0.1.0 ledger table, as its migration runner created it. */
const LEDGER = {
  sqlite: 'CREATE TABLE IF NOT EXISTS schema_migrations (version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at INTEGER NOT NULL)',
  postgres: 'CREATE TABLE IF NOT EXISTS schema_migrations (version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at BIGINT NOT NULL)',
};

/** A SQLite database of v0.1.0 in a new data folder; returns the folder. */
function v010Sqlite(now: number): string {
  const dataDir = scratchDir('v010-sqlite');
  const db = new Database(join(dataDir, 'gantry.db'));
  db.pragma('journal_mode = WAL');
  db.exec(LEDGER.sqlite);
  for (const m of listMigrations(join(FIXTURE, 'sqlite'))) {
    db.transaction(() => {
      db.exec(m.sql);
      db.prepare('INSERT INTO schema_migrations (version, name, applied_at) VALUES (?, ?, ?)').run(m.version, m.name, now - 86_400_000);
    }).immediate();
  }
  for (const statement of populateStatements(now)) db.exec(statement);
  db.close();
  return dataDir;
}

/** A PostgreSQL schema of v0.1.0. */
async function v010Postgres(now: number): Promise<TestSchema> {
  const schema = await createTestSchema('v010');
  await withPg(schema.url, async (c) => {
    await c.query(LEDGER.postgres);
    for (const m of listMigrations(join(FIXTURE, 'postgres'))) {
      await c.query('BEGIN');
      await c.query(m.sql);
      await c.query('INSERT INTO schema_migrations (version, name, applied_at) VALUES ($1, $2, $3)', [m.version, m.name, now - 86_400_000]);
      await c.query('COMMIT');
    }
    for (const statement of populateStatements(now)) await c.query(statement);
  });
  return schema;
}

async function withPg<T>(url: string, work: (c: pg.Client) => Promise<T>): Promise<T> {
  const c = new pg.Client({ connectionString: url });
  await c.connect();
  try {
    return await work(c);
  } finally {
    await c.end();
  }
}

/** What the tests read straight from a database: row counts, and the ledger. */
interface Peek {
  counts(migrated: boolean): Promise<Record<string, number>>;
  ledger(): Promise<number[]>;
  addLedgerRow(version: number, name: string): Promise<void>;
}

function sqlitePeek(dataDir: string): Peek {
  const open = (): Database.Database => new Database(join(dataDir, 'gantry.db'));
  const read = <T,>(work: (db: Database.Database) => T): Promise<T> => {
    const db = open();
    try {
      return Promise.resolve(work(db));
    } finally {
      db.close();
    }
  };
  return {
    counts: (migrated) => read((db) => Object.fromEntries(TABLES.map((t) => [t, (db.prepare(countSql(t, migrated)).get() as { n: number }).n]))),
    ledger: () => read((db) => (db.prepare('SELECT version FROM schema_migrations ORDER BY version').all() as { version: number }[]).map((r) => r.version)),
    addLedgerRow: (version, name) => read((db) => void db.prepare('INSERT INTO schema_migrations (version, name, applied_at) VALUES (?, ?, ?)').run(version, name, Date.now())),
  };
}

function postgresPeek(url: string): Peek {
  return {
    counts: (migrated) =>
      withPg(url, async (c) => {
        const out: Record<string, number> = {};
        for (const t of TABLES) out[t] = Number((await c.query<{ n: string }>(countSql(t, migrated))).rows[0]?.n);
        return out;
      }),
    ledger: () => withPg(url, async (c) => (await c.query<{ version: number }>('SELECT version FROM schema_migrations ORDER BY version')).rows.map((r) => r.version)),
    addLedgerRow: (version, name) => withPg(url, async (c) => void (await c.query('INSERT INTO schema_migrations (version, name, applied_at) VALUES ($1, $2, $3)', [version, name, Date.now()]))),
  };
}

const gateways: ServeProcess[] = [];
const schemas: TestSchema[] = [];
afterAll(async () => {
  await Promise.all(gateways.map((g) => g.stop()));
  await Promise.all(schemas.map((s) => s.drop()));
});

/** Starts this version on the v0.1.0 database and checks that everything of v0.1.0 is there and served. */
async function upgradeAndCheck(peek: Peek, start: (mayExit?: boolean) => Promise<ServeProcess>): Promise<void> {
  const before = await peek.counts(false);
  expect(before).toEqual({ jobs: 7, api_keys: 2, endpoints: 2, usage: 2, job_minutes: 2 });
  expect(await peek.ledger()).toEqual([1, 2, 3, 4, 5, 6, 7]);

  const gw = await start();
  gateways.push(gw);
  const code = codeSchemaVersion();
  expect(code).toBeGreaterThan(7);
  expect(await (await fetch(`${gw.url}/healthz`)).json()).toMatchObject({ ok: true, schemaVersion: code });
  expect(await peek.ledger()).toEqual(Array.from({ length: code }, (_, i) => i + 1));
  // The admin key of the environment is one more key; nothing of v0.1.0 is gone.
  expect(await peek.counts(true)).toEqual({ ...before, api_keys: 3 });

  const client = gw.client(RUN_KEY); // a v0.1.0 key
  for (const [n, endpoint, status, output] of JOBS) {
    const job = await client.status(endpoint, jobId(n));
    expect(job, `job ${n}`).toMatchObject({ id: jobId(n), status });
    if (output !== undefined) expect(job.output, `job ${n}`).toEqual(output);
  }
  expect(await gw.admin.getEndpoint('v010-echo')).toMatchObject({ name: 'echo from v0.1.0', workersMax: 3, executionTimeoutMs: 600_000, scalerType: 'QUEUE_DELAY', maxAttempts: 3 });
  expect(await gw.admin.getEndpoint('v010-quiet')).toMatchObject({ scalerType: 'REQUEST_COUNT', rateLimits: { run: { per10s: 50 } } });
  const keys = await gw.admin.listKeys();
  expect(keys.map((k) => k.name)).toEqual(expect.arrayContaining(['v0.1.0 client', 'v0.1.0 worker']));
  const usage = await gw.admin.usage({ from: 0, groupBy: 'endpoint' });
  expect(usage.usage).toEqual([expect.objectContaining({ endpoint: 'v010-echo', jobs: 2 })]);

  // v0.1.0's worker key takes v0.1.0's queued jobs on a real worker.
  const worker = spawnOwned(process.execPath, [CLI, 'worker', ECHO, '--url', gw.url, '--endpoint', 'v010-echo', '--key', WORKER_KEY], { stdio: 'ignore' });
  const ran = await waitForJobs(client, 'v010-echo', [jobId(5), jobId(6)], 90_000);
  expect(ran.map((j) => [j.status, j.output])).toEqual([
    ['COMPLETED', { n: 5 }],
    ['COMPLETED', { n: 6 }],
  ]);
  worker.kill('SIGTERM');
  expect(await gw.stop()).toBe(0);

  // A database newer than this code is refused, naming both versions.
  await peek.addLedgerRow(code + 1, 'from_the_future');
  const refused = await start(true);
  gateways.push(refused);
  expect(refused.url).toBe('');
  expect(await refused.exited).not.toBe(0);
  expect(refused.output()).toMatch(new RegExp(`has schema version ${code + 1} \\(from_the_future\\), newer than this code knows \\(${code}\\); run a newer Gantry`));
}

describe('upgrade from v0.1.0', () => {
  it('SQLite: a v0.1.0 database migrates forward on start with every row intact; a newer one is refused', async () => {
    const dataDir = v010Sqlite(Date.now());
    await upgradeAndCheck(sqlitePeek(dataDir), (mayExit) => startGateway({ dataDir, mayExit: mayExit === true }));
  }, 240_000);

  it('PostgreSQL: a v0.1.0 schema migrates forward on start with every row intact; a newer one is refused', async () => {
    const schema = await v010Postgres(Date.now());
    schemas.push(schema);
    await upgradeAndCheck(postgresPeek(schema.url), (mayExit) => startGateway({ env: { DATABASE_URL: schema.url }, mayExit: mayExit === true }));
  }, 240_000);
});
