#!/usr/bin/env node
/**
 * Big bodies (issue 22, item 3): many large `runsync` calls at once must not stall the rest of
 * the gateway. While N clients post M MB `runsync` bodies on one endpoint (a worker answering
 * them), a prober measures `GET /healthz` and another key's `POST /run` on another endpoint,
 * each asked again as soon as it answers (plus a pause); the gateway's peak RSS is read from
 * /proc (VmHWM) at the end, and the CPU its main thread and its whole process used over the
 * measured seconds (docs/benchmarks.md, "Big bodies").
 *
 * The gateway runs in its own process (`node dist/src/cli/main.js serve`, a fresh SQLite file in
 * a temp folder, rate limits off). The worker is a second process of this script: W loops of
 * job-take → job-done with a small output (it reads the job's id from the start of the body and
 * never parses the rest, so its CPU stays small beside the gateway's). The probes are a third
 * (a prober in the posters' process measured its own event loop too: writing 40 bodies of 19 MB
 * delays every callback there). This process posts the bodies (one Buffer built once).
 *
 * usage: npm run build && node bench/big-bodies.js [--clients 40] [--mb 19] [--seconds 30]
 *          [--workers 8] [--shape objects|string] [--json]
 *
 *   --clients N   concurrent runsync posters (default 40)
 *   --mb N        size of each runsync body in MB (default 19; the runsync limit is 20 MB)
 *   --seconds N   measured seconds (default 30)
 *   --workers N   concurrent job-take loops of the worker process (default 8)
 *   --shape S     objects: `input.rows` is an array of small objects (costly to parse; default);
 *                 string: `input.data` is one long string
 *   --json        print the results as one JSON document
 *   --profile DIR run the gateway under `node --cpu-prof --cpu-prof-dir=DIR` (stopped with SIGTERM)
 *   --node-args="A B"  more node flags for the gateway (split on spaces, e.g. =--trace-gc); its
 *                 standard output then goes to this script's standard error
 *   --clients-nice N  run the posters and the worker process at nice N (0–19; default 0): on a
 *                 small machine the load generator shares the gateway's cores, and at the same
 *                 priority its 40 uploads and the worker's reads take turns with the gateway's
 *                 event loop; at a lower one they stand for clients on other machines. The
 *                 probes stay at the gateway's priority.
 */
import { spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import http from 'node:http';
import net from 'node:net';
import os from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { clearInterval, setInterval } from 'node:timers';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '..');
const HOST = '127.0.0.1';
const SELF = fileURLToPath(import.meta.url);

const { values: flags } = parseArgs({
  options: {
    clients: { type: 'string', default: '40' },
    mb: { type: 'string', default: '19' },
    seconds: { type: 'string', default: '30' },
    workers: { type: 'string', default: '8' },
    shape: { type: 'string', default: 'objects' },
    json: { type: 'boolean', default: false },
    profile: { type: 'string' },
    'node-args': { type: 'string' },
    'clients-nice': { type: 'string', default: '0' },
    'worker-of': { type: 'string' },
    'probes-of': { type: 'string' },
    help: { type: 'boolean', short: 'h', default: false },
  },
});
if (flags.help) {
  const text = readFileSync(SELF, 'utf8');
  console.log(text.slice(text.indexOf(' * usage:') + 3, text.indexOf(' */')).replace(/^ \* ?/gm, ''));
  process.exit(0);
}

function intFlag(name, min, max) {
  const n = Number(flags[name]);
  if (!Number.isInteger(n) || n < min || n > max) {
    console.error(`bench/big-bodies.js: --${name} must be an integer from ${min} to ${max}`);
    process.exit(2);
  }
  return n;
}

// ---- HTTP ----------------------------------------------------------------------------------

