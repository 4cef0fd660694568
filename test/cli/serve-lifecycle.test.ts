// `gantry serve` as a process: SIGTERM and SIGINT exit 0 after the running job finishes and the
// open long-polls are answered; a database with a newer schema than the code makes it exit
// non-zero with a clear message (SQLite and PostgreSQL).
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import Database from 'better-sqlite3';
import pg from 'pg';
import { afterAll, describe, expect, it } from 'vitest';
import { eventually } from '../helpers/gantry.js';
import { createTestSchema } from '../helpers/postgres.js';
import { startServe, type ServeProcess } from '../helpers/serve-process.js';
import { call, uniqueId, type Json } from '../http/http-helpers.js';

const ROOT = fileURLToPath(new URL('../..', import.meta.url));
const CLI = join(ROOT, 'dist/src/cli/main.js');
const ECHO = `node ${JSON.stringify(CLI)} worker ${JSON.stringify(join(ROOT, 'dist/examples/echo-worker.js'))}`;
const ADMIN_KEY = `serve-admin-${randomBytes(8).toString('hex')}`;
const dirs: string[] = [];

type Serve = ServeProcess;

function newDir(): string {
  const dir = mkdtempSync(join(tmpdir(), 'gantry-serve-'));
  dirs.push(dir);
  return dir;
}

/** Spawns `gantry serve` with this file's admin key. */
const serve = (env: Record<string, string>): Promise<Serve> => startServe(ADMIN_KEY, env);

const admin = async (s: Serve, path: string, body: unknown): Promise<Json> => {
  const r = await call(s.url, 'POST', `/admin/v1/${path}`, { key: ADMIN_KEY, body });
  if (r.status !== 200) throw new Error(`admin ${path}: ${r.status} ${r.text}`);
  return r.json;
};

/** A job-take long-poll of a hand-run worker, returned (not awaited) once the gateway lists the worker. */
async function parkedTake(s: Serve, endpointId: string, workerKey: string): Promise<{ status: Promise<number> }> {
  const workerId = uniqueId('hand');
  const take = call(s.url, 'GET', `/v2/${endpointId}/job-take/${workerId}?job_in_progress=0`, { key: workerKey, rawAuth: true }).then((r) => r.status);
  await eventually(async () => {
    const r = await call(s.url, 'GET', `/admin/v1/endpoints/${endpointId}/workers`, { key: ADMIN_KEY });
    return (r.json.workers as Json[] | undefined)?.some((w) => w.id === workerId) ? true : undefined;
  }, 10_000, 'the take to reach the gateway');
  return { status: take };
}

afterAll(() => {
  for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
});

describe('gantry serve and signals', () => {
  it('SIGTERM: the running job of a pool worker finishes, an open job-take is answered 204, exit 0', async () => {
    const dir = newDir();
    const s = await serve({ GANTRY_DATA_DIR: dir });
    await admin(s, 'endpoints', { id: 'managed', workersMin: 1, idleTimeout: 60, worker: { command: ECHO } });
    await admin(s, 'endpoints', { id: 'quiet' });
    const runKey = (await admin(s, 'keys', { name: 'run', scopes: ['run'] })).key as string;
    const workerKey = (await admin(s, 'keys', { name: 'w', scopes: ['worker'] })).key as string;
    const run = await call(s.url, 'POST', '/v2/managed/run', { key: runKey, body: { input: { delayMs: 1_500, drained: true } } });
    const id = run.json.id as string;
    await eventually(async () => ((await call(s.url, 'GET', `/v2/managed/status/${id}`, { key: runKey })).json.status === 'IN_PROGRESS' ? true : undefined), 20_000, 'the job to run');
    const take = await parkedTake(s, 'quiet', workerKey);
    s.proc.kill('SIGTERM');
    expect(await take.status).toBe(204); // answered, not cut off
    expect(await s.exited).toBe(0);
    // Started again on the same data: the job ended COMPLETED before the gateway went away.
    const again = await serve({ GANTRY_DATA_DIR: dir });
    try {
      const status = await call(again.url, 'GET', `/v2/managed/status/${id}`, { key: runKey });
      expect(status.json).toMatchObject({ id, status: 'COMPLETED', output: { delayMs: 1_500, drained: true } });
    } finally {
      again.proc.kill('SIGTERM');
      expect(await again.exited).toBe(0);
    }
  }, 60_000);

  it('SIGINT: an open job-take is answered 204, exit 0', async () => {
    const s = await serve({ GANTRY_DATA_DIR: newDir() });
    await admin(s, 'endpoints', { id: 'quiet' });
    const workerKey = (await admin(s, 'keys', { name: 'w', scopes: ['worker'] })).key as string;
    const take = await parkedTake(s, 'quiet', workerKey);
    s.proc.kill('SIGINT');
    expect(await take.status).toBe(204); // answered, not cut off
    expect(await s.exited).toBe(0);
  }, 30_000);
});

describe('a database with a newer schema than the code', () => {
  it('SQLite: gantry serve exits non-zero saying the schema is newer', async () => {
    const dir = newDir();
    const first = await serve({ GANTRY_DATA_DIR: dir });
    first.proc.kill('SIGTERM');
    expect(await first.exited).toBe(0);
    const db = new Database(join(dir, 'gantry.db'));
    db.prepare('INSERT INTO schema_migrations (version, name, applied_at) VALUES (?, ?, ?)').run(9_999, 'from_the_future', Date.now());
    db.close();
    const second = await serve({ GANTRY_DATA_DIR: dir });
    expect(second.url).toBe('');
    expect(await second.exited).not.toBe(0);
    expect(second.output()).toMatch(/schema version 9999 \(from_the_future\), newer than this code knows/);
  }, 60_000);

  it('PostgreSQL: gantry serve exits non-zero saying the schema is newer', async () => {
    const schema = await createTestSchema('newer');
    try {
      const env = { GANTRY_DATA_DIR: newDir(), DATABASE_URL: schema.url, GANTRY_SECRET_KEY: randomBytes(32).toString('base64') };
      const first = await serve(env);
      first.proc.kill('SIGTERM');
      expect(await first.exited).toBe(0);
      const client = new pg.Client({ connectionString: schema.url });
      await client.connect();
      await client.query('INSERT INTO schema_migrations (version, name, applied_at) VALUES ($1, $2, $3)', [9_999, 'from_the_future', Date.now()]);
      await client.end();
      const second = await serve(env);
      expect(second.url).toBe('');
      expect(await second.exited).not.toBe(0);
      expect(second.output()).toMatch(/schema version 9999 \(from_the_future\), newer than this code knows/);
    } finally {
      await schema.drop();
    }
  }, 60_000);
});
