#!/usr/bin/env node
/**
 * Gantry core benchmark: the four aims of the core issue, measured on this machine with the
 * load generator included (docs/benchmarks.md).
 *
 *   1. /run submissions per second                       aim ≥ 12,000/s
 *   2. end-to-end jobs per second (run → take → done)    aim ≥ 5,000 jobs/s
 *   3. runsync added latency over a zero-work handler    aim p50 ≤ 1 ms, p99 ≤ 5 ms
 *   4. /status reads per second                          aim ≥ 30,000/s
 *
 * The gateway runs in its own process (`node dist/src/cli/main.js serve`, fresh SQLite file in
 * a temp folder, rate limits off); this process is the load generator: node:http clients with
 * keep-alive agents and many requests in flight, against 127.0.0.1 only. Every scenario runs
 * for a fixed time after a warm-up, with a cap on its request count, and the script exits by
 * itself.
 *
 * usage: npm run build && node bench/core.js [--seconds N] [--json]
 *          [--scenarios run,e2e,runsync,status,status-wrk,http] [--batch N] [--profile DIR] [--in-process]
 *          [--backend sqlite|postgres]
 *
 *   --seconds N     measured seconds per scenario (default 5; 1..60), after a warm-up
 *   --json          print the results as one JSON document instead of the table
 *   --scenarios L   which scenarios to run, comma-separated: run, e2e, runsync, status,
 *                   status-wrk (the same reads with wrk as load generator, if installed), and
 *                   http (a reference without aim: GET /healthz throughput); default all
 *   --batch N       job-take-batch size of the end-to-end workers (default 50; 1..100)
 *   --profile DIR   run the gateway under `node --cpu-prof --cpu-prof-dir=DIR`
 *   --in-process    start the gateway in this process (import of dist/src/server.js) instead
 *                   of a child process: load generator and gateway then share one core
 *   --backend B     sqlite (default) or postgres: a fresh schema on DATABASE_URL, or on
 *                   postgres://postgres@127.0.0.1:5432/test, dropped at the end
 */
import { spawn, spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import http from 'node:http';
import net from 'node:net';
import os from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { setInterval, clearInterval } from 'node:timers';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '..');
const HOST = '127.0.0.1';
const ADMIN_KEY = `bench-admin-${process.pid}-${Date.now().toString(36)}`;

const AIMS = {
  run: { min: 12_000 },
  e2e: { min: 5_000 },
  runsyncP50: { max: 1 },
  runsyncP99: { max: 5 },
  status: { min: 30_000 },
};

/** Upper bounds on what one scenario may do, whatever --seconds says. */
const CAPS = { run: 400_000, e2e: 300_000, runsync: 200_000, baseline: 400_000, status: 3_000_000 };
const CLIENT_SOCKETS = 64;
const WORKER_SOCKETS = 64;
/** Concurrent loops of each load. */
const RUN_CONCURRENCY = 64;
const STATUS_CONCURRENCY = 64;
const E2E_PRODUCERS = 32;
const E2E_WORKERS = 4;
/** Producers pause while this many e2e jobs are submitted but not yet completed. */
const E2E_BACKLOG = 4_000;
const E2E_DRAIN_MS = 60_000;

// ---- command line ------------------------------------------------------------------------

const { values: flags } = parseArgs({
  options: {
    seconds: { type: 'string', default: '5' },
    json: { type: 'boolean', default: false },
    scenarios: { type: 'string', default: 'run,e2e,runsync,status,status-wrk,http' },
    batch: { type: 'string', default: '50' },
    profile: { type: 'string' },
    'in-process': { type: 'boolean', default: false },
    backend: { type: 'string', default: 'sqlite' },
    help: { type: 'boolean', short: 'h', default: false },
  },
});
if (flags.help) {
  const text = readFileSync(fileURLToPath(import.meta.url), 'utf8');
  console.log(text.slice(text.indexOf(' * usage:') + 3, text.indexOf(' */')).replace(/^ \* ?/gm, ''));
  process.exit(0);
}
const SECONDS = Number(flags.seconds);
if (!Number.isFinite(SECONDS) || SECONDS < 1 || SECONDS > 60) fail('--seconds must be a number from 1 to 60');
const BATCH = Number(flags.batch);
if (!Number.isInteger(BATCH) || BATCH < 1 || BATCH > 100) fail('--batch must be an integer from 1 to 100');
const SCENARIOS = flags.scenarios.split(',').map((s) => s.trim()).filter(Boolean);
for (const s of SCENARIOS) if (!['run', 'e2e', 'runsync', 'status', 'status-wrk', 'http'].includes(s)) fail(`unknown scenario ${s} (expected run, e2e, runsync, status, status-wrk, http)`);
if (!['sqlite', 'postgres'].includes(flags.backend)) fail('--backend must be sqlite or postgres');
const WARMUP_S = Math.min(1, SECONDS / 5);
const COMMAND = ['node', 'bench/core.js', ...process.argv.slice(2)].join(' ');

