#!/usr/bin/env node
/**
 * Inputs of docs/scaling-model.md: Gantry on PostgreSQL with 1, 2 and 3 gateways sharing one
 * fresh database, under the end-to-end load (32 producers POST /run one job per call, spread over
 * the gateways; 4 workers per gateway taking batches of 50). Per job, over the whole run (load,
 * then drain, then stats flushed):
 *   - PostgreSQL CPU: /proc/<pid>/stat of the backends connected to the bench database
 *     (pg_stat_activity), plus the cluster's walwriter / checkpointer / bgwriter (shared with
 *     whatever else runs on the server: reported apart);
 *   - WAL bytes: pg_current_wal_lsn() difference (cluster-wide; an idle window of the same
 *     length before the run is measured and reported beside it);
 *   - rows touched: pg_stat_database of the bench database (inserted, updated, deleted,
 *     returned, fetched) and its commits;
 *   - round trips: every pg Client#query of the gateways (preload bench/compare/pg-count.mjs);
 *   - gateway CPU: /proc/<pid>/stat of each gateway; load-generator CPU.
 *
 * usage: npm run build && node bench/compare/scale-model.js [--gateways 1,2,3] [--seconds 8] [--json FILE]
 */
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { gantrySystem } from './gantry.js';
import { freshDatabase, loadAverage, pgAdmin, processCpuMs, sleep } from './lib.js';

const { values: flags } = parseArgs({
  options: {
    gateways: { type: 'string', default: '1,2,3' },
    seconds: { type: 'string', default: '8' },
    json: { type: 'string' },
  },
});
const COUNTS = flags.gateways.split(',').map(Number);
const SECONDS = Number(flags.seconds);
const log = (m) => process.stderr.write(`${m}\n`);

async function pgSnapshot(dbName) {
  const backends = (await pgAdmin('SELECT pid FROM pg_stat_activity WHERE datname = $1', [dbName])).rows.map((r) => r.pid);
  const aux = (await pgAdmin("SELECT pid FROM pg_stat_activity WHERE backend_type IN ('walwriter', 'checkpointer', 'background writer')")).rows.map((r) => r.pid);
  const stats = (await pgAdmin('SELECT xact_commit, tup_inserted, tup_updated, tup_deleted, tup_returned, tup_fetched FROM pg_stat_database WHERE datname = $1', [dbName])).rows[0];
  const lsn = (await pgAdmin('SELECT pg_current_wal_lsn() AS lsn')).rows[0].lsn;
  const cpu = (pids) => new Map(pids.map((p) => [p, processCpuMs(p)]));
  return { backends: cpu(backends), aux: cpu(aux), stats: Object.fromEntries(Object.entries(stats).map(([k, v]) => [k, Number(v)])), lsn };
}

/** CPU ms used between two snapshots' pid maps (a pid that appears later counts from 0). */
function cpuDelta(before, after) {
  let sum = 0;
  for (const [pid, ms] of after) if (Number.isFinite(ms)) sum += ms - (before.get(pid) ?? 0);
  return sum;
}

async function walBytes(fromLsn, toLsn) {
  return Number((await pgAdmin('SELECT pg_wal_lsn_diff($1, $2) AS d', [toLsn, fromLsn])).rows[0].d);
}

function readCount(file) {
  try {
    return Number(readFileSync(file, 'utf8')) || 0;
  } catch {
    return 0;
  }
}