/** One request; resolves with status, text and the time it took (ms). Never rejects: a failure is status 0. */
function request(agent, port, method, path, key, body, timeoutMs = 120_000) {
  return new Promise((resolvePromise) => {
    const started = performance.now();
    const headers = { ...(key ? { authorization: `Bearer ${key}` } : {}), ...(body !== undefined ? { 'content-type': 'application/json', 'content-length': body.length } : {}) };
    const req = http.request({ host: HOST, port, method, path, agent, headers, timeout: timeoutMs }, (res) => {
      const chunks = [];
      res.on('data', (c) => chunks.push(c));
      res.on('end', () => resolvePromise({ status: res.statusCode, text: Buffer.concat(chunks).toString('utf8'), ms: performance.now() - started }));
      res.on('error', (err) => resolvePromise({ status: 0, text: String(err), ms: performance.now() - started }));
    });
    req.on('timeout', () => req.destroy(new Error('timeout')));
    req.on('error', (err) => resolvePromise({ status: 0, text: err.code ?? String(err), ms: performance.now() - started }));
    req.end(body);
  });
}

// ---- the worker process --------------------------------------------------------------------

if (flags['worker-of'] !== undefined) {
  const { port, key, endpoint, loops } = JSON.parse(flags['worker-of']);
  const agent = new http.Agent({ keepAlive: true, maxSockets: loops * 2 });
  let stop = false;
  process.on('SIGTERM', () => (stop = true));
  const loop = async (i) => {
    while (!stop) {
      const taken = await request(agent, port, 'GET', `/v2/${endpoint}/job-take/bench-w${i}`, key);
      if (taken.status !== 200) {
        if (taken.status !== 204) await new Promise((r) => setTimeout(r, 100));
        continue;
      }
      // The id leads the job's JSON (`{"id":"…","input":…`): read it, leave the rest unparsed.
      const id = /^\{"id":"([^"]+)"/.exec(taken.text)?.[1];
      if (!id) continue;
      const output = Buffer.from(JSON.stringify({ output: { bytes: taken.text.length } }));
      await request(agent, port, 'POST', `/v2/${endpoint}/job-done/bench-w${i}/${id}`, key, output);
    }
  };
  await Promise.all(Array.from({ length: loops }, (_, i) => loop(i)));
  process.exit(0);
}

// ---- the probes' process -------------------------------------------------------------------

/** Asks `ask()` again and again until `until`, with `pauseMs` between answers. */
async function probe(until, pauseMs, ask) {
  const samples = [];
  while (performance.now() < until) {
    samples.push(await ask());
    await new Promise((r) => setTimeout(r, pauseMs));
  }
  return samples;
}

if (flags['probes-of'] !== undefined) {
  const { port, key, seconds } = JSON.parse(flags['probes-of']);
  const healthAgent = new http.Agent({ keepAlive: true, maxSockets: 1 });
  const otherAgent = new http.Agent({ keepAlive: true, maxSockets: 1 });
  const small = Buffer.from(JSON.stringify({ input: { hello: 'world' } }));
  const until = performance.now() + seconds * 1000;
  const [health, other] = await Promise.all([
    probe(until, 20, () => request(healthAgent, port, 'GET', '/healthz', '')),
    probe(until, 20, () => request(otherAgent, port, 'POST', '/v2/other/run', key, small)),
  ]);
  const slim = (samples) => samples.map(({ status, ms }) => ({ status, ms }));
  process.stdout.write(JSON.stringify({ health: slim(health), other: slim(other) }));
  process.exit(0);
}

// ---- measuring -----------------------------------------------------------------------------

function percentile(sorted, p) {
  if (sorted.length === 0) return null;
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))];
}

function summary(samples) {
  const ms = samples.map((s) => s.ms).sort((a, b) => a - b);
  const round = (x) => (x === null ? null : Math.round(x * 10) / 10);
  const statuses = {};
  for (const s of samples) statuses[s.status] = (statuses[s.status] ?? 0) + 1;
  return { count: ms.length, p50: round(percentile(ms, 50)), p90: round(percentile(ms, 90)), p99: round(percentile(ms, 99)), max: round(ms.at(-1) ?? null), statuses };
}