function fail(message) {
  console.error(`bench/core.js: ${message}`);
  process.exit(2);
}

function log(message) {
  if (!flags.json) process.stderr.write(`${message}\n`);
}

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

// ---- HTTP client ---------------------------------------------------------------------------

let PORT = 0;

function agent(maxSockets) {
  return new http.Agent({ keepAlive: true, maxSockets, maxFreeSockets: maxSockets, scheduling: 'lifo' });
}

/** One request; resolves `{status, text}` (never rejects on an HTTP status). */
function request(ag, method, path, key, body) {
  return new Promise((resolvePromise, reject) => {
    const headers = { authorization: `Bearer ${key}` };
    let payload;
    if (body !== undefined) {
      payload = typeof body === 'string' ? body : JSON.stringify(body);
      headers['content-type'] = 'application/json';
      headers['content-length'] = Buffer.byteLength(payload);
    }
    const req = http.request({ host: HOST, port: PORT, method, path, agent: ag, headers }, (res) => {
      let text = '';
      res.setEncoding('utf8');
      res.on('data', (chunk) => (text += chunk));
      res.on('end', () => resolvePromise({ status: res.statusCode, text }));
      res.on('error', reject);
    });
    req.on('error', reject);
    if (payload !== undefined) req.end(payload);
    else req.end();
  });
}

async function admin(path, body) {
  const res = await request(undefined, 'POST', `/admin/v1/${path}`, ADMIN_KEY, body);
  if (res.status !== 200) throw new Error(`admin ${path}: HTTP ${res.status} ${res.text}`);
  return JSON.parse(res.text);
}

function percentile(sorted, p) {
  if (sorted.length === 0) return NaN;
  return sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1))];
}

function distribution(samples) {
  const s = Float64Array.from(samples).sort();
  const sum = s.reduce((a, b) => a + b, 0);
  return {
    count: s.length,
    mean: sum / s.length,
    p50: percentile(s, 50),
    p90: percentile(s, 90),
    p99: percentile(s, 99),
    p999: percentile(s, 99.9),
    max: s[s.length - 1],
  };
}

// ---- CPU accounting ------------------------------------------------------------------------

const TICK_MS = 10; // USER_HZ is 100 on Linux

function gatewayCpuMs(pid) {
  if (!pid) return NaN;
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    return (Number(fields[11]) + Number(fields[12])) * TICK_MS;
  } catch {
    return NaN;
  }
}

function systemBusyMs() {
  try {
    const line = readFileSync('/proc/stat', 'utf8').split('\n')[0].trim().split(/\s+/).slice(1).map(Number);
    const idle = line[3] + (line[4] ?? 0);
    const total = line.slice(0, 8).reduce((a, b) => a + b, 0);
    return { busy: (total - idle) * TICK_MS, total: total * TICK_MS };
  } catch {
    return { busy: NaN, total: NaN };
  }
}

/** Starts a CPU meter; `stop()` gives the share of one core used by gateway, load generator and the rest of the machine. */
function cpuMeter(gatewayPid) {
  const t0 = performance.now();
  const g0 = gatewayPid ? gatewayCpuMs(gatewayPid) : 0;
  const l0 = process.cpuUsage();
  const s0 = systemBusyMs();
  return () => {
    const wall = performance.now() - t0;
    const l = process.cpuUsage(l0);
    const loadgen = (l.user + l.system) / 1000;
    const gateway = gatewayPid ? gatewayCpuMs(gatewayPid) - g0 : NaN;
    const s1 = systemBusyMs();
    const busy = s1.busy - s0.busy;
    const round = (x) => Math.round(x * 100) / 100;
    return {
      gatewayCores: round(gateway / wall),
      loadgenCores: round(loadgen / wall),
      otherCores: gatewayPid ? round(Math.max(0, busy - gateway - loadgen) / wall) : NaN,
      machineBusyCores: round(busy / wall),
    };
  };
}

// ---- gateway -------------------------------------------------------------------------------

function freePort() {
  return new Promise((resolvePromise, reject) => {
    const server = net.createServer();
    server.once('error', reject);
    server.listen(0, HOST, () => {
      const { port } = server.address();
      server.close(() => resolvePromise(port));
    });
  });
}

/** With --backend postgres: a schema of its own for this run (see docs/postgres.md). */
let PG_SCHEMA;
async function createPgSchema() {
  const { default: pg } = await import('pg');
  const server = process.env.DATABASE_URL || 'postgres://postgres@127.0.0.1:5432/test';
  const schema = `gantry_bench_${process.pid}`;
  const adminSql = async (sql) => {
    const client = new pg.Client({ connectionString: server });
    await client.connect();
    try {
      await client.query(sql);
    } finally {
      await client.end();
    }
  };
  await adminSql(`DROP SCHEMA IF EXISTS ${schema} CASCADE; CREATE SCHEMA ${schema}`);
  const url = new URL(server);
  url.searchParams.set('options', `-c search_path=${schema}`);
  return { url: url.toString(), drop: () => adminSql(`DROP SCHEMA IF EXISTS ${schema} CASCADE`) };
}

