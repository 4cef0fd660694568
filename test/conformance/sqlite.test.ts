import { mkdtempSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { pathToFileURL } from 'node:url';
import Database from 'better-sqlite3';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { listMigrations, migrationsDir } from '../../src/store/migrations.js';
import { IDEMPOTENCY_COLUMNS, JOB_COLUMNS, JOB_STREAM_COLUMNS } from '../../src/store/job-columns.js';
import { openSqlite, type SqliteConnection } from '../../src/store/sqlite/connection.js';
import { SqliteJobStore } from '../../src/store/sqlite/jobs.js';
import { createSqliteStore } from '../../src/store/sqlite/sqlite-store.js';
import type { Store } from '../../src/store/store.js';
import { initialJob, type NewJobArgs } from '../../src/jobs/transitions.js';
import type { JobRecord } from '../../src/model/records.js';
import { describeStoreConformance } from './store-conformance.js';

const T0 = 1_700_000_000_000;

/** A fresh folder per test; every store opened in it is closed by cleanup. */
function tempDb(): { file: string; open: () => Promise<Store>; cleanup: () => Promise<void> } {
  const dir = mkdtempSync(join(tmpdir(), 'gantry-store-'));
  const file = join(dir, 'nested', 'gantry.db');
  const stores: Store[] = [];
  return {
    file,
    open: async () => {
      const store = createSqliteStore({ file });
      stores.push(store);
      await store.migrate();
      return store;
    },
    cleanup: async () => {
      for (const store of stores) await store.close();
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

describeStoreConformance('sqlite', async () => {
  const db = tempDb();
  return { store: await db.open(), reopen: db.open, cleanup: db.cleanup };
});

function job(id: string, overrides: Partial<NewJobArgs> = {}): JobRecord {
  return initialJob({
    id,
    endpointId: 'ep',
    inputBytes: 2,
    webhook: null,
    s3Config: null,
    executionTimeoutMs: 60_000,
    lowPriority: false,
    ttlMs: 60_000,
    retentionMs: 60_000,
    maxAttempts: 3,
    sync: false,
    keyId: null,
    now: T0,
    ...overrides,
  });
}

describe('sqlite store', () => {
  let db: ReturnType<typeof tempDb>;
  let store: Store;

  beforeEach(async () => {
    db = tempDb();
    store = await db.open();
  });
  afterEach(async () => {
    await db.cleanup();
  });

  it('sets WAL, NORMAL sync and records the migration in the ledger', () => {
    const raw = new Database(db.file, { readonly: true });
    try {
      expect(raw.pragma('journal_mode', { simple: true })).toBe('wal');
      const ledger = raw.prepare('SELECT version, name FROM schema_migrations').all();
      expect(ledger).toEqual(listMigrations(migrationsDir('sqlite')).map((m) => ({ version: m.version, name: m.name })));
    } finally {
      raw.close();
    }
  });

  it('has the job columns of job-columns.ts, in that order, then the idempotency columns', () => {
    const raw = new Database(db.file, { readonly: true });
    try {
      const columns = (raw.pragma('table_info(jobs)') as { name: string }[]).map((c) => c.name);
      // In the order their migrations added them: idempotency (0008), stream (0009), input_bytes (0010), preemptions (0011), fair_at (0013), traceparent (0017).
      const jobColumns = JOB_COLUMNS.split(', ').filter((c) => c !== 'input_bytes' && c !== 'preemptions' && c !== 'traceparent');
      expect(columns.join(', ')).toBe([...jobColumns, ...IDEMPOTENCY_COLUMNS, ...JOB_STREAM_COLUMNS.sqlite, 'input_bytes', 'preemptions', 'fair_at', 'traceparent'].join(', '));
    } finally {
      raw.close();
    }
  });

  it('groups the writes of one turn: all resolve, later reads see them at once, data survives reopen', async () => {
    const writes: Promise<void>[] = [];
    for (let i = 0; i < 500; i++) writes.push(store.insertJob({ job: job(`j${i}`, { now: T0 + i }), inputJson: '{}' }));
    // Same turn, before any commit: the connection sees its own writes.
    const seen = store.getJob('j499');
    const claim = store.claimJobs({ endpointId: 'ep', workerId: 'w1', limit: 2, now: T0 + 1000 });
    await Promise.all(writes);
    expect((await seen)?.status).toBe('IN_QUEUE');
    expect((await claim).map((j) => j.id)).toEqual(['j0', 'j1']);

    await store.close();
    const again = await db.open();
    expect(await again.countJobs('ep')).toMatchObject({ inQueue: 498, inProgress: 2 });
  });

  it('resolves a write only once it is committed', async () => {
    const other = new Database(db.file, { readonly: true });
    try {
      const count = (): number => (other.prepare('SELECT COUNT(*) AS n FROM jobs').get() as { n: number }).n;
      const write = store.insertJob({ job: job('a'), inputJson: '{}' });
      expect(count()).toBe(0);
      await write;
      expect(count()).toBe(1);
    } finally {
      other.close();
    }
  });

  it('a failing write rejects only itself, not its neighbours in the batch', async () => {
    await store.insertJob({ job: job('dup'), inputJson: '{}' });
    const first = store.insertJob({ job: job('a'), inputJson: '{}' });
    const failing = store.insertJob({ job: job('dup'), inputJson: '{}' });
    const multi = store.createKey({ id: 'k1', name: 'k', hash: 'h', scopes: ['run'], endpoints: null, createdAt: T0, budgetUnits: null, budgetPeriod: null, maxConcurrentJobs: null, prefix: null, lastUsedAt: null, managed: false });
    const failingKey = store.createKey({ id: 'k2', name: 'k', hash: 'h', scopes: ['run'], endpoints: null, createdAt: T0, budgetUnits: null, budgetPeriod: null, maxConcurrentJobs: null, prefix: null, lastUsedAt: null, managed: false });
    const last = store.insertJob({ job: job('b'), inputJson: '{}' });
    const results = await Promise.allSettled([first, failing, multi, failingKey, last]);
    expect(results.map((r) => r.status)).toEqual(['fulfilled', 'rejected', 'fulfilled', 'rejected', 'fulfilled']);

    await store.close();
    const again = await db.open();
    expect((await again.listJobs({ endpointId: 'ep', limit: 10 })).map((j) => j.id).sort()).toEqual(['a', 'b', 'dup']);
    expect((await again.listKeys()).map((k) => k.id)).toEqual(['k1']);
  });

  it('a write of several statements that fails midway leaves nothing behind', async () => {
    await store.insertJob({ job: job('a'), inputJson: '{}' });
    await store.claimJobs({ endpointId: 'ep', workerId: 'w1', limit: 1, now: T0 + 1 });
    const append = (chunks: string[]) => store.appendStream({ id: 'a', workerId: 'w1', chunks, bytes: 1, maxBytes: 1e9 });
    const before = append(['1']);
    // The second chunk breaks NOT NULL after the first was inserted.
    const broken = append(['2', null as unknown as string]);
    const after = append(['3']);
    const results = await Promise.allSettled([before, broken, after]);
    expect(results.map((r) => r.status)).toEqual(['fulfilled', 'rejected', 'fulfilled']);
    expect((await store.readStream({ id: 'a', after: 0, limit: 10, maxBytes: 1e9 })).chunks.map((c) => c.chunk)).toEqual(['1', '3']);
  });

  it('migrating two stores on one file applies each migration once', async () => {
    const second = await db.open();
    await Promise.all([store.migrate(), second.migrate()]);
    const raw = new Database(db.file, { readonly: true });
    try {
      const n = (raw.prepare('SELECT COUNT(*) AS n FROM schema_migrations').get() as { n: number }).n;
      expect(n).toBe(listMigrations(migrationsDir('sqlite')).length);
    } finally {
      raw.close();
    }
  });

  it('close commits pending writes', async () => {
    const write = store.insertJob({ job: job('a'), inputJson: '{}' });
    await store.close();
    await write;
    const again = await db.open();
    expect((await again.getJob('a'))?.id).toBe('a');
  });

  it('rejects calls after close', async () => {
    await store.close();
    await expect(store.getJob('a')).rejects.toThrow(/closed/);
    await expect(store.insertJob({ job: job('a'), inputJson: '{}' })).rejects.toThrow(/closed/);
  });

  it('refuses a database whose schema is newer than the code', async () => {
    await store.close();
    const raw = new Database(db.file);
    raw.prepare('INSERT INTO schema_migrations (version, name, applied_at) VALUES (?, ?, ?)').run(9999, 'future', T0);
    raw.close();
    const newer = createSqliteStore({ file: db.file });
    try {
      await expect(newer.migrate()).rejects.toThrow(/schema version 9999 .*newer than this code/);
    } finally {
      await newer.close();
    }
  });

  it('serves the hot queries from indexes', () => {
    const raw = new Database(db.file, { readonly: true });
    try {
      const plan = (sql: string): string =>
        (raw.prepare(`EXPLAIN QUERY PLAN ${sql}`).all() as { detail: string }[]).map((r) => r.detail).join('\n');
      const claim = plan(`SELECT id FROM jobs WHERE endpoint_id = 'ep' AND status = 'IN_QUEUE' AND +deadline_at > 0
        ORDER BY fair_at, rowid LIMIT 5`);
      expect(claim).toMatch(/jobs_claim/);
      expect(claim).not.toMatch(/TEMP B-TREE FOR ORDER BY/);
      // The queue place of an insert (fairPlace): two seeks, no scan of the queue.
      expect(plan(`SELECT MAX(q.fair_at) + 1 FROM jobs q WHERE q.endpoint_id = 'ep' AND COALESCE(q.key_id, '') = COALESCE('k', '') AND q.status = 'IN_QUEUE'`)).toMatch(/jobs_fair/);
      expect(plan(`SELECT MIN(q.fair_at) FROM jobs q WHERE q.endpoint_id = 'ep' AND q.status = 'IN_QUEUE'`)).toMatch(/jobs_claim/);
      expect(plan(`SELECT id FROM jobs WHERE status = 'IN_PROGRESS' AND deadline_at <= 0 ORDER BY deadline_at LIMIT 5`)).toMatch(
        /jobs_deadline/,
      );
      expect(plan(`SELECT id FROM jobs WHERE worker_id = 'w' AND status = 'IN_PROGRESS'`)).toMatch(/jobs_worker/);
      expect(plan(`SELECT * FROM jobs WHERE webhook_next_at <= 0 ORDER BY webhook_next_at LIMIT 5`)).toMatch(/jobs_webhook_next/);
      expect(plan(`SELECT * FROM jobs WHERE endpoint_id = 'ep' ORDER BY created_at DESC LIMIT 5`)).toMatch(/jobs_endpoint_created/);
      expect(plan(`SELECT * FROM api_keys WHERE hash = 'h'`)).toMatch(/api_keys_hash/);
    } finally {
      raw.close();
    }
  });
});

describe('migration files', () => {
  let dir: string;
  beforeEach(() => {
    dir = mkdtempSync(join(tmpdir(), 'gantry-migrations-'));
  });
  afterEach(() => {
    rmSync(dir, { recursive: true, force: true });
  });

  it('finds migrations/ beside package.json with contiguous numbers', () => {
    const migrations = listMigrations(migrationsDir('sqlite'));
    expect(migrations[0]).toMatchObject({ version: 1, name: 'init' });
    expect(migrations.map((m) => m.version)).toEqual(migrations.map((_, i) => i + 1));
    // The same folder from the compiled module under dist/src/store/.
    const root = dirname(dirname(migrationsDir('sqlite')));
    const compiled = pathToFileURL(join(root, 'dist', 'src', 'store', 'migrations.js')).href;
    expect(migrationsDir('sqlite', compiled)).toBe(migrationsDir('sqlite'));
    expect(migrationsDir('postgres', compiled)).toBe(join(root, 'migrations', 'postgres'));
  });

  it('sorts by number and ignores other files', () => {
    writeFileSync(join(dir, '0002_more.sql'), 'SELECT 2;');
    writeFileSync(join(dir, '0001_init.sql'), 'SELECT 1;');
    writeFileSync(join(dir, 'README.md'), 'notes');
    expect(listMigrations(dir).map((m) => [m.version, m.name, m.sql])).toEqual([
      [1, 'init', 'SELECT 1;'],
      [2, 'more', 'SELECT 2;'],
    ]);
  });

  it('fails loudly on a gap, a repeat, a bad name or an empty folder', () => {
    expect(() => listMigrations(dir)).toThrow(/no migrations/);
    writeFileSync(join(dir, '0001_init.sql'), '');
    writeFileSync(join(dir, '0003_later.sql'), '');
    expect(() => listMigrations(dir)).toThrow(/without gaps/);
    rmSync(join(dir, '0003_later.sql'));
    writeFileSync(join(dir, '0001_again.sql'), '');
    expect(() => listMigrations(dir)).toThrow(/without gaps or repeats/);
    rmSync(join(dir, '0001_again.sql'));
    writeFileSync(join(dir, '2_bad.sql'), '');
    expect(() => listMigrations(dir)).toThrow(/NNNN_name/);
  });
});

describe('SQLite background checkpoint', () => {
  const LIMIT = 1_000_000;
  let dir: string;
  let file: string;
  let c: SqliteConnection;
  let jobs: SqliteJobStore;
  let n = 0;
  const walSize = (): number => statSync(`${file}-wal`).size;
  /** Writes about `bytes` of job rows, 200 jobs a turn (one group commit each). */
  const writeAbout = async (bytes: number): Promise<void> => {
    for (let written = 0; written < bytes; written += 200 * 600) {
      await Promise.all(
        Array.from({ length: 200 }, () =>
          jobs.insertJob({ job: initialJob({
            id: `j${++n}`, endpointId: 'ep', inputBytes: 512, webhook: null, s3Config: null,
            executionTimeoutMs: 600_000, lowPriority: false, ttlMs: 86_400_000, retentionMs: 1_800_000, maxAttempts: 3, sync: false, keyId: null, now: 1,
          }), inputJson: JSON.stringify({ pad: 'x'.repeat(500) }) }),
        ),
      );
    }
  };

  beforeEach(async () => {
    n = 0;
    dir = mkdtempSync(join(tmpdir(), 'gantry-ckpt-'));
    file = join(dir, 'gantry.db');
    // No timer: every checkpoint in these tests is one the test asks for, so nothing races the writes.
    c = openSqlite(file, { backgroundCheckpoint: true, checkpointIntervalMs: 0, walLimitBytes: LIMIT });
    c.migrate();
    // The migrations' own pages are checkpointed first: the WAL sizes below are the test's writes,
    // not a schema that grows with every migration (0022 took the WAL past LIMIT / 8 + the schema).
    await c.checkpointNow();
    jobs = new SqliteJobStore(c);
  });
  afterEach(async () => {
    await c.stopCheckpointer();
    c.close();
    rmSync(dir, { recursive: true, force: true });
  });

  it('writes no input to the WAL when a job is claimed and finished: it sits in job_inputs, written once (issue 22 item 3)', async () => {
    const inputJson = JSON.stringify({ pad: 'x'.repeat(3_000_000) });
    const job = initialJob({
      id: 'big', endpointId: 'ep', inputBytes: Buffer.byteLength(inputJson), webhook: null, s3Config: null,
      executionTimeoutMs: 600_000, lowPriority: false, ttlMs: 86_400_000, retentionMs: 1_800_000, maxAttempts: 3, sync: false, keyId: null, now: 1,
    });
    await jobs.insertJob({ job, inputJson });
    expect(walSize()).toBeGreaterThan(3_000_000);
    expect(await c.checkpointNow()).toEqual({ mode: 'TRUNCATE', busy: false, walBytes: 0 });
    const [claimed] = await jobs.claimJobs({ endpointId: 'ep', workerId: 'w1', limit: 1, now: 2 });
    expect(claimed?.inputJson).toBe(inputJson);
    expect(await jobs.finishJob({ id: 'big', workerId: 'w1', status: 'COMPLETED', outputJson: '{"ok":1}', error: null, now: 3 })).toMatchObject({ status: 'COMPLETED' });
    // Two commits of a few pages each (the jobs row and its index entries), not 3 MB of input twice.
    expect(walSize()).toBeLessThan(100_000);
  });

  it('never checkpoints inside a commit: without a step the WAL only grows', async () => {
    await writeAbout(3 * LIMIT);
    const before = walSize();
    await writeAbout(LIMIT);
    expect(before).toBeGreaterThan(2 * LIMIT);
    expect(walSize()).toBeGreaterThan(before);
  });

  it('truncates a WAL past its limit at the next step (issue 15), and writes go on after it', async () => {
    await writeAbout(3 * LIMIT);
    expect(walSize()).toBeGreaterThan(2 * LIMIT);
    const step = await c.checkpointNow();
    expect(step).toEqual({ mode: 'TRUNCATE', busy: false, walBytes: 0 });
    expect(walSize()).toBe(0);
    await writeAbout(LIMIT / 4);
    expect(await jobs.countJobs('ep')).toMatchObject({ inQueue: n });
  });

  it('below the limit a step is PASSIVE, and the WAL starts over at the next write instead of growing', async () => {
    // One turn of 200 jobs: its WAL (each job's row, its job_inputs row and their index entries) stays well under the limit.
    await writeAbout(LIMIT / 16);
    const size = walSize();
    expect(size).toBeLessThan(LIMIT);
    expect(await c.checkpointNow()).toEqual({ mode: 'PASSIVE', busy: false, walBytes: size });
    await writeAbout(LIMIT / 16);
    expect(walSize()).toBe(size);
  });

  it('cuts a WAL that starts over back to journal_size_limit at the next commit', async () => {
    expect(c.db.pragma('journal_size_limit', { simple: true })).toBe(LIMIT);
    await writeAbout(3 * LIMIT);
    // A PASSIVE checkpoint from elsewhere (as an older gateway's thread ran) copies every frame
    // but leaves the file at its size; the next commit starts the WAL over and cuts it.
    const other = new Database(file);
    try {
      other.pragma('wal_checkpoint(PASSIVE)');
    } finally {
      other.close();
    }
    expect(walSize()).toBeGreaterThan(2 * LIMIT);
    await writeAbout(1);
    expect(walSize()).toBeLessThanOrEqual(LIMIT);
  });
});