async function measure(k) {
  const db = await freshDatabase('scale');
  const dir = mkdtempSync(join(os.tmpdir(), 'gantry-scale-'));
  const gateways = [];
  try {
    for (let i = 0; i < k; i++) {
      const countFile = join(dir, `rt-${i}`);
      const g = gantrySystem('postgres', {
        extraNodeArgs: ['--import', new URL('./pg-count.mjs', import.meta.url).pathname],
        env: { BENCH_PG_COUNT_FILE: countFile },
        shared: i === 0 ? { url: db.url, adminKey: `scale-model-admin-${process.pid}` } : { ...gateways[0].shared },
      });
      await g.start();
      g.countFile = countFile;
      gateways.push(g);
    }
    await sleep(1500); // idle: start-up writes flushed, LISTENs open
    const idle0 = await pgSnapshot(db.name);
    await sleep(SECONDS * 1000);
    const idle1 = await pgSnapshot(db.name);
    const idleWal = await walBytes(idle0.lsn, idle1.lsn);

    const before = await pgSnapshot(db.name);
    const rt0 = gateways.map((g) => readCount(g.countFile));
    const gw0 = gateways.map((g) => processCpuMs(g.pid));
    const lg0 = process.cpuUsage();
    const tLoad = performance.now();
    const load = await runLoad(gateways);
    // Idle backends flush their pending counts to pg_stat_database within 10 s (PostgreSQL 15).
    await sleep(11_000);
    const after = await pgSnapshot(db.name);
    const rt = gateways.reduce((s, g, i) => s + readCount(g.countFile) - rt0[i], 0);
    const gwCpu = gateways.reduce((s, g, i) => s + processCpuMs(g.pid) - gw0[i], 0);
    const lg = process.cpuUsage(lg0);
    const jobs = load.completedTotal;
    const per = (x) => Math.round((x / jobs) * 100) / 100;
    const statsDelta = Object.fromEntries(Object.keys(after.stats).map((key) => [key, per(after.stats[key] - before.stats[key])]));
    const wal = await walBytes(before.lsn, after.lsn);
    // Minus what the rest of the server wrote meanwhile, at the idle window's rate.
    const walNet = wal - (idleWal / SECONDS) * ((performance.now() - tLoad) / 1000);
    return {
      gateways: k,
      throughput: Math.round(load.windowRate),
      jobs,
      wallSeconds: Math.round(load.wallSeconds * 10) / 10,
      perJob: {
        pgBackendCpuUs: per(cpuDelta(before.backends, after.backends) * 1000),
        pgAuxCpuUs: per(cpuDelta(before.aux, after.aux) * 1000),
        walBytes: per(wal),
        walBytesNetOfIdle: per(walNet),
        roundTrips: per(rt),
        gatewayCpuUs: per(gwCpu * 1000),
        loadgenCpuUs: per((lg.user + lg.system) / 1000 * 1000),
        commits: statsDelta.xact_commit,
        rowsInserted: statsDelta.tup_inserted,
        rowsUpdated: statsDelta.tup_updated,
        rowsDeleted: statsDelta.tup_deleted,
        rowsReturned: statsDelta.tup_returned,
        rowsFetched: statsDelta.tup_fetched,
      },
      idleWalBytesPerSecond: Math.round(idleWal / SECONDS),
      loadAverage: loadAverage(),
    };
  } finally {
    for (const g of gateways) await g.stop();
    await db.drop();
    rmSync(dir, { recursive: true, force: true });
  }
}

/** 32 producers round-robin over the gateways, 4 batch workers per gateway; window of SECONDS. */
async function runLoad(gateways) {
  let submitted = 0;
  let done = 0;
  let producing = true;
  const t0 = performance.now();
  const workers = gateways.map((g) => g.workers('e2eb', { batch: 50, concurrency: 4, onDone: (n) => (done += n) }));
  const producer = async (p) => {
    const g = gateways[p % gateways.length];
    while (producing) {
      if (submitted - done >= 4000) {
        await sleep(1);
        continue;
      }
      submitted++;
      try {
        await g.submit('e2eb', submitted);
      } catch {
        submitted--;
        await sleep(5);
      }
    }
  };
  const producers = Array.from({ length: 32 }, (_, p) => producer(p));
  await sleep(1000);
  const d0 = done;
  const w0 = performance.now();
  await sleep(SECONDS * 1000);
  const windowRate = (done - d0) / ((performance.now() - w0) / 1000);
  producing = false;
  await Promise.all(producers);
  const limit = performance.now() + 60_000;
  while (done < submitted && performance.now() < limit) await sleep(20);
  for (const w of workers) await w.stop();
  return { windowRate, completedTotal: done, wallSeconds: (performance.now() - t0) / 1000 };
}

async function main() {
  const results = [];
  for (const k of COUNTS) {
    log(`${k} gateway(s): ${SECONDS} s idle, then ${SECONDS} s of load (load average ${loadAverage().join(' ')})`);
    const r = await measure(k);
    log(JSON.stringify(r));
    results.push(r);
  }
  const out = { command: `node bench/compare/scale-model.js ${process.argv.slice(2).join(' ')}`.trim(), date: new Date().toISOString(), cores: os.cpus().length, results };
  process.stdout.write(`${JSON.stringify(out, null, 1)}\n`);
  if (flags.json) writeFileSync(flags.json, `${JSON.stringify(out, null, 1)}\n`);
}

main().then(
  () => process.exit(0),
  (err) => {
    console.error(`scale-model: ${err instanceof Error ? err.stack : String(err)}`);
    process.exit(1);
  },
);