async function startGateway(dataDir) {
  PORT = await freePort();
  const env = {
    ...process.env,
    PORT: String(PORT),
    GANTRY_HOST: HOST,
    GANTRY_DATA_DIR: dataDir,
    GANTRY_ADMIN_KEY: ADMIN_KEY,
    GANTRY_RATE_LIMITS: 'off',
    GANTRY_LOG_LEVEL: 'warn',
    // Idle long-polls end quickly, so the scenarios can wind down their workers.
    GANTRY_JOB_TAKE_WAIT_MS: '2000',
    ...(PG_SCHEMA ? { DATABASE_URL: PG_SCHEMA.url } : {}),
  };
  if (flags['in-process']) {
    const serverModule = join(ROOT, 'dist/src/server.js');
    if (!existsSync(serverModule)) fail('dist/src/server.js is missing: run `npm run build` first');
    const { startGantry } = await import(serverModule);
    const gantry = await startGantry({ env });
    return { pid: 0, stop: () => gantry.close(), stderr: () => '' };
  }
  const main = join(ROOT, 'dist/src/cli/main.js');
  if (!existsSync(main)) fail('dist/src/cli/main.js is missing: run `npm run build` first');
  const nodeArgs = flags.profile ? ['--cpu-prof', `--cpu-prof-dir=${resolve(flags.profile)}`] : [];
  const child = spawn(process.execPath, [...nodeArgs, main, 'serve'], { cwd: ROOT, env, stdio: ['ignore', 'ignore', 'pipe'] });
  let stderr = '';
  child.stderr.setEncoding('utf8');
  child.stderr.on('data', (chunk) => {
    stderr += chunk;
    if (stderr.length > 20_000) stderr = stderr.slice(-10_000);
  });
  let exited = false;
  const exit = new Promise((r) => child.once('exit', (code, signal) => {
    exited = true;
    r({ code, signal });
  }));
  const deadline = Date.now() + 20_000;
  for (;;) {
    if (exited) throw new Error(`gateway exited at start-up:\n${stderr}`);
    try {
      const res = await request(undefined, 'GET', '/healthz', 'none');
      if (res.status === 200) break;
    } catch {
      // not listening yet
    }
    if (Date.now() > deadline) {
      child.kill('SIGKILL');
      throw new Error(`gateway did not answer /healthz within 20 s:\n${stderr}`);
    }
    await sleep(50);
  }
  return {
    pid: child.pid,
    stderr: () => stderr,
    async stop() {
      if (exited) return;
      child.kill('SIGTERM');
      const timer = setTimeout(() => child.kill('SIGKILL'), 10_000);
      await exit;
      clearTimeout(timer);
    },
  };
}

// ---- load shapes -----------------------------------------------------------------------------

/**
 * Runs `concurrency` loops of `op` for a warm-up and then `seconds` measured, stopping early
 * at `cap` operations. `op(i)` returns true for a success. Returns counts of the measured window.
 */
async function closedLoop({ concurrency, seconds, cap, op, gatewayPid }) {
  let phase = 'warmup';
  let ok = 0;
  let errors = 0;
  let started = 0;
  let firstError;
  const warmupEnd = performance.now() + WARMUP_S * 1000;
  let end = Infinity;
  let t0 = 0;
  let meter;
  const loop = async () => {
    for (;;) {
      const now = performance.now();
      if (phase === 'warmup' && now >= warmupEnd) {
        phase = 'measure';
        ok = 0;
        errors = 0;
        t0 = now;
        end = now + seconds * 1000;
        meter = cpuMeter(gatewayPid);
      }
      if (now >= end || started >= cap) return;
      started++;
      try {
        if (await op(started)) ok++;
        else errors++;
      } catch (err) {
        errors++;
        firstError ??= err;
      }
    }
  };
  await Promise.all(Array.from({ length: concurrency }, loop));
  const elapsed = (performance.now() - t0) / 1000;
  return { ok, errors, elapsed, perSecond: ok / elapsed, cpu: meter ? meter() : undefined, firstError: firstError && String(firstError) };
}

// ---- scenarios -----------------------------------------------------------------------------

