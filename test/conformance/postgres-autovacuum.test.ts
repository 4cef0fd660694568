import pg from 'pg';
import { pino } from 'pino';
import { Writable } from 'node:stream';
import { afterEach, expect, it } from 'vitest';
import { openPostgresStore } from '../../src/store/postgres/postgres-store.js';
import { startTableCare } from '../../src/store/postgres/table-care.js';
import { eventually } from '../helpers/gantry.js';
import { createTestSchema, type TestSchema } from '../helpers/postgres.js';

let schema: TestSchema | undefined;
afterEach(async () => {
  await schema?.drop();
  schema = undefined;
});

it('warns at start when the server does not vacuum on its own (issue 15: dead job rows pile up)', async () => {
  schema = await createTestSchema('av');
  const lines: string[] = [];
  const logger = pino({ level: 'warn' }, new Writable({ write: (chunk: Buffer, _enc, done) => (lines.push(chunk.toString()), done()) }));
  const opened = openPostgresStore({ connectionString: schema.url }, logger);
  const client = new pg.Client({ connectionString: schema.url });
  await client.connect();
  try {
    const setting = (await client.query<{ autovacuum: string }>('SHOW autovacuum')).rows[0]?.autovacuum;
    await opened.store.migrate();
    const warned = lines.some((line) => line.includes('autovacuum is off'));
    expect(warned).toBe(setting === 'off');
  } finally {
    await client.end();
    await opened.store.close();
  }
});

it('vacuums and analyzes the jobs table past the threshold of changed rows (the care a server without autovacuum needs)', async () => {
  schema = await createTestSchema('care');
  const opened = openPostgresStore({ connectionString: schema.url }, pino({ level: 'silent' }));
  const client = new pg.Client({ connectionString: schema.url });
  await client.connect();
  let care: { stop(): void } | undefined;
  try {
    await opened.store.migrate();
    // Rows changed behind the planner's back: 300 inserted, then all deleted (300 dead).
    const lastAnalyze = async (): Promise<string | null> =>
      (await client.query<{ at: string | null }>(`SELECT last_analyze::text AS at FROM pg_stat_user_tables WHERE schemaname = current_schema() AND relname = 'jobs'`)).rows[0]?.at ?? null;
    expect(await lastAnalyze()).toBeNull();
    const { rows } = await client.query<{ n: string }>(`SELECT count(*)::text AS n FROM pg_stat_user_tables WHERE schemaname = current_schema() AND relname = 'jobs'`);
    expect(rows[0]?.n).toBe('1');
    await fillAndEmptyJobs(client, 300);
    const db = { query: async <T,>(sql: string, params?: unknown[]): Promise<T[]> => (await client.query(sql, params)).rows as T[] };
    care = startTableCare(db as never, pino({ level: 'silent' }), { everyMs: 50, threshold: 100 });
    await eventually(async () => ((await lastAnalyze()) !== null ? true : undefined), 10_000, 'the jobs table to be analyzed');
    const after = (await client.query<{ dead: number; vacuumed: string | null }>(`SELECT n_dead_tup::int AS dead, last_vacuum::text AS vacuumed FROM pg_stat_user_tables WHERE schemaname = current_schema() AND relname = 'jobs'`)).rows[0];
    expect(after?.vacuumed).not.toBeNull();
  } finally {
    care?.stop();
    await client.end();
    await opened.store.close();
  }
});

/** `count` job rows inserted and deleted again: as many changed and dead rows, through the columns every job has. */
async function fillAndEmptyJobs(client: pg.Client, count: number): Promise<void> {
  const columns = (await client.query<{ column_name: string; data_type: string; is_nullable: string; column_default: string | null; is_identity: string }>(
    `SELECT column_name, data_type, is_nullable, column_default, is_identity FROM information_schema.columns WHERE table_schema = current_schema() AND table_name = 'jobs'`,
  )).rows.filter((c) => c.is_nullable === 'NO' && c.column_default === null && c.is_identity !== 'YES');
  const value = (c: { column_name: string; data_type: string }): string => (c.column_name === 'id' ? `'care-' || g` : c.column_name === 'status' ? `'IN_QUEUE'` : /int|numeric|double|real/.test(c.data_type) ? '0' : c.data_type === 'boolean' ? 'false' : `'care'`);
  await client.query(`INSERT INTO jobs (${columns.map((c) => c.column_name).join(', ')}) SELECT ${columns.map(value).join(', ')} FROM generate_series(1, ${count}) g`);
  await client.query(`DELETE FROM jobs WHERE id LIKE 'care-%'`);
}