function procStatus(pid, field) {
  try {
    const m = new RegExp(`^${field}:\\s+(\\d+) kB`, 'm').exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
    return m ? Number(m[1]) * 1024 : null;
  } catch {
    return null;
  }
}

/** A body of about `mb` MB: `{"input":{"rows":[{…}, …]}}` or `{"input":{"data":"xxx…"}}`. */
function makeBody(mb, shape) {
  const bytes = mb * 1_000_000;
  if (shape === 'string') return Buffer.from(`{"input":{"data":"${'x'.repeat(bytes - 24)}"}}`);
  const rows = [];
  let size = 22;
  for (let i = 0; size < bytes - 100; i++) {
    const row = `{"i":${i},"name":"row-${i}","v":${(i % 997) / 997},"tags":["a","b${i % 13}"],"ok":${i % 2 === 0}}`;
    rows.push(row);
    size += row.length + 1;
  }
  return Buffer.from(`{"input":{"rows":[${rows.join(',')}]}}`);
}

/**
 * CPU the gateway used, in seconds: its main thread's (utime + stime of /proc/PID/task/PID/stat)
 * and time it waited for a core (schedstat), and its whole process's; null where /proc is not there.
 */
function cpuOf(pid) {
  try {
    const ticks = (stat) => stat.slice(stat.lastIndexOf(')') + 2).split(' ').slice(11, 13).reduce((a, b) => a + Number(b), 0) / 100;
    const wait = Number(readFileSync(`/proc/${pid}/task/${pid}/schedstat`, 'utf8').split(' ')[1]) / 1e9;
    return { main: ticks(readFileSync(`/proc/${pid}/task/${pid}/stat`, 'utf8')), mainWait: wait, process: ticks(readFileSync(`/proc/${pid}/stat`, 'utf8')) };
  } catch {
    return null;
  }
}

function freePort() {
  return new Promise((resolvePromise, reject) => {
    const srv = net.createServer();
    srv.once('error', reject);
    srv.listen(0, HOST, () => {
      const { port } = srv.address();
      srv.close(() => resolvePromise(port));
    });
  });
}

async function startGateway(port, dataDir, adminKey) {
  const env = { ...process.env, PORT: String(port), GANTRY_HOST: HOST, GANTRY_DATA_DIR: dataDir, GANTRY_ADMIN_KEY: adminKey, GANTRY_RATE_LIMITS: 'off', GANTRY_LOG_LEVEL: 'warn', GANTRY_IMAGE_WORKERS: 'off', GANTRY_WORKER_STOP_GRACE_MS: '0', GANTRY_JOB_TAKE_WAIT_MS: '1000' };
  const extra = flags['node-args']?.split(' ').filter((a) => a !== '') ?? [];
  const nodeArgs = [...(flags.profile ? ['--cpu-prof', `--cpu-prof-dir=${resolve(flags.profile)}`] : []), ...extra];
  const child = spawn(process.execPath, [...nodeArgs, join(ROOT, 'dist/src/cli/main.js'), 'serve'], { cwd: ROOT, env, stdio: ['ignore', extra.length > 0 ? 2 : 'ignore', 'inherit'] });
  const agent = new http.Agent({ keepAlive: false });
  const deadline = Date.now() + 60_000;
  for (;;) {
    if (child.exitCode !== null) throw new Error(`gateway exited with code ${child.exitCode}`);
    if ((await request(agent, port, 'GET', '/healthz', '')).status === 200) return child;
    if (Date.now() > deadline) throw new Error('gateway did not start within 60 s');
    await new Promise((r) => setTimeout(r, 100));
  }
}

/**
 * The gateway's event-loop delay since the last scrape, from its /metrics (prom-client's
 * `nodejs_eventloop_lag_*`, reset by each scrape), in ms: how long the gateway's own loop was
 * blocked, apart from the time its process waited for a core.
 */