/** 1. POST /run with a small input, 64 in flight. Keeps the ids for the /status scenario. */
async function scenarioRun(ctx) {
  const ag = agent(CLIENT_SOCKETS);
  const ids = [];
  const result = await closedLoop({
    concurrency: RUN_CONCURRENCY,
    seconds: SECONDS,
    cap: CAPS.run,
    gatewayPid: ctx.pid,
    op: async (i) => {
      const res = await request(ag, 'POST', '/v2/bench-run/run', ctx.runKey, `{"input":{"n":${i},"prompt":"a small job"}}`);
      if (res.status !== 200) throw new Error(`run: HTTP ${res.status} ${res.text}`);
      const body = JSON.parse(res.text);
      if (body.status !== 'IN_QUEUE') return false;
      if (ids.length < 200_000) ids.push(body.id);
      return true;
    },
  });
  ag.destroy();
  ctx.statusIds = ids;
  return {
    scenario: 'run',
    title: '/run submissions',
    figure: result.perSecond,
    unit: '/s',
    aim: `≥ ${AIMS.run.min.toLocaleString('en-US')} /s`,
    pass: result.perSecond >= AIMS.run.min && result.errors === 0,
    details: { accepted: result.ok, errors: result.errors, seconds: round(result.elapsed), concurrency: RUN_CONCURRENCY, cpu: result.cpu, firstError: result.firstError },
  };
}

/**
 * 2. End to end: producers POST /run (pausing while the backlog exceeds E2E_BACKLOG); workers
 * take batches with job-take-batch and post every job's job-done at once. The figure is the
 * number of jobs accepted as COMPLETED in the measured window. Afterwards producers stop, the
 * workers drain the queue, and every submitted job is checked: taken once, completed once,
 * COMPLETED with its output in /status, and the endpoint's health counts agree.
 */
async function scenarioE2e(ctx) {
  const clientAgent = agent(CLIENT_SOCKETS);
  const workerAgent = agent(WORKER_SOCKETS);
  const submittedIds = [];
  const takes = new Map(); // id → times taken
  const accepted = new Map(); // id → times job-done answered accepted:true
  let submitted = 0;
  let completed = 0;
  let windowCompleted = 0;
  let measuring = false;
  let producing = true;
  let working = true;
  let doneErrors = 0;
  let submitErrors = 0;
  let takeRequests = 0;
  let takenJobs = 0;
  let firstError;
  let meter;

  const producer = async () => {
    while (producing && submitted < CAPS.e2e) {
      if (submitted - completed >= E2E_BACKLOG) {
        await sleep(1);
        continue;
      }
      const n = submitted++;
      try {
        const res = await request(clientAgent, 'POST', '/v2/bench-e2e/run', ctx.runKey, `{"input":{"n":${n}}}`);
        if (res.status !== 200) throw new Error(`run: HTTP ${res.status} ${res.text}`);
        submittedIds.push(JSON.parse(res.text).id);
      } catch (err) {
        submitted--;
        submitErrors++;
        firstError ??= err;
        await sleep(5);
      }
    }
  };

  const finishOne = async (workerId, job) => {
    const body = `{"output":{"n":${job.input.n},"ok":true}}`;
    for (let attempt = 0; attempt < 3; attempt++) {
      try {
        const res = await request(workerAgent, 'POST', `/v2/bench-e2e/job-done/${workerId}/${job.id}?isStream=false`, ctx.workerKey, body);
        if (res.status !== 200) throw new Error(`job-done: HTTP ${res.status} ${res.text}`);
        const answer = JSON.parse(res.text);
        if (answer.accepted === true && answer.status === 'COMPLETED') {
          accepted.set(job.id, (accepted.get(job.id) ?? 0) + 1);
          completed++;
          if (measuring) windowCompleted++;
        }
        return;
      } catch (err) {
        doneErrors++;
        firstError ??= err;
      }
    }
  };

  const worker = async (w) => {
    const workerId = `bench-e2e-w${w}`;
    while (working) {
      let res;
      try {
        res = await request(workerAgent, 'GET', `/v2/bench-e2e/job-take-batch/${workerId}?batch_size=${BATCH}&job_in_progress=0`, ctx.workerKey);
      } catch (err) {
        if (!working) return;
        firstError ??= err;
        await sleep(5);
        continue;
      }
      takeRequests++;
      if (res.status === 204) continue;
      if (res.status !== 200) {
        firstError ??= new Error(`job-take-batch: HTTP ${res.status} ${res.text}`);
        await sleep(5);
        continue;
      }
      const jobs = JSON.parse(res.text);
      takenJobs += jobs.length;
      for (const job of jobs) takes.set(job.id, (takes.get(job.id) ?? 0) + 1);
      await Promise.all(jobs.map((job) => finishOne(workerId, job)));
    }
  };

  const workers = Array.from({ length: E2E_WORKERS }, (_, w) => worker(w));
  const producers = Array.from({ length: E2E_PRODUCERS }, producer);
  await sleep(WARMUP_S * 1000);
  measuring = true;
  meter = cpuMeter(ctx.pid);
  const t0 = performance.now();
  const takes0 = takeRequests;
  const taken0 = takenJobs;
  const deadline = t0 + SECONDS * 1000;
  while (performance.now() < deadline && submitted < CAPS.e2e) await sleep(20);
  measuring = false;
  const elapsed = (performance.now() - t0) / 1000;
  const cpu = meter();
  const windowTakes = takeRequests - takes0;
  const windowTaken = takenJobs - taken0;
  producing = false;
  await Promise.all(producers);

  // Drain: every submitted job must complete.
  const drainStart = performance.now();
  while (completed < submittedIds.length && performance.now() - drainStart < E2E_DRAIN_MS) await sleep(5);
  const drainSeconds = (performance.now() - drainStart) / 1000;
  working = false;
  // The queue is empty now: ending the workers' idle long-polls loses no job.
  workerAgent.destroy();
  await Promise.race([Promise.all(workers), sleep(3_000)]);
  clientAgent.destroy();

  // Verification through the API: health counts from the store, and /status of every job.
  const ag = agent(CLIENT_SOCKETS);
  const health = JSON.parse((await request(ag, 'GET', '/v2/bench-e2e/health', ctx.runKey)).text);
  const problems = [];
  if (health.jobs.completed !== submittedIds.length) problems.push(`health says ${health.jobs.completed} completed, ${submittedIds.length} were submitted`);
  if (health.jobs.inQueue !== 0 || health.jobs.inProgress !== 0 || health.jobs.failed !== 0) problems.push(`health: ${JSON.stringify(health.jobs)}`);
  let notOnce = 0;
  for (const id of submittedIds) if (takes.get(id) !== 1 || accepted.get(id) !== 1) notOnce++;
  if (notOnce > 0) problems.push(`${notOnce} jobs not taken and completed exactly once`);
  if (takes.size !== submittedIds.length) problems.push(`${takes.size} distinct jobs taken, ${submittedIds.length} submitted`);
  let badStatus = 0;
  let next = 0;
  const checker = async () => {
    while (next < submittedIds.length) {
      const id = submittedIds[next++];
      const res = await request(ag, 'GET', `/v2/bench-e2e/status/${id}`, ctx.runKey);
      const job = res.status === 200 ? JSON.parse(res.text) : undefined;
      if (!job || job.status !== 'COMPLETED' || job.output?.ok !== true) badStatus++;
    }
  };
  await Promise.all(Array.from({ length: 32 }, checker));
  ag.destroy();
  if (badStatus > 0) problems.push(`${badStatus} jobs not COMPLETED with their output in /status`);
  if (submitErrors + doneErrors > 0) problems.push(`${submitErrors} submit and ${doneErrors} job-done errors (first: ${firstError})`);

  const perSecond = windowCompleted / elapsed;
  return {
    scenario: 'e2e',
    title: `end-to-end jobs (batch ${BATCH})`,
    figure: perSecond,
    unit: 'jobs/s',
    aim: `≥ ${AIMS.e2e.min.toLocaleString('en-US')} jobs/s`,
    pass: perSecond >= AIMS.e2e.min && problems.length === 0,
    details: {
      completedInWindow: windowCompleted,
      seconds: round(elapsed),
      submittedTotal: submittedIds.length,
      verified: problems.length === 0,
      problems,
      meanBatch: round(windowTaken / Math.max(1, windowTakes)),
      producers: E2E_PRODUCERS,
      workers: E2E_WORKERS,
      backlogCap: E2E_BACKLOG,
      drainSeconds: round(drainSeconds),
      health: health.jobs,
      cpu,
    },
  };
}

