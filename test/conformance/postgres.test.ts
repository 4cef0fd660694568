import pg from 'pg';
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { listMigrations, migrationsDir } from '../../src/store/migrations.js';
import { IDEMPOTENCY_COLUMNS, JOB_COLUMNS, JOB_STREAM_COLUMNS } from '../../src/store/job-columns.js';
import { createPostgresStore } from '../../src/store/postgres/postgres-store.js';
import type { Store } from '../../src/store/store.js';
import { initialJob, type NewJobArgs } from '../../src/jobs/transitions.js';
import type { JobRecord } from '../../src/model/records.js';
import { createTestSchema, type TestSchema } from '../helpers/postgres.js';
import { describeStoreConformance } from './store-conformance.js';

describeStoreConformance('postgres', async () => {
  const schema = await createTestSchema('conf');
  const stores: Store[] = [];
  const open = async (): Promise<Store> => {
    const store = createPostgresStore({ connectionString: schema.url, poolSize: 4 });
    stores.push(store);
    await store.migrate();
    return store;
  };
  return {
    store: await open(),
    reopen: open,
    cleanup: async () => {
      for (const store of stores) await store.close();
      await schema.drop();
    },
  };
});

const T0 = 1_700_000_000_000;

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

describe('postgres store', () => {
  let schema: TestSchema;
  let store: Store;
  let raw: pg.Client;
  const opened: Store[] = [];
  const open = (): Store => {
    const s = createPostgresStore({ connectionString: schema.url, poolSize: 4 });
    opened.push(s);
    return s;
  };

  beforeAll(async () => {
    schema = await createTestSchema('pgstore');
  });
  beforeEach(async () => {
    await schema.drop();
    schema = await createTestSchema('pgstore');
    store = open();
    await store.migrate();
    raw = new pg.Client({ connectionString: schema.url });
    await raw.connect();
  });
  afterEach(async () => {
    await raw.end();
    for (const s of opened.splice(0)) await s.close();
  });
  afterAll(async () => {
    await schema.drop();
  });

  it('records the migrations in the ledger; concurrent migrations apply each once', async () => {
    const others = [open(), open(), open()];
    await Promise.all(others.map((s) => s.migrate()));
    const ledger = (await raw.query('SELECT version, name FROM schema_migrations ORDER BY version')).rows;
    expect(ledger).toEqual(listMigrations(migrationsDir('postgres')).map((m) => ({ version: m.version, name: m.name })));
  });

  it('migrates two fresh stores at once (the advisory lock serialises them)', async () => {
    await schema.drop();
    schema = await createTestSchema('pgstore');
    const a = open();
    const b = open();
    await Promise.all([a.migrate(), b.migrate()]);
    const client = new pg.Client({ connectionString: schema.url });
    await client.connect();
    try {
      const n = await client.query<{ n: string }>('SELECT COUNT(*) AS n FROM schema_migrations');
      expect(Number(n.rows[0]?.n)).toBe(listMigrations(migrationsDir('postgres')).length);
    } finally {
      await client.end();
    }
  });

  it('has the job columns of job-columns.ts, in that order, then the idempotency columns, and seq', async () => {
    const columns = (
      await raw.query<{ column_name: string }>(
        `SELECT column_name FROM information_schema.columns WHERE table_schema = current_schema() AND table_name = 'jobs'
         ORDER BY ordinal_position`,
      )
    ).rows.map((row) => row.column_name);
    // In the order their migrations added them: idempotency (0008), stream (0009), input_bytes (0010), preemptions (0011), fair_at (0013), traceparent (0017).
    const jobColumns = JOB_COLUMNS.split(', ').filter((c) => c !== 'input_bytes' && c !== 'preemptions' && c !== 'traceparent');
    expect(columns.filter((column) => column !== 'seq').join(', ')).toBe([...jobColumns, ...IDEMPOTENCY_COLUMNS, ...JOB_STREAM_COLUMNS.postgres, 'input_bytes', 'preemptions', 'fair_at', 'traceparent'].join(', '));
    expect(columns).toContain('seq');
  });

  it('refuses a database whose schema is newer than the code', async () => {
    await raw.query('INSERT INTO schema_migrations (version, name, applied_at) VALUES (9999, $1, $2)', ['future', T0]);
    await expect(open().migrate()).rejects.toThrow(/schema version 9999 .*newer than this code/);
  });

  it('groups the submissions of one turn; a failing one rejects only itself', async () => {
    await store.insertJob({ job: job('dup'), inputJson: '{}' });
    const results = await Promise.allSettled([store.insertJob({ job: job('a'), inputJson: '{}' }), store.insertJob({ job: job('dup'), inputJson: '{}' }), store.insertJob({ job: job('b'), inputJson: '{}' })]);
    expect(results.map((r) => r.status)).toEqual(['fulfilled', 'rejected', 'fulfilled']);
    // Insertion order follows call order, so queue order does too.
    const writes = Array.from({ length: 300 }, (_, i) => store.insertJob({ job: job(`j${i}`, { endpointId: 'bulk' }), inputJson: '{}' }));
    await Promise.all(writes);
    const claimed = await store.claimJobs({ endpointId: 'bulk', workerId: 'w', limit: 300, now: T0 + 1 });
    expect(claimed.map((j) => j.id)).toEqual(Array.from({ length: 300 }, (_, i) => `j${i}`));
  });

  it('groups the results of one turn; a second result for the same job is refused', async () => {
    for (let i = 0; i < 50; i++) await store.insertJob({ job: job(`r${i}`), inputJson: '{}' });
    const claimed = await store.claimJobs({ endpointId: 'ep', workerId: 'w', limit: 50, now: T0 + 1 });
    const finish = (id: string) => store.finishJob({ id, workerId: 'w', status: 'COMPLETED', outputJson: `"${id}"`, error: null, now: T0 + 2 });
    const results = await Promise.all([...claimed.map((j) => finish(j.id)), finish('r0')]);
    expect(results.slice(0, 50).map((j) => j?.outputJson)).toEqual(claimed.map((j) => `"${j.id}"`));
    expect(results[50]).toBeUndefined();
  });

  it('concurrent claims never hand one job to two workers', async () => {
    await Promise.all(Array.from({ length: 200 }, (_, i) => store.insertJob({ job: job(`c${i}`), inputJson: '{}' })));
    const claims = await Promise.all(
      Array.from({ length: 20 }, (_, w) => store.claimJobs({ endpointId: 'ep', workerId: `w${w}`, limit: 15, now: T0 + 1 })),
    );
    const ids = claims.flat().map((j) => j.id);
    expect(new Set(ids).size).toBe(ids.length);
    expect(ids.length).toBe(200);
  });

  it('close sends the pending batch first', async () => {
    const write = store.insertJob({ job: job('late'), inputJson: '{}' });
    await store.close();
    await write;
    expect((await raw.query('SELECT id FROM jobs')).rows).toEqual([{ id: 'late' }]);
  });

  it('the hot table has its autovacuum settings and the claim query uses jobs_claim', async () => {
    const options = (await raw.query<{ reloptions: string[] }>(`SELECT reloptions FROM pg_class WHERE oid = 'jobs'::regclass`)).rows[0];
    expect(options?.reloptions).toEqual(expect.arrayContaining(['autovacuum_vacuum_scale_factor=0.02', 'fillfactor=80']));
    await Promise.all(Array.from({ length: 2000 }, (_, i) => store.insertJob({ job: job(`p${i}`, { endpointId: `ep${i % 20}` }), inputJson: '{}' })));
    await raw.query('ANALYZE jobs');
    const plan = (
      await raw.query<{ 'QUERY PLAN': string }>(
        `EXPLAIN SELECT id FROM jobs WHERE endpoint_id = 'ep3' AND status = 'IN_QUEUE' AND deadline_at > 0
         ORDER BY fair_at, seq LIMIT 5 FOR UPDATE SKIP LOCKED`,
      )
    ).rows
      .map((r) => r['QUERY PLAN'])
      .join('\n');
    expect(plan).toMatch(/jobs_claim/);
    expect(plan).not.toMatch(/Sort/);
    // The queue place of an insert (fairPlace): two index seeks, no scan of the queue.
    const explain = async (sql: string): Promise<string> =>
      (await raw.query<{ 'QUERY PLAN': string }>(`EXPLAIN ${sql}`)).rows.map((r) => r['QUERY PLAN']).join('\n');
    expect(await explain(`SELECT MAX(q.fair_at) + 1 FROM jobs q WHERE q.endpoint_id = 'ep3' AND COALESCE(q.key_id, '') = COALESCE('k', '') AND q.status = 'IN_QUEUE'`)).toMatch(/jobs_fair/);
    expect(await explain(`SELECT MIN(q.fair_at) FROM jobs q WHERE q.endpoint_id = 'ep3' AND q.status = 'IN_QUEUE'`)).toMatch(/jobs_claim/);
  });
});
