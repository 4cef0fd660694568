#!/usr/bin/env node
/* global setInterval, clearInterval */
/**
 * Backlog drain (issue 15): queue N jobs on one endpoint through POST /run, then drain them with
 * W workers taking batches of B (GET job-take-batch) and posting one job-done per job, as the
 * worker protocol does. The gateway is its own process (`node <gantry>/dist/src/cli/main.js
 * serve`, GANTRY_RATE_LIMITS=off, GANTRY_QUEUE_LIMIT_FACTOR=100000), on a fresh SQLite folder or
 * a fresh PostgreSQL schema (dropped at the end).
 *
 * Prints the submit and drain rates, the gateway's RSS (every 10 s and the peak), the WAL file's
 * size (SQLite: largest seen and at the end) or the jobs table's live and dead tuples
 * (PostgreSQL: most dead seen and at the end), jobs handed out more than once and job-done
 * calls not accepted, and the machine's load average.
 *
 *   npm run build && node bench/backlog.js --backend sqlite --jobs 1000000
 *   node bench/backlog.js --backend postgres --jobs 200000 [--workers 4 --batch 100 --clients 64]
 *   node bench/backlog.js --gantry /path/to/other/checkout ...   # the same bench on other code
 *
 * PostgreSQL: DATABASE_URL or postgres://postgres@127.0.0.1:5432/test.
 */
import { spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, statSync } from 'node:fs';
import http from 'node:http';
import { loadavg, tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { parseArgs } from 'node:util';
import pg from 'pg';

const { values: o } = parseArgs({
  options: {
    backend: { type: 'string', default: 'sqlite' },
    jobs: { type: 'string', default: '100000' },
    workers: { type: 'string', default: '4' },
    batch: { type: 'string', default: '100' },
    clients: { type: 'string', default: '64' },
    gantry: { type: 'string', default: resolve(import.meta.dirname, '..') },
  },
});
const N = Number(o.jobs), W = Number(o.workers), BATCH = Number(o.batch), CLIENTS = Number(o.clients);
const ADMIN = `bench-admin-${process.pid}-key-0123456789`;
const PG_SERVER = process.env.DATABASE_URL || 'postgres://postgres@127.0.0.1:5432/test';
const schema = `gantry_backlog_${process.pid}`;
const dataDir = mkdtempSync(join(tmpdir(), 'gantry-backlog-'));
const pgc = o.backend === 'postgres' ? new pg.Client({ connectionString: PG_SERVER }) : undefined;
if (pgc) { await pgc.connect(); await pgc.query(`CREATE SCHEMA ${schema}`); }

const env = { ...process.env, PORT: '0', GANTRY_DATA_DIR: dataDir, GANTRY_ADMIN_KEY: ADMIN, GANTRY_RATE_LIMITS: 'off',
  GANTRY_QUEUE_LIMIT_FACTOR: '100000', GANTRY_LOG_LEVEL: 'info', GANTRY_IMAGE_WORKERS: 'off' };
if (pgc) env.DATABASE_URL = `${PG_SERVER}${PG_SERVER.includes('?') ? '&' : '?'}options=${encodeURIComponent(`-c search_path=${schema}`)}`;
else delete env.DATABASE_URL;
const gw = spawn(process.execPath, [join(o.gantry, 'dist/src/cli/main.js'), 'serve'], { env, stdio: ['ignore', 'pipe', 'pipe'] });
let log = '';
const lost = [];
const base = await new Promise((res, rej) => {
  gw.on('exit', (code) => rej(new Error(`gateway exited ${code}: ${log.slice(-2000)}`)));
  const onData = (chunk) => {
    log += chunk;
    for (const line of String(chunk).split('\n')) if (line.includes('workers lost')) lost.push(line);
    const m = /"url":"(http:[^"]+)"/.exec(log);
    if (m) res(m[1]);
  };
  gw.stdout.on('data', onData); gw.stderr.on('data', onData);
});
const U = new URL(base);
const agent = new http.Agent({ keepAlive: true, maxSockets: 256 });
function req(method, path, key, body, raw) {
  return new Promise((res, rej) => {
    const d = body === undefined ? undefined : JSON.stringify(body);
    const r = http.request({ agent, method, hostname: U.hostname, port: U.port, path,
      headers: { authorization: raw ? key : `Bearer ${key}`, ...(d ? { 'content-type': 'application/json', 'content-length': Buffer.byteLength(d) } : {}) } },
    (x) => { let t = ''; x.setEncoding('utf8'); x.on('data', (c) => (t += c)); x.on('end', () => res({ status: x.statusCode, text: t })); });
    r.on('error', rej); if (d) r.write(d); r.end();
  });
}