/**
 * 3. runsync latency: one client calls runsync sequentially; one worker long-polls job-take and
 * answers each job at once. Baseline: sequential GET /healthz on the same kind of connection.
 */
async function scenarioRunsync(ctx) {
  const clientAgent = agent(1);
  const workerAgent = agent(2);
  let working = true;
  let workerErrors = 0;
  const worker = async () => {
    while (working) {
      try {
        const res = await request(workerAgent, 'GET', '/v2/bench-sync/job-take/bench-sync-w0?job_in_progress=0', ctx.workerKey);
        if (res.status === 204) continue;
        if (res.status !== 200) throw new Error(`job-take: HTTP ${res.status}`);
        const job = JSON.parse(res.text);
        const done = await request(workerAgent, 'POST', `/v2/bench-sync/job-done/bench-sync-w0/${job.id}?isStream=false`, ctx.workerKey, `{"output":${JSON.stringify(job.input)}}`);
        if (done.status !== 200) throw new Error(`job-done: HTTP ${done.status}`);
      } catch {
        if (!working) return;
        workerErrors++;
        await sleep(5);
      }
    }
  };
  const workerLoop = worker();
  await sleep(50); // the long-poll is open before the first runsync

  const timed = async (cap, once) => {
    const samples = [];
    const warmupEnd = performance.now() + WARMUP_S * 1000;
    while (performance.now() < warmupEnd) await once(-1);
    const meter = cpuMeter(ctx.pid);
    const end = performance.now() + SECONDS * 1000;
    let errors = 0;
    let i = 0;
    while (performance.now() < end && samples.length < cap) {
      const t = performance.now();
      if (await once(i++)) samples.push(performance.now() - t);
      else errors++;
    }
    return { dist: distribution(samples), errors, cpu: meter() };
  };

  const sync = await timed(CAPS.runsync, async (i) => {
    const res = await request(clientAgent, 'POST', '/v2/bench-sync/runsync', ctx.runKey, `{"input":{"n":${i}}}`);
    if (res.status !== 200) return false;
    const job = JSON.parse(res.text);
    return job.status === 'COMPLETED' && job.output?.n === i;
  });
  const base = await timed(CAPS.baseline, async () => (await request(clientAgent, 'GET', '/healthz', 'none')).status === 200);
  working = false;
  clientAgent.destroy();
  workerAgent.destroy();
  await Promise.race([workerLoop, sleep(3_000)]);

  const added = { p50: sync.dist.p50 - base.dist.p50, p99: sync.dist.p99 - base.dist.p99 };
  const ms = (x) => round(x, 3);
  const details = {
    runsync: mapValues(sync.dist, ms),
    baselineHealthz: mapValues(base.dist, ms),
    added: mapValues(added, ms),
    runsyncErrors: sync.errors,
    baselineErrors: base.errors,
    workerErrors,
    cpu: sync.cpu,
  };
  return [
    {
      scenario: 'runsync-p50',
      title: 'runsync added latency p50',
      figure: added.p50,
      unit: 'ms',
      aim: `≤ ${AIMS.runsyncP50.max} ms`,
      pass: added.p50 <= AIMS.runsyncP50.max && sync.errors === 0,
      details,
    },
    {
      scenario: 'runsync-p99',
      title: 'runsync added latency p99',
      figure: added.p99,
      unit: 'ms',
      aim: `≤ ${AIMS.runsyncP99.max} ms`,
      pass: added.p99 <= AIMS.runsyncP99.max && sync.errors === 0,
      details: { see: 'runsync-p50' },
    },
  ];
}