async function loopLag(agent, port, adminKey) {
  const res = await request(agent, port, 'GET', '/metrics', adminKey);
  const value = (name) => {
    const m = new RegExp(`^nodejs_eventloop_lag_${name}_seconds ([0-9.e+-]+)$`, 'm').exec(res.text);
    return m ? Math.round(Number(m[1]) * 10_000) / 10 : null;
  };
  return { p50: value('p50'), p90: value('p90'), p99: value('p99'), max: value('max') };
}

/** Runs the probes in their own process for `seconds`; resolves with their samples. */
function runProbes(port, key, seconds) {
  return new Promise((resolvePromise, reject) => {
    const child = spawn(process.execPath, [SELF, '--probes-of', JSON.stringify({ port, key, seconds })], { stdio: ['ignore', 'pipe', 'inherit'] });
    const chunks = [];
    child.stdout.on('data', (c) => chunks.push(c));
    child.once('error', reject);
    child.once('exit', (code) => (code === 0 ? resolvePromise(JSON.parse(Buffer.concat(chunks).toString('utf8'))) : reject(new Error(`probes exited with code ${code}`))));
  });
}

async function main() {
  const clients = intFlag('clients', 1, 500);
  const mb = intFlag('mb', 1, 20);
  const seconds = intFlag('seconds', 1, 600);
  const workers = intFlag('workers', 1, 200);
  const clientsNice = intFlag('clients-nice', 0, 19);
  if (!['objects', 'string'].includes(flags.shape)) throw new Error('--shape must be objects or string');
  const command = ['node', 'bench/big-bodies.js', ...process.argv.slice(2)].join(' ');
  const port = await freePort();
  const dataDir = mkdtempSync(join(os.tmpdir(), 'gantry-bigbodies-'));
  const adminKey = `bench-admin-${process.pid}-${Date.now().toString(36)}`;
  const gateway = await startGateway(port, dataDir, adminKey);
  const admin = new http.Agent({ keepAlive: true, maxSockets: 1 });
  const post = async (path, body) => {
    const res = await request(admin, port, 'POST', `/admin/v1/${path}`, adminKey, Buffer.from(JSON.stringify(body)));
    if (res.status !== 200) throw new Error(`admin ${path}: HTTP ${res.status} ${res.text}`);
    return JSON.parse(res.text);
  };
  let worker;
  try {
    await post('endpoints', { id: 'big', workersMax: 1000 });
    await post('endpoints', { id: 'other', workersMax: 1000 });
    const bigKey = (await post('keys', { name: 'big run', scopes: ['run'], endpoints: ['big'] })).key;
    const otherKey = (await post('keys', { name: 'other run', scopes: ['run'], endpoints: ['other'] })).key;
    const workerKey = (await post('keys', { name: 'big worker', scopes: ['worker'], endpoints: ['big'] })).key;
    const body = makeBody(mb, flags.shape);
    worker = spawn(process.execPath, [SELF, '--worker-of', JSON.stringify({ port, key: workerKey, endpoint: 'big', loops: workers })], { stdio: ['ignore', 'inherit', 'inherit'] });
    const log = (m) => (flags.json ? undefined : process.stderr.write(`${m}\n`));
    log(`gateway pid ${gateway.pid}; ${clients} clients × ${(body.length / 1e6).toFixed(1)} MB runsync (${flags.shape}), ${workers} worker loops, ${seconds} s; node ${process.version}; ${os.cpus().length} CPUs; load ${os.loadavg().map((l) => l.toFixed(2)).join(' ')}`);
    const rssBefore = procStatus(gateway.pid, 'VmRSS');
    const bigAgent = new http.Agent({ keepAlive: true, maxSockets: clients });
    await loopLag(admin, port, adminKey);
    const cpuBefore = cpuOf(gateway.pid);
    const started = performance.now();
    const until = started + seconds * 1000;
    let rssMax = 0;
    const sampler = setInterval(() => (rssMax = Math.max(rssMax, procStatus(gateway.pid, 'VmRSS') ?? 0)), 100);
    const big = [];
    const posters = Array.from({ length: clients }, async () => {
      while (performance.now() < until) big.push(await request(bigAgent, port, 'POST', '/v2/big/runsync?wait=120000', bigKey, body));
    });
    const probes = runProbes(port, otherKey, seconds);
    if (clientsNice > 0) {
      os.setPriority(worker.pid, clientsNice);
      os.setPriority(clientsNice);
    }
    const { health, other } = await probes;
    const gatewayLoopLag = await loopLag(admin, port, adminKey);
    const cpuAfter = cpuOf(gateway.pid);
    await Promise.all(posters);
    clearInterval(sampler);
    const elapsed = (performance.now() - started) / 1000;
    const completed = big.filter((r) => r.status === 200 && r.text.includes('"COMPLETED"')).length;
    const result = {
      command,
      machine: { node: process.version, cpus: os.cpus().length, cpu: os.cpus()[0]?.model ?? '', loadAverage: os.loadavg().map((l) => Math.round(l * 100) / 100) },
      clients,
      bodyMB: Math.round(body.length / 1e5) / 10,
      shape: flags.shape,
      clientsNice,
      seconds: Math.round(elapsed * 10) / 10,
      healthz: summary(health),
      otherRun: summary(other),
      bigRunsync: { ...summary(big), completed, completedPerSecond: Math.round((completed / elapsed) * 10) / 10 },
      gatewayLoopLagMs: gatewayLoopLag,
      // Over the measured seconds: CPU seconds of the gateway's main thread, the seconds it waited for a core, its whole process's.
      gatewayCpuS: cpuBefore && cpuAfter ? Object.fromEntries(Object.keys(cpuBefore).map((k) => [k, Math.round((cpuAfter[k] - cpuBefore[k]) * 100) / 100])) : null,
      gatewayRss: { beforeMB: Math.round((rssBefore ?? 0) / 1e6), sampledMaxMB: Math.round(rssMax / 1e6), peakMB: Math.round((procStatus(gateway.pid, 'VmHWM') ?? 0) / 1e6) },
    };
    if (flags.json) console.log(JSON.stringify(result, null, 2));
    else {
      const line = (name, s) => `${name.padEnd(22)} n=${String(s.count).padStart(5)}  p50 ${s.p50} ms  p90 ${s.p90} ms  p99 ${s.p99} ms  max ${s.max} ms  ${JSON.stringify(s.statuses)}`;
      console.log(`${command}\n${line('GET /healthz', result.healthz)}\n${line('other key POST /run', result.otherRun)}\n${line('big runsync', result.bigRunsync)}`);
      console.log(`gateway event-loop delay (its /metrics): p50 ${gatewayLoopLag.p50} ms  p90 ${gatewayLoopLag.p90} ms  p99 ${gatewayLoopLag.p99} ms  max ${gatewayLoopLag.max} ms`);
      if (result.gatewayCpuS) console.log(`gateway CPU over the measured seconds: main thread ${result.gatewayCpuS.main} s (waited ${result.gatewayCpuS.mainWait} s for a core), process ${result.gatewayCpuS.process} s`);
      console.log(`big runsync completed ${completed} (${result.bigRunsync.completedPerSecond}/s); gateway RSS before ${result.gatewayRss.beforeMB} MB, peak ${result.gatewayRss.peakMB} MB (VmHWM)`);
    }
  } finally {
    // Killed, not drained: the measurement is over and its data folder is thrown away.
    worker?.kill('SIGKILL');
    // A profiled gateway writes its profile on a clean exit; its shutdown waits for the killed worker's jobs at most GANTRY_WORKER_STOP_GRACE_MS.
    gateway.kill(flags.profile ? 'SIGTERM' : 'SIGKILL');
    await new Promise((r) => (gateway.exitCode !== null ? r() : gateway.once('exit', r)));
    rmSync(dataDir, { recursive: true, force: true });
  }
}

main().then(
  () => process.exit(0),
  (err) => {
    console.error(`bench/big-bodies.js: ${err.stack ?? err}`);
    process.exit(1);
  },
);
