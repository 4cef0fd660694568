// Large inputs kept as files beside the SQLite database (src/store/sqlite/input-files.ts; issue 22
// item 3, docs/scaling.md "Big bodies"), over real HTTP with a real worker process: the file is
// written before the job exists, /status and job-take give the input back whole, it outlives a
// restart, a backup holds its text, and it goes (by the sweep) only once its job is gone. On
// PostgreSQL every input stays in its table; the same round trip is checked there.
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { afterEach, describe, expect, it } from 'vitest';
import { backupSqlite, sqliteFileOf } from '../../src/store/sqlite/backup.js';
import type { SqliteConnection } from '../../src/store/sqlite/connection.js';
import { createInputFiles, INPUT_FILE_MIN_CHARS, inputFilesDirOf, SWEEP_MIN_AGE_MS } from '../../src/store/sqlite/input-files.js';
import { SqliteJobStore } from '../../src/store/sqlite/jobs.js';
import { eventually, startTestGantry, type TestGantry } from '../helpers/gantry.js';
import { call, uniqueId, type Json } from '../http/http-helpers.js';
import { PyWorker } from '../limits/py-worker.js';

/**
 * An input over the file threshold, with text outside ASCII so the round trip checks UTF-8, and
 * an emoji (a surrogate pair) whose two halves straddle the 1 MiB-character mark of its JSON
 * text, where the file is written in pieces (input-files.ts).
 */
function bigInput(tag: string): Json {
  const textAt = JSON.stringify({ tag, text: '' }).length - 2;
  const text = 'γ'.repeat(INPUT_FILE_MIN_CHARS - 1 - textAt) + '😀' + 'γάμμα δέλτα '.repeat(1_000);
  return { tag, text, numbers: [1, 2.5, -3] };
}