/** Reference, no aim: GET /healthz (routing and JSON only, no auth, no store), 64 in flight. */
async function scenarioHttp(ctx) {
  const ag = agent(CLIENT_SOCKETS);
  const result = await closedLoop({
    concurrency: STATUS_CONCURRENCY,
    seconds: SECONDS,
    cap: CAPS.status,
    gatewayPid: ctx.pid,
    op: async () => (await request(ag, 'GET', '/healthz', 'none')).status === 200,
  });
  ag.destroy();
  return {
    scenario: 'http',
    title: 'reference: GET /healthz',
    figure: result.perSecond,
    unit: '/s',
    aim: '(none: HTTP ceiling)',
    pass: true,
    details: { requests: result.ok, errors: result.errors, seconds: round(result.elapsed), concurrency: STATUS_CONCURRENCY, cpu: result.cpu },
  };
}

/** 4. GET /status/{id} of queued jobs (those of the /run scenario), 64 in flight. */
async function scenarioStatus(ctx) {
  let ids = ctx.statusIds ?? [];
  if (ids.length === 0) {
    const ag = agent(CLIENT_SOCKETS);
    let n = 0;
    ids = [];
    await Promise.all(
      Array.from({ length: 32 }, async () => {
        while (n < 10_000) {
          const res = await request(ag, 'POST', '/v2/bench-run/run', ctx.runKey, `{"input":{"n":${n++},"prompt":"a small job"}}`);
          ids.push(JSON.parse(res.text).id);
        }
      }),
    );
    ag.destroy();
    ctx.statusIds = ids;
  }
  const ag = agent(CLIENT_SOCKETS);
  let pick = 0;
  const result = await closedLoop({
    concurrency: STATUS_CONCURRENCY,
    seconds: SECONDS,
    cap: CAPS.status,
    gatewayPid: ctx.pid,
    op: async () => {
      // A stride through the ids: reads spread over the whole table, not one hot row.
      pick = (pick + 7919) % ids.length;
      const res = await request(ag, 'GET', `/v2/bench-run/status/${ids[pick]}`, ctx.runKey);
      if (res.status !== 200) throw new Error(`status: HTTP ${res.status} ${res.text}`);
      return res.text.startsWith('{"id":');
    },
  });
  ag.destroy();
  return {
    scenario: 'status',
    title: '/status reads',
    figure: result.perSecond,
    unit: '/s',
    aim: `≥ ${AIMS.status.min.toLocaleString('en-US')} /s`,
    pass: result.perSecond >= AIMS.status.min && result.errors === 0,
    details: { reads: result.ok, errors: result.errors, seconds: round(result.elapsed), concurrency: STATUS_CONCURRENCY, jobsInTable: ids.length, cpu: result.cpu, firstError: result.firstError },
  };
}

/**
 * 4b. The same reads with wrk (Debian package `wrk`) as the load generator, when it is
 * installed: a node:http client spends ~30 µs of CPU per request itself, so on 2 cores it caps
 * what it can measure; wrk, in C, leaves the gateway a whole core (docs/benchmarks.md,
 * "Results"). Same ids, same stride, 64 connections.
 */
