// Backups and restores (issue 26.4). SQLite: `gantry backup` of a real `gantry serve` while a real
// worker takes jobs and a client keeps submitting, `gantry restore` into a fresh data folder, and
// a gateway started on it finds every job acknowledged before the backup began, the keys, the
// endpoint and its webhook secret (a signed call verified with the original secret, opened with
// the same GANTRY_SECRET_KEY); the restore is refused while a gateway runs on the folder, and for
// files that are not a Gantry database of a schema this code can run. PostgreSQL: pg_dump of a
// gateway's schema, pg_restore into a new database, and a gateway on it serves the same data.
import { execFileSync } from 'node:child_process';
import { createHmac, randomBytes } from 'node:crypto';
import { copyFileSync, existsSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import Database from 'better-sqlite3';
import pg from 'pg';
import { afterAll, describe, expect, it } from 'vitest';
import type { GantryClient } from '../../src/sdk/client.js';
import { runCli } from '../cli/run-cli.js';
import { eventually } from '../helpers/gantry.js';
import { newEndpoint, newKey, waitForJobs } from '../helpers/jobs.js';
import { createTestSchema, testDatabaseUrl } from '../helpers/postgres.js';
import { spawnOwned } from '../helpers/processes.js';
import { scratchDir } from '../helpers/scratch.js';
import { CLI, startGateway, type ServeProcess } from '../helpers/serve-process.js';
import { startReceiver } from '../http/http-helpers.js';

const ECHO = fileURLToPath(new URL('../../dist/examples/echo-worker.js', import.meta.url));
const SECRET_KEY = randomBytes(32).toString('base64');
const WEBHOOK_SECRET = `whsec_${randomBytes(32).toString('base64')}`;

/** A real worker process (`gantry worker` running the echo example) on `endpointId`. */
function startEchoWorker(gw: ServeProcess, endpointId: string, key: string): { stop(): Promise<void> } {
  const proc = spawnOwned(process.execPath, [CLI, 'worker', ECHO, '--url', gw.url, '--endpoint', endpointId, '--key', key, '--concurrency', '4'], { stdio: 'ignore' });
  const exited = new Promise<void>((resolve) => proc.once('exit', () => resolve()));
  return {
    stop: async () => {
      proc.kill('SIGTERM');
      await exited;
    },
  };
}

/** Submits jobs (4 at a time) until stopped; `acked` lists each id once /run answered it. */
function keepSubmitting(client: GantryClient, endpointId: string): { acked: string[]; stop(): Promise<void> } {
  const acked: string[] = [];
  let running = true;
  const loops = Array.from({ length: 4 }, async () => {
    while (running) acked.push((await client.run(endpointId, { input: { n: acked.length, delayMs: 20 } })).id);
  });
  return {
    acked,
    stop: async () => {
      running = false;
      await Promise.all(loops);
    },
  };
}

/** A job's webhook call on `gw`, verified with WEBHOOK_SECRET as a receiver would. */
async function expectSignedWebhook(gw: ServeProcess, client: GantryClient, endpointId: string): Promise<void> {
  const hook = await startReceiver();
  try {
    const { id } = await client.run(endpointId, { input: { hook: true }, webhook: hook.url });
    const [delivery] = await eventually(async () => (hook.calls.length > 0 ? hook.calls : undefined), 60_000, 'webhook call');
    const h = delivery!.headers;
    const expected = createHmac('sha256', Buffer.from(WEBHOOK_SECRET.slice(6), 'base64'))
      .update(`${String(h['webhook-id'])}.${String(h['webhook-timestamp'])}.${delivery!.raw}`)
      .digest('base64');
    expect(delivery!.body).toMatchObject({ id, status: 'COMPLETED' });
    expect(h['webhook-signature']).toBe(`v1,${expected}`);
  } finally {
    await hook.close();
  }
  expect(gw.output()).not.toContain(WEBHOOK_SECRET.slice(6));
}

const gateways: ServeProcess[] = [];
afterAll(async () => {
  await Promise.all(gateways.map((g) => g.stop()));
});

async function gateway(options: Parameters<typeof startGateway>[0]): Promise<ServeProcess> {
  const gw = await startGateway(options);
  gateways.push(gw);
  return gw;
}

const ENV = { GANTRY_SECRET_KEY: SECRET_KEY, GANTRY_OUTBOUND_ALLOW: '127.0.0.1', GANTRY_JOB_TAKE_WAIT_MS: '2000' };

describe('gantry backup / restore (SQLite)', () => {
  it('backs up a live store while jobs flow; the restore serves every acknowledged job, key, endpoint and secret', async () => {
    const a = await gateway({ env: ENV });
    const ep = await newEndpoint(a, { webhookSecret: WEBHOOK_SECRET });
    const runKey = await newKey(a, ['run', 'read']);
    const worker = startEchoWorker(a, ep, await newKey(a, ['worker']));
    const client = a.client(runKey);

    // Some jobs finished before the backup, then a backup taken while more are submitted and run.
    const first = keepSubmitting(client, ep);
    await eventually(async () => (first.acked.length >= 40 ? true : undefined), 60_000, '40 jobs submitted');
    await first.stop();
    const finished = await waitForJobs(client, ep, [...first.acked], 90_000);
    expect(finished.every((j) => j.status === 'COMPLETED')).toBe(true);
    // A reader holding an old snapshot (a long report, say) keeps the gateway's checkpointer from
    // copying later commits into the file: until it ends they live only in the WAL, which a copy
    // of the file alone would miss.
    const reader = new Database(join(a.dataDir, 'gantry.db'), { readonly: true });
    reader.exec('BEGIN');
    reader.prepare('SELECT count(*) FROM jobs').get();
    const flow = keepSubmitting(client, ep);
    await eventually(async () => (flow.acked.length >= 20 ? true : undefined), 60_000, 'jobs flowing');
    const beforeBackup = [...first.acked, ...flow.acked];
    const file = join(scratchDir('backup'), 'gantry-backup.db');
    const backup = await runCli(['backup', file, '--data-dir', a.dataDir], { GANTRY_SECRET_KEY: SECRET_KEY });
    const duringBackup = flow.acked.length;
    await flow.stop();
    reader.exec('COMMIT');
    reader.close();
    expect(backup.stderr).toBe('');
    expect(backup).toMatchObject({ code: 0, stdout: expect.stringMatching(/^backed up .* schema version \d+, \d+ jobs/) as unknown });
    expect(flow.acked.length).toBeGreaterThan(20); // jobs were acknowledged while it ran, too
    expect(duringBackup).toBeGreaterThanOrEqual(20);

    // Restore is refused while a gateway runs on the folder, and into a busy one even by name.
    const busy = await runCli(['restore', file, '--data-dir', a.dataDir], {});
    expect(busy.code).toBe(1);
    expect(busy.stderr).toMatch(/gantry restore: .*gantry\.db is in use .*stop it, then restore/);
    await worker.stop();
    expect(await a.stop()).toBe(0);

    const fresh = scratchDir('restored');
    const restored = await runCli(['restore', file, '--data-dir', fresh], {});
    expect(restored).toMatchObject({ code: 0, stdout: expect.stringMatching(/^restored .* schema version \d+ \(this version: \d+\), \d+ jobs/) as unknown });
    const b = await gateway({ adminKey: a.adminKey, dataDir: fresh, env: ENV });
    const restoredClient = b.client(runKey); // a key created through the API, not the admin key of the env
    for (const id of beforeBackup) expect((await restoredClient.status(ep, id)).id).toBe(id);
    for (const job of finished) expect(await restoredClient.status(ep, job.id)).toMatchObject({ status: 'COMPLETED', output: job.output });
    expect((await b.admin.getEndpoint(ep)).webhookSigning).toBe(true);

    // The jobs still queued in the backup run on the restored gateway, and the secret still signs.
    const worker2 = startEchoWorker(b, ep, await newKey(b, ['worker']));
    const all = await waitForJobs(restoredClient, ep, beforeBackup, 120_000);
    expect(all.filter((j) => j.status !== 'COMPLETED')).toEqual([]);
    await expectSignedWebhook(b, restoredClient, ep);
    await worker2.stop();
  }, 300_000);

  it('refuses files that are not a Gantry database of a schema this code runs, and PostgreSQL stores', async () => {
    const dir = scratchDir('restore-bad');
    const target = join(dir, 'data');
    const text = join(dir, 'notes.txt');
    writeFileSync(text, 'not a database\n'.repeat(100));
    const other = join(dir, 'other.db');
    new Database(other).exec('CREATE TABLE t (a INTEGER); INSERT INTO t VALUES (1)');
    const cases: [string, RegExp][] = [
      [join(dir, 'missing.db'), /missing\.db does not exist/],
      [text, /notes\.txt is not a SQLite database/],
      [other, /other\.db is a SQLite database but not a Gantry one \(it has no schema_migrations table\)/],
    ];
    // A Gantry database of a newer schema: a real one (a stopped gateway's), with one more ledger row.
    const g = await gateway({ env: ENV });
    expect(await g.stop()).toBe(0);
    const newer = join(dir, 'newer.db');
    copyFileSync(join(g.dataDir, 'gantry.db'), newer);
    const db = new Database(newer);
    const top = (db.prepare('SELECT max(version) AS v FROM schema_migrations').get() as { v: number }).v;
    db.prepare('INSERT INTO schema_migrations (version, name, applied_at) VALUES (?, ?, ?)').run(top + 1, 'from_the_future', Date.now());
    db.close();
    cases.push([newer, new RegExp(`newer\\.db has schema version ${top + 1} \\(from_the_future\\), newer than this code knows \\(${top}\\)`)]);
    for (const [file, message] of cases) {
      const r = await runCli(['restore', file, '--data-dir', target], {});
      expect(r.code, file).toBe(1);
      expect(r.stderr, file).toMatch(message);
      expect(existsSync(join(target, 'gantry.db')), file).toBe(false);
    }
    const pgBackup = await runCli(['backup', join(dir, 'x.db')], { DATABASE_URL: 'postgres://u@127.0.0.1/db' });
    expect(pgBackup.code).toBe(2);
    expect(pgBackup.stderr).toMatch(/PostgreSQL store.*pg_dump -Fc/);
    expect((await runCli(['restore', newer], { DATABASE_URL: 'postgres://u@127.0.0.1/db' })).stderr).toMatch(/pg_restore/);
    // A newer database is refused by the gateway too, naming both versions.
    copyFileSync(newer, join(g.dataDir, 'gantry.db'));
    const again = await startGateway({ dataDir: g.dataDir, env: ENV, mayExit: true });
    expect(again.url).toBe('');
    expect(await again.exited).not.toBe(0);
    expect(again.output()).toMatch(/has schema version \d+ \(from_the_future\), newer than this code knows/);
  }, 120_000);
});

describe('pg_dump / pg_restore (PostgreSQL)', () => {
  it('a database restored from a dump of a gateway serves its jobs, keys, endpoints and secrets', async () => {
    const schema = await createTestSchema('backup');
    const server = await testDatabaseUrl();
    const database = `gantry_restore_${process.pid}_${randomBytes(4).toString('hex')}`;
    const admin = new pg.Client({ connectionString: server });
    await admin.connect();
    try {
      const a = await gateway({ env: { ...ENV, DATABASE_URL: schema.url } });
      const ep = await newEndpoint(a, { webhookSecret: WEBHOOK_SECRET });
      const runKey = await newKey(a, ['run', 'read']);
      const worker = startEchoWorker(a, ep, await newKey(a, ['worker']));
      const client = a.client(runKey);
      const done = await Promise.all(Array.from({ length: 10 }, (_, n) => client.runSync(ep, { input: { n } }, { timeoutMs: 60_000 })));
      expect(done.every((j) => j.status === 'COMPLETED')).toBe(true);
      await worker.stop();
      const queued = await Promise.all(Array.from({ length: 10 }, async (_, n) => (await client.run(ep, { input: { queued: n } })).id));
      expect(await a.stop()).toBe(0);

      // As docs/deploy.md says: a custom-format dump, restored into a new database.
      const dump = join(scratchDir('pg-dump'), 'gantry.dump');
      const serverUrl = new URL(server);
      const conn = ['-h', serverUrl.hostname, '-p', serverUrl.port || '5432', '-U', decodeURIComponent(serverUrl.username) || 'postgres'];
      execFileSync('pg_dump', [...conn, '-Fc', '-n', schema.schema, '-f', dump, serverUrl.pathname.slice(1)], { stdio: 'pipe' });
      await admin.query(`CREATE DATABASE ${database}`);
      execFileSync('pg_restore', [...conn, '--no-owner', '-d', database, dump], { stdio: 'pipe' });
      await schema.drop(); // the original is gone: only the restored database serves
      const restoredUrl = new URL(schema.url);
      restoredUrl.pathname = `/${database}`;

      const b = await gateway({ adminKey: a.adminKey, env: { ...ENV, DATABASE_URL: restoredUrl.toString() } });
      const restoredClient = b.client(runKey);
      for (const job of done) expect(await restoredClient.status(ep, job.id)).toMatchObject({ status: 'COMPLETED', output: job.output });
      const worker2 = startEchoWorker(b, ep, await newKey(b, ['worker']));
      expect((await waitForJobs(restoredClient, ep, queued, 120_000)).every((j) => j.status === 'COMPLETED')).toBe(true);
      await expectSignedWebhook(b, restoredClient, ep);
      await worker2.stop();
      expect(await b.stop()).toBe(0);
    } finally {
      await admin.query(`DROP DATABASE IF EXISTS ${database} WITH (FORCE)`);
      await admin.end();
      await schema.drop();
    }
  }, 300_000);
});