describe.each(['sqlite', 'postgres'] as const)('large inputs (%s store)', (backend) => {
  const cleanup: (() => Promise<void> | void)[] = [];
  afterEach(async () => {
    for (const step of cleanup.splice(0).reverse()) await step();
  });

  async function gateway(dataDir?: string): Promise<TestGantry> {
    const t = await startTestGantry({ jobTakeWaitMs: 1_000 }, { backend, ...(dataDir ? { dataDir } : {}) });
    let closed: Promise<void> | undefined;
    const close = (): Promise<void> => (closed ??= t.close());
    cleanup.push(close);
    return { ...t, close };
  }

  /** A gateway on a data directory of its own (removed after), with an endpoint and a `run`+`read` key. */
  async function gatewayWithEndpoint(): Promise<{ t: TestGantry; dataDir: string; ep: string; key: string }> {
    const dataDir = mkdtempSync(join(tmpdir(), 'gantry-inputs-'));
    cleanup.push(() => rmSync(dataDir, { recursive: true, force: true }));
    const t = await gateway(dataDir);
    const ep = uniqueId('big');
    await t.createEndpoint(ep);
    return { t, dataDir, ep, key: await t.createKey(['run', 'read']) };
  }

  async function submit(t: TestGantry, ep: string, key: string, input: Json, headers: Record<string, string> = {}): Promise<string> {
    const r = await call(t.url, 'POST', `/v2/${ep}/run`, { key, body: { input }, headers });
    expect(r.status, r.text).toBe(200);
    return r.json.id as string;
  }

  it('is handed whole to /status and to a worker, after a restart too; small inputs stay in the table', async () => {
    const { t: first, dataDir, ep, key } = await gatewayWithEndpoint();
    const input = bigInput('restart');
    const id = await submit(first, ep, key, input);
    const small = await submit(first, ep, key, { tag: 'small' });
    const files = (): string[] => (existsSync(inputFilesDirOf(sqliteFileOf(dataDir))) ? readdirSync(inputFilesDirOf(sqliteFileOf(dataDir))) : []);
    if (backend === 'sqlite') {
      expect(files()).toEqual([`${id}.json`]);
      expect(JSON.parse(readFileSync(join(inputFilesDirOf(sqliteFileOf(dataDir)), `${id}.json`), 'utf8'))).toEqual(input);
      const db = new Database(sqliteFileOf(dataDir), { readonly: true });
      const rows = db.prepare('SELECT job_id, input_json FROM job_inputs').all() as { job_id: string; input_json: string }[];
      db.close();
      expect(Object.fromEntries(rows.map((r) => [r.job_id, r.input_json]))).toEqual({ [id]: '', [small]: '{"tag":"small"}' });
    } else {
      expect(files()).toEqual([]);
    }
    expect((await call(first.url, 'GET', `/v2/${ep}/status/${id}`, { key })).json).toMatchObject({ status: 'IN_QUEUE', input });

    const second = backend === 'sqlite' ? (await first.close(), await gateway(dataDir)) : first;
    const worker = new PyWorker(second.workerEnv(ep, uniqueId('py')), ['--handler', 'echo']);
    cleanup.push(() => worker.kill());
    const job = await eventually(async () => {
      const r = await call(second.url, 'GET', `/v2/${ep}/status/${id}`, { key });
      return r.json.status === 'COMPLETED' ? r.json : undefined;
    }, 30_000, 'the large job to complete');
    expect(job.output).toEqual(input);
    expect((await eventually(async () => {
      const r = await call(second.url, 'GET', `/v2/${ep}/status/${small}`, { key });
      return r.json.status === 'COMPLETED' ? r.json : undefined;
    }, 30_000, 'the small job to complete')).output).toEqual({ tag: 'small' });
  });

  // Issue 22 item 3, round five: a large body's input comes from its JSON thread as bytes and is
  // stored and handed on as they are; they must be the canonical JSON text that was stored before
  // (JSON.stringify of the input, valid UTF-8) whatever the client wrote.
  it('is stored and handed to a worker as the canonical text, whether sent compact, with spaces or with bytes not UTF-8', async () => {
    const { t, dataDir, ep, key } = await gatewayWithEndpoint();
    const workerKey = await t.createKey(['worker']);
    const long = 'x'.repeat(INPUT_FILE_MIN_CHARS);
    const cases: { name: string; body: Buffer; stored: string }[] = [
      { name: 'compact', body: Buffer.from(JSON.stringify({ input: bigInput('compact') })), stored: JSON.stringify(bigInput('compact')) },
      { name: 'spaces', body: Buffer.from(JSON.stringify({ input: bigInput('spaces') }, null, 1)), stored: JSON.stringify(bigInput('spaces')) },
      // A byte that is no UTF-8 (0xff) inside a string: decoded as U+FFFD, as every text is.
      { name: 'not UTF-8', body: Buffer.concat([Buffer.from('{"input":{"s":"a'), Buffer.from([0xff]), Buffer.from(`${long}"}}`)]), stored: JSON.stringify({ s: `a\uFFFD${long}` }) },
    ];
    for (const c of cases) {
      const r = await call(t.url, 'POST', `/v2/${ep}/run`, { key, body: c.body });
      expect(r.status, `${c.name}: ${r.text.slice(0, 200)}`).toBe(200);
      const id = r.json.id as string;
      const stored = Buffer.from(c.stored);
      if (backend === 'sqlite') expect(readFileSync(join(inputFilesDirOf(sqliteFileOf(dataDir)), `${id}.json`)).equals(stored), c.name).toBe(true);
      expect((await call(t.url, 'GET', `/v2/${ep}/status/${id}`, { key })).json.input, c.name).toEqual(JSON.parse(c.stored));
      // job-take's answer: {"id":"…","input":<the stored bytes>,…}
      const taken = await fetch(`${t.url}/v2/${ep}/job-take/${uniqueId('w')}`, { headers: { authorization: `Bearer ${workerKey}` } });
      expect(taken.status, c.name).toBe(200);
      const answer = Buffer.from(await taken.arrayBuffer());
      const head = Buffer.from(`{"id":${JSON.stringify(id)},"input":`);
      expect(answer.subarray(0, head.length).equals(head), c.name).toBe(true);
      expect(answer.subarray(head.length, head.length + stored.length).equals(stored), c.name).toBe(true);
      expect([',', '}'], c.name).toContain(String.fromCharCode(answer[head.length + stored.length]!));
    }
  });

  it.runIf(backend === 'sqlite')('goes only once its job is gone (the sweep), and a backup holds its text', async () => {
    const t = await gateway();
    const [ep, other] = [uniqueId('big'), uniqueId('big')];
    await t.createEndpoint(ep);
    await t.createEndpoint(other);
    const key = await t.createKey(['run', 'read']);
    const input = bigInput('gone');
    const id = await submit(t, ep, key, input);
    const kept = await submit(t, other, key, bigInput('kept'));
    // An Idempotency-Key retried: one job, one file (the retry's file is deleted at once).
    const once = await submit(t, other, key, bigInput('once'), { 'idempotency-key': 'k-once' });
    expect(await submit(t, other, key, bigInput('once'), { 'idempotency-key': 'k-once' })).toBe(once);
    const file = sqliteFileOf(t.dataDir);
    const dir = inputFilesDirOf(file);
    expect(readdirSync(dir).sort()).toEqual([`${id}.json`, `${kept}.json`, `${once}.json`].sort());

    // The backup is one file: each input's text in its row.
    const backupDir = mkdtempSync(join(tmpdir(), 'gantry-inputs-backup-'));
    cleanup.push(() => rmSync(backupDir, { recursive: true, force: true }));
    await backupSqlite(file, join(backupDir, 'copy.db'));
    const copy = new Database(join(backupDir, 'copy.db'), { readonly: true });
    const text = copy.prepare('SELECT input_json FROM job_inputs WHERE job_id = ?').pluck(true).get(id) as string;
    copy.close();
    expect(JSON.parse(text)).toEqual(input);

    await t.admin.deleteEndpoint(ep);
    // A second sweep on the same file, with its clock past SWEEP_MIN_AGE_MS; and
    // an orphan written just now, which is too young to be swept.
    const orphan = '0190aaaa-0000-7000-8000-000000000000';
    writeFileSync(join(dir, `${orphan}.json`), '{}');
    // (The sweep reads rows only: a plain read-only connection stands in for the store's own.)
    const db = new Database(file, { readonly: true, timeout: 5_000 });
    cleanup.push(() => void db.close());
    let now = Date.now();
    const jobs = new SqliteJobStore({ q: (sql: string) => db.prepare(sql) } as unknown as SqliteConnection, createInputFiles(dir, () => now));
    expect(await jobs.sweepInputFiles()).toBe(0);
    now += SWEEP_MIN_AGE_MS + 5_000;
    // The endpoint's jobs are gone: their file goes; the live jobs' files stay.
    expect(await jobs.sweepInputFiles()).toBe(2);
    expect(readdirSync(dir).sort()).toEqual([`${kept}.json`, `${once}.json`].sort());
    expect((await call(t.url, 'GET', `/v2/${other}/status/${kept}`, { key })).json).toMatchObject({ input: bigInput('kept') });
  });
});