const rss = () => Number(/VmRSS:\s+(\d+)/.exec(readFileSync(`/proc/${gw.pid}/status`, 'utf8'))[1]) / 1024;
const walBytes = () => { try { return statSync(join(dataDir, 'gantry.db-wal')).size; } catch { return 0; } };
const tuples = async () => (await pgc.query(`SELECT n_live_tup::int AS live, n_dead_tup::int AS dead FROM pg_stat_user_tables WHERE schemaname = $1 AND relname = 'jobs'`, [schema])).rows[0] ?? { live: 0, dead: 0 };
const peak = { rss: 0, wal: 0, dead: 0 };
let phase = 'submit', queued = 0, done = 0;
const t0 = Date.now();
const sample = async () => {
  const r = rss(); peak.rss = Math.max(peak.rss, r);
  let store = '';
  if (pgc) { const t = await tuples(); peak.dead = Math.max(peak.dead, t.dead); store = `live=${t.live} dead=${t.dead}`; }
  else { const w = walBytes(); peak.wal = Math.max(peak.wal, w); store = `wal=${(w / 1e6).toFixed(1)}MB`; }
  console.log(`t=${((Date.now() - t0) / 1000).toFixed(0)}s ${phase} queued=${queued} done=${done} rss=${r.toFixed(0)}MB ${store} load=${loadavg()[0].toFixed(1)}`);
};
const tick = setInterval(() => void sample(), 10_000);

await req('POST', '/admin/v1/endpoints', ADMIN, { id: 'bl', workersMax: 1000 });
const wk = JSON.parse((await req('POST', '/admin/v1/keys', ADMIN, { name: 'w', scopes: ['worker'] })).text).key;
let sent = 0, refused = 0;
await Promise.all(Array.from({ length: CLIENTS }, async () => {
  while (sent < N) { sent++; const r = await req('POST', '/v2/bl/run', ADMIN, { input: { i: sent } }); if (r.status === 200) queued++; else refused++; }
}));
const submitS = (Date.now() - t0) / 1000;
const rssQueued = rss();
phase = 'drain';
const t1 = Date.now();
const seen = new Map(); let notAccepted = 0; let tDone = 0;
await Promise.all(Array.from({ length: W }, async (_, w) => {
  while (done < queued) {
    const r = await req('GET', `/v2/bl/job-take-batch/bw${w}?batch_size=${BATCH}&job_in_progress=0`, wk, undefined, true);
    if (r.status !== 200 || !r.text) continue;
    let jobs = JSON.parse(r.text); if (!Array.isArray(jobs)) jobs = [jobs];
    for (const j of jobs) seen.set(j.id, (seen.get(j.id) ?? 0) + 1);
    const rs = await Promise.all(jobs.map((j) => req('POST', `/v2/bl/job-done/bw${w}/${j.id}?isStream=false`, wk, { output: 1 }, true)));
    for (const x of rs) if (!x.text.includes('"accepted":true')) notAccepted++;
    done += jobs.length;
    if (done >= queued && tDone === 0) tDone = Date.now(); // the other workers may still be in a long-poll
  }
}));
const drainS = (tDone - t1) / 1000;
clearInterval(tick);
await sample();
const twice = [...seen.values()].filter((c) => c > 1).length;
const end = pgc ? await tuples() : { wal: walBytes() };
console.log(JSON.stringify({
  backend: o.backend, gantry: o.gantry, jobs: N, workers: W, batch: BATCH,
  submitPerS: Math.round(queued / submitS), refused, drainPerS: Math.round(done / drainS), drainS: Math.round(drainS),
  rssQueuedMB: Math.round(rssQueued), rssPeakMB: Math.round(peak.rss), rssEndMB: Math.round(rss()),
  ...(pgc ? { deadPeak: peak.dead, deadEnd: end.dead, liveEnd: end.live } : { walPeakMB: +(peak.wal / 1e6).toFixed(1), walEndMB: +(end.wal / 1e6).toFixed(1) }),
  handedOutTwice: twice, doneNotAccepted: notAccepted, workersLostLines: lost.length, load: loadavg().map((l) => +l.toFixed(1)),
}));
gw.kill('SIGTERM');
await new Promise((r) => gw.once('exit', r));
if (pgc) { await pgc.query(`DROP SCHEMA ${schema} CASCADE`); await pgc.end(); }
rmSync(dataDir, { recursive: true, force: true });
process.exit(0);
