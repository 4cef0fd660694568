// `gantry serve` as a process: SIGTERM and SIGINT exit 0 after the running job finishes and the
// open long-polls are answered; a database with a newer schema than the code makes it exit
// non-zero with a clear message (SQLite and PostgreSQL).
import { randomBytes } from 'node:crypto';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import Database from 'better-sqlite3';
import pg from 'pg';
import { describe, expect, it } from 'vitest';
import { eventually } from '../helpers/gantry.js';
import { newEndpoint, newKey, uniqueId, workerListed } from '../helpers/jobs.js';
import { createTestSchema } from '../helpers/postgres.js';
import { startGateway, type ServeProcess } from '../helpers/serve-process.js';
import { call } from '../http/http-helpers.js';

const ROOT = fileURLToPath(new URL('../..', import.meta.url));
const CLI = join(ROOT, 'dist/src/cli/main.js');
const ECHO = `node ${JSON.stringify(CLI)} worker ${JSON.stringify(join(ROOT, 'dist/examples/echo-worker.js'))}`;

/** A job-take long-poll of a hand-run worker, returned (not awaited) once the gateway lists the worker. */
async function parkedTake(s: ServeProcess, endpointId: string, workerKey: string): Promise<{ status: Promise<number> }> {
  const workerId = uniqueId('hand');
  const take = call(s.url, 'GET', `/v2/${endpointId}/job-take/${workerId}?job_in_progress=0`, { key: workerKey, rawAuth: true }).then((r) => r.status);
  await workerListed(s, endpointId, workerId);
  return { status: take };
}

describe('gantry serve and signals', () => {
  it('SIGTERM: the running job of a pool worker finishes, an open job-take is answered 204, exit 0', async () => {
    const s = await startGateway();
    await newEndpoint(s, { id: 'managed', workersMin: 1, idleTimeout: 60, worker: { command: ECHO } });
    await newEndpoint(s, { id: 'quiet' });
    const runKey = await newKey(s, ['run']);
    const workerKey = await newKey(s, ['worker']);
    const { id } = await s.client(runKey).run('managed', { input: { delayMs: 1_500, drained: true } });
    await eventually(async () => ((await s.client(runKey).status('managed', id)).status === 'IN_PROGRESS' ? true : undefined), 20_000, 'the job to run');
    const take = await parkedTake(s, 'quiet', workerKey);
    s.proc.kill('SIGTERM');
    expect(await take.status).toBe(204); // answered, not cut off
    expect(await s.exited).toBe(0);
    // Started again on the same data: the job ended COMPLETED before the gateway went away.
    const again = await startGateway({ dataDir: s.dataDir, adminKey: s.adminKey });
    expect(await again.client(runKey).status('managed', id)).toMatchObject({ id, status: 'COMPLETED', output: { delayMs: 1_500, drained: true } });
    expect(await again.stop()).toBe(0);
  }, 60_000);

  it('SIGINT: an open job-take is answered 204, exit 0', async () => {
    const s = await startGateway();
    await newEndpoint(s, { id: 'quiet' });
    const workerKey = await newKey(s, ['worker']);
    const take = await parkedTake(s, 'quiet', workerKey);
    s.proc.kill('SIGINT');
    expect(await take.status).toBe(204); // answered, not cut off
    expect(await s.exited).toBe(0);
  }, 30_000);
});

describe('a database with a newer schema than the code', () => {
  it('SQLite: gantry serve exits non-zero saying the schema is newer', async () => {
    const first = await startGateway();
    expect(await first.stop()).toBe(0);
    const db = new Database(join(first.dataDir, 'gantry.db'));
    db.prepare('INSERT INTO schema_migrations (version, name, applied_at) VALUES (?, ?, ?)').run(9_999, 'from_the_future', Date.now());
    db.close();
    const second = await startGateway({ dataDir: first.dataDir, mayExit: true });
    expect(second.url).toBe('');
    expect(await second.exited).not.toBe(0);
    expect(second.output()).toMatch(/schema version 9999 \(from_the_future\), newer than this code knows/);
  }, 60_000);

  it('PostgreSQL: gantry serve exits non-zero saying the schema is newer', async () => {
    const schema = await createTestSchema('newer');
    try {
      const env = { DATABASE_URL: schema.url, GANTRY_SECRET_KEY: randomBytes(32).toString('base64') };
      const first = await startGateway({ env });
      expect(await first.stop()).toBe(0);
      const client = new pg.Client({ connectionString: schema.url });
      await client.connect();
      await client.query('INSERT INTO schema_migrations (version, name, applied_at) VALUES ($1, $2, $3)', [9_999, 'from_the_future', Date.now()]);
      await client.end();
      const second = await startGateway({ env, mayExit: true });
      expect(second.url).toBe('');
      expect(await second.exited).not.toBe(0);
      expect(second.output()).toMatch(/schema version 9999 \(from_the_future\), newer than this code knows/);
    } finally {
      await schema.drop();
    }
  }, 60_000);
});