async function scenarioStatusWrk(ctx) {
  if (spawnSync('wrk', ['-v']).error) {
    return { scenario: 'status-wrk', title: '/status reads (wrk)', figure: 0, unit: '/s', aim: `≥ ${AIMS.status.min.toLocaleString('en-US')} /s`, pass: false, details: { skipped: 'wrk is not installed (apt-get install wrk)' } };
  }
  const ids = ctx.statusIds ?? [];
  const dir = mkdtempSync(join(os.tmpdir(), 'gantry-wrk-'));
  const script = join(dir, 'status.lua');
  writeFileSync(
    script,
    `local ids = {${ids.map((id) => `"${id}"`).join(',')}}\n` +
      `local i = 0\n` +
      `request = function()\n  i = (i + 7919) % #ids\n  return wrk.format("GET", "/v2/bench-run/status/" .. ids[i + 1], {["Authorization"] = "Bearer ${ctx.runKey}"})\nend\n`,
  );
  const meter = cpuMeter(ctx.pid);
  // Asynchronous: with --in-process the gateway shares this event loop.
  const stdout = await new Promise((resolve, reject) => {
    const child = spawn('wrk', ['-t1', '-c64', `-d${SECONDS}s`, '-s', script, `http://${HOST}:${PORT}/`], { stdio: ['ignore', 'pipe', 'inherit'] });
    let text = '';
    child.stdout.on('data', (chunk) => (text += chunk));
    child.on('error', reject);
    child.on('close', () => resolve(text));
  });
  const out = { stdout };
  const cpu = meter();
  rmSync(dir, { recursive: true, force: true });
  const perSecond = Number(/Requests\/sec:\s+([\d.]+)/.exec(out.stdout ?? '')?.[1] ?? 0);
  const bad = Number(/Non-2xx or 3xx responses:\s+(\d+)/.exec(out.stdout ?? '')?.[1] ?? 0);
  return {
    scenario: 'status-wrk',
    title: '/status reads (wrk)',
    figure: perSecond,
    unit: '/s',
    aim: `≥ ${AIMS.status.min.toLocaleString('en-US')} /s`,
    pass: perSecond >= AIMS.status.min && bad === 0,
    details: { loadGenerator: 'wrk -t1 -c64', non2xx: bad, jobsInTable: ids.length, cpu },
  };
}

// ---- output --------------------------------------------------------------------------------

function round(x, digits = 2) {
  const f = 10 ** digits;
  return Math.round(x * f) / f;
}

function mapValues(object, fn) {
  return Object.fromEntries(Object.entries(object).map(([k, v]) => [k, fn(v)]));
}

function machine() {
  const cpus = os.cpus();
  return {
    node: process.version,
    cpu: cpus[0]?.model.trim() ?? 'unknown',
    cores: cpus.length,
    memoryGiB: round(os.totalmem() / 2 ** 30, 1),
    os: `${os.type()} ${os.release()}`,
    loadAverage: os.loadavg().map((x) => round(x)),
  };
}

const DURABILITY =
  'SQLite runs in WAL mode with synchronous=NORMAL: a COMMIT is not fsynced; the WAL is synced at ' +
  'checkpoints. A crash of the gateway process loses nothing acknowledged; a power loss or OS crash ' +
  'can roll back the last transactions acknowledged before it (never corrupts the file). ' +
  'synchronous=FULL would fsync each group commit (~150 µs here; one commit per event-loop turn, so ' +
  'it costs per turn, not per job).';

function formatFigure(r) {
  if (r.unit === 'ms') return `${r.figure.toFixed(3)} ms`;
  return `${Math.round(r.figure).toLocaleString('en-US')} ${r.unit}`;
}

function printTable(report) {
  const m = report.machine;
  const lines = [];
  lines.push('');
  lines.push(`Gantry core benchmark — node ${m.node}, ${m.cpu}, ${m.cores} cores, load average ${m.loadAverage.join(' ')}`);
  lines.push(`command: ${report.command}    (gateway: ${report.gateway}; ${report.seconds} s measured per scenario after ${WARMUP_S} s warm-up)`);
  lines.push('');
  const rows = [['scenario', 'figure', 'aim', 'result'], ...report.results.map((r) => [r.title, formatFigure(r), r.aim, r.pass ? 'pass' : 'MISS'])];
  const widths = rows[0].map((_, i) => Math.max(...rows.map((row) => row[i].length)));
  rows.forEach((row, i) => {
    lines.push(row.map((cell, j) => cell.padEnd(widths[j])).join('   ').trimEnd());
    if (i === 0) lines.push(widths.map((w) => '-'.repeat(w)).join('   '));
  });
  lines.push('');
  for (const r of report.results) {
    const d = r.details;
    if (d.see) continue;
    const perOp = d.gatewayCpuUsPerOp ? ` (gateway ${d.gatewayCpuUsPerOp} µs CPU per op)` : '';
    const cpu = d.cpu ? `cpu cores used: gateway ${d.cpu.gatewayCores}, load generator ${d.cpu.loadgenCores}, other processes ${d.cpu.otherCores}${perOp}` : '';
    if (r.scenario === 'run') lines.push(`/run: ${d.accepted} accepted in ${d.seconds} s, ${d.errors} errors, ${d.concurrency} in flight; ${cpu}`);
    if (r.scenario === 'e2e') {
      lines.push(`end to end: ${d.completedInWindow} completed in ${d.seconds} s; ${d.producers} producers, ${d.workers} workers, mean batch ${d.meanBatch}, backlog cap ${d.backlogCap}, drain ${d.drainSeconds} s; ${cpu}`);
      lines.push(`  verification of all ${d.submittedTotal} submitted jobs (taken once, completed once, /status COMPLETED, health counts): ${d.verified ? 'ok' : `FAILED: ${d.problems.join('; ')}`}`);
    }
    if (r.scenario === 'runsync-p50') {
      const f = (x) => `p50 ${x.p50} / p90 ${x.p90} / p99 ${x.p99} / p99.9 ${x.p999} / max ${x.max} ms over ${x.count}`;
      lines.push(`runsync round trip (sequential, 1 worker answering at once): ${f(d.runsync)}; ${d.runsyncErrors} errors`);
      lines.push(`baseline GET /healthz round trip (sequential):                ${f(d.baselineHealthz)}`);
      lines.push(`added by runsync: p50 ${d.added.p50} ms, p99 ${d.added.p99} ms; ${cpu}`);
    }
    if (r.scenario === 'http') lines.push(`reference GET /healthz: ${d.requests} in ${d.seconds} s, ${d.concurrency} in flight; ${cpu}`);
    if (r.scenario === 'status') lines.push(`/status: ${d.reads} reads in ${d.seconds} s over ${d.jobsInTable} jobs, ${d.errors} errors, ${d.concurrency} in flight; ${cpu}`);
  }
  lines.push('');
  lines.push(`durability: ${DURABILITY}`);
  lines.push('');
  process.stdout.write(`${lines.join('\n')}\n`);
}

// ---- main ----------------------------------------------------------------------------------

async function main() {
  const dataDir = mkdtempSync(join(os.tmpdir(), 'gantry-bench-'));
  let gateway;
  const hardStop = setTimeout(() => {
    console.error('bench/core.js: overall time limit reached, giving up');
    process.exit(1);
  }, (SECONDS * 6 + 180) * 1000);
  hardStop.unref();
  try {
    log(`starting gateway (${flags['in-process'] ? 'in this process' : 'child process'}), data in ${dataDir}`);
    if (flags.backend === 'postgres') PG_SCHEMA = await createPgSchema();
    gateway = await startGateway(dataDir);
    for (const id of ['bench-run', 'bench-e2e', 'bench-sync']) await admin('endpoints', { id, workersMax: 1000 });
    const ctx = {
      pid: gateway.pid,
      runKey: (await admin('keys', { name: 'bench run', scopes: ['run'] })).key,
      workerKey: (await admin('keys', { name: 'bench worker', scopes: ['worker'] })).key,
    };
    const results = [];
    const heartbeat = setInterval(() => {}, 1000); // keeps the loop alive between awaits
    try {
      for (const name of ['run', 'e2e', 'runsync', 'status', 'status-wrk', 'http']) {
        if (!SCENARIOS.includes(name)) continue;
        log(`scenario ${name}: ${WARMUP_S} s warm-up + ${SECONDS} s ...`);
        const out = await { run: scenarioRun, e2e: scenarioE2e, runsync: scenarioRunsync, status: scenarioStatus, 'status-wrk': scenarioStatusWrk, http: scenarioHttp }[name](ctx);
        for (const r of Array.isArray(out) ? out : [out]) {
          // Gateway CPU time per operation: what the figure would be with a whole core for the gateway.
          if (r.unit !== 'ms' && r.details.cpu && r.figure > 0) r.details.gatewayCpuUsPerOp = round((r.details.cpu.gatewayCores * 1e6) / r.figure, 1);
          results.push(r);
        }
      }
    } finally {
      clearInterval(heartbeat);
    }
    const report = {
      command: COMMAND,
      gateway: flags['in-process'] ? 'in process' : 'own process (node dist/src/cli/main.js serve)',
      backend: flags.backend,
      seconds: SECONDS,
      warmupSeconds: WARMUP_S,
      machine: machine(),
      results,
      allPass: results.every((r) => r.pass),
      durability: DURABILITY,
    };
    if (flags.json) process.stdout.write(`${JSON.stringify(report, null, 2)}\n`);
    else printTable(report);
  } finally {
    await gateway?.stop();
    if (gateway?.stderr()) log(`gateway stderr:\n${gateway.stderr().slice(-4000)}`);
    rmSync(dataDir, { recursive: true, force: true });
    await PG_SCHEMA?.drop();
    clearTimeout(hardStop);
  }
}

main().then(
  () => process.exit(0),
  (err) => {
    console.error(`bench/core.js: ${err instanceof Error ? err.stack : String(err)}`);
    process.exit(1);
  },
);
