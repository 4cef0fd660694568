#!/usr/bin/env node
/**
 * Stream latency: the time from a worker's job-stream post to the event at the client, for
 * clients following a job over server-sent events (docs/benchmarks.md, "Stream latency").
 *
 *   sse      GET /v2/{endpoint}/stream/{id} with Accept: text/event-stream
 *   openai   POST /v2/{endpoint}/openai/v1/chat/completions with "stream": true
 *   poll     reference: the JSON /stream long-poll, asked again as soon as it answers
 *
 * The gateway runs in its own process (`node dist/src/cli/main.js serve`, a fresh SQLite file
 * in a temp folder, or a fresh PostgreSQL schema; rate limits off). This process is both the
 * clients and the worker, so one clock times both ends: the worker (node:http, keep-alive)
 * takes the jobs with job-take-batch, then for each job posts a chunk `{"output":{"k":n}}`,
 * waits until that job's client has the event, and posts the next: N streams in parallel, each
 * a ping-pong of chunks. Latency = client event time − time the worker started its post.
 *
 * usage: npm run build && node bench/stream-latency.js [--streams 1,32] [--chunks N]
 *          [--scenarios sse,openai,poll] [--backend sqlite|postgres] [--json] [--profile DIR]
 *
 *   --streams L     concurrent streams, one run per value (default 1,32)
 *   --chunks N      chunks measured per run, spread over its streams (default 2000; 100..50000),
 *                   after a warm-up of 500 chunks on one stream of every scenario
 *   --scenarios L   default sse,openai,poll
 *   --backend B     sqlite (default) or postgres: a fresh schema on DATABASE_URL, or on
 *                   postgres://postgres@127.0.0.1:5432/test, dropped at the end
 *   --json          print the results as one JSON document
 *   --profile DIR   run the gateway under `node --cpu-prof --cpu-prof-dir=DIR`
 */
import { spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import http from 'node:http';
import net from 'node:net';
import os from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '..');
const HOST = '127.0.0.1';
const ADMIN_KEY = `bench-admin-${process.pid}-${Date.now().toString(36)}`;
const RUN_TIMEOUT_MS = 120_000;

const { values: flags } = parseArgs({
  options: {
    streams: { type: 'string', default: '1,32' },
    chunks: { type: 'string', default: '2000' },
    scenarios: { type: 'string', default: 'sse,openai,poll' },
    backend: { type: 'string', default: 'sqlite' },
    json: { type: 'boolean', default: false },
    profile: { type: 'string' },
    help: { type: 'boolean', short: 'h', default: false },
  },
});
if (flags.help) {
  const text = readFileSync(fileURLToPath(import.meta.url), 'utf8');
  console.log(text.slice(text.indexOf(' * usage:') + 3, text.indexOf(' */')).replace(/^ \* ?/gm, ''));
  process.exit(0);
}
const STREAMS = flags.streams.split(',').map(Number);
if (!STREAMS.every((n) => Number.isInteger(n) && n >= 1 && n <= 400)) fail('--streams must list integers from 1 to 400');
const CHUNKS = Number(flags.chunks);
if (!Number.isInteger(CHUNKS) || CHUNKS < 100 || CHUNKS > 50_000) fail('--chunks must be an integer from 100 to 50000');
const SCENARIOS = flags.scenarios.split(',').map((s) => s.trim()).filter(Boolean);
for (const s of SCENARIOS) if (!['sse', 'openai', 'poll'].includes(s)) fail(`unknown scenario ${s} (expected sse, openai, poll)`);
if (!['sqlite', 'postgres'].includes(flags.backend)) fail('--backend must be sqlite or postgres');
const COMMAND = ['node', 'bench/stream-latency.js', ...process.argv.slice(2)].join(' ');

function fail(message) {
  console.error(`bench/stream-latency.js: ${message}`);
  process.exit(2);
}

function log(message) {
  if (!flags.json) process.stderr.write(`${message}\n`);
}

// ---- HTTP ----------------------------------------------------------------------------------

let PORT = 0;
const workerAgent = new http.Agent({ keepAlive: true, maxSockets: 64 });
const clientAgent = new http.Agent({ keepAlive: true, maxSockets: 512 });

/** One request, read to the end: `{status, text, headers}`. */
function request(agent, method, path, key, body, headers = {}) {
  return new Promise((resolvePromise, reject) => {
    const payload = body === undefined ? undefined : JSON.stringify(body);
    const all = { authorization: `Bearer ${key}`, ...headers, ...(payload ? { 'content-type': 'application/json', 'content-length': Buffer.byteLength(payload) } : {}) };
    const req = http.request({ host: HOST, port: PORT, method, path, agent, headers: all }, (res) => {
      let text = '';
      res.setEncoding('utf8');
      res.on('data', (chunk) => (text += chunk));
      res.on('end', () => resolvePromise({ status: res.statusCode, text, headers: res.headers }));
      res.on('error', reject);
    });
    req.on('error', reject);
    req.end(payload);
  });
}

/**
 * A streamed request whose body is read as server-sent events: `onData(data)` for every
 * `data:` line, as soon as its event is complete. Resolves with the response headers.
 */
function openEventStream(method, path, key, body, onData, onEnd) {
  return new Promise((resolvePromise, reject) => {
    const payload = body === undefined ? undefined : JSON.stringify(body);
    const headers = { authorization: `Bearer ${key}`, accept: 'text/event-stream', ...(payload ? { 'content-type': 'application/json', 'content-length': Buffer.byteLength(payload) } : {}) };
    const req = http.request({ host: HOST, port: PORT, method, path, agent: clientAgent, headers }, (res) => {
      if (res.statusCode !== 200) return reject(new Error(`${path}: HTTP ${res.statusCode}`));
      resolvePromise(res.headers);
      let buffer = '';
      res.setEncoding('utf8');
      res.on('data', (text) => {
        buffer += text;
        let end;
        while ((end = buffer.indexOf('\n\n')) >= 0) {
          const event = buffer.slice(0, end);
          buffer = buffer.slice(end + 2);
          for (const line of event.split('\n')) if (line.startsWith('data: ')) onData(line.slice(6));
        }
      });
      res.on('end', onEnd);
    });
    req.on('error', reject);
    req.end(payload);
  });
}

async function admin(path, body) {
  const res = await request(undefined, 'POST', `/admin/v1/${path}`, ADMIN_KEY, body);
  if (res.status !== 200) throw new Error(`admin ${path}: HTTP ${res.status} ${res.text}`);
  return JSON.parse(res.text);
}

// ---- one run: N streams, ping-pong chunks --------------------------------------------------

/** Per job: when each chunk's post started, and a wake-up for the worker once the client has it. */
function createTracker() {
  const jobs = new Map();
  const samples = [];
  return {
    samples,
    job(id) {
      let state = jobs.get(id);
      if (!state) jobs.set(id, (state = { sentAt: new Map(), waiting: new Map(), received: 0 }));
      return state;
    },
    /** The client has chunk k of job id. */
    received(id, k) {
      const state = this.job(id);
      const at = performance.now();
      const sentAt = state.sentAt.get(k);
      if (sentAt !== undefined) samples.push(at - sentAt);
      state.received++;
      state.waiting.get(k)?.();
    },
    /** Resolves once the client has chunk k of job id. */
    until(id, k) {
      const state = this.job(id);
      if (state.received > k) return Promise.resolve();
      return new Promise((r) => state.waiting.set(k, r));
    },
  };
}

/** Opens one client of the scenario; resolves with the job id it follows. */
async function openClient(scenario, endpoint, runKey, tracker, ended) {
  if (scenario === 'openai') {
    let jobId;
    const headers = await openEventStream('POST', `/v2/${endpoint}/openai/v1/chat/completions`, runKey, { model: 'bench', messages: [{ role: 'user', content: 'hi' }], stream: true }, (data) => {
      if (data !== '[DONE]') tracker.received(jobId, JSON.parse(data).k);
    }, ended);
    jobId = headers['x-request-id'];
    return jobId;
  }
  const run = await request(clientAgent, 'POST', `/v2/${endpoint}/run`, runKey, { input: { bench: true } });
  const jobId = JSON.parse(run.text).id;
  if (scenario === 'sse') {
    await openEventStream('GET', `/v2/${endpoint}/stream/${jobId}`, runKey, undefined, (data) => {
      const event = JSON.parse(data);
      if (event.output !== undefined) tracker.received(jobId, event.output.k);
    }, ended);
    return jobId;
  }
  // poll: the JSON long-poll, asked again at once until the job ends.
  void (async () => {
    for (;;) {
      const res = await request(clientAgent, 'GET', `/v2/${endpoint}/stream/${jobId}?wait=10000`, runKey);
      const answer = JSON.parse(res.text);
      for (const chunk of answer.stream) tracker.received(jobId, chunk.output.k);
      if (!['IN_QUEUE', 'IN_PROGRESS'].includes(answer.status)) return ended();
    }
  })();
  return jobId;
}

async function runOnce(scenario, streams, chunks, keys) {
  const endpoint = `bench-${scenario}-${streams}-${Math.random().toString(36).slice(2, 8)}`;
  await admin('endpoints', { id: endpoint, workersMax: 1000 });
  const tracker = createTracker();
  let open = streams;
  let allEnded;
  const endedAll = new Promise((r) => (allEnded = r));
  const ended = () => --open === 0 && allEnded();
  const jobIds = await Promise.all(Array.from({ length: streams }, () => openClient(scenario, endpoint, keys.run, tracker, ended)));
  const taken = [];
  while (taken.length < streams) {
    const res = await request(workerAgent, 'GET', `/v2/${endpoint}/job-take-batch/bench-worker?batch_size=${streams - taken.length}`, keys.worker);
    if (res.status === 200) taken.push(...JSON.parse(res.text).map((job) => job.id));
  }
  const perStream = Math.ceil(chunks / streams);
  const startedAt = performance.now();
  await Promise.all(jobIds.map(async (id) => {
    const state = tracker.job(id);
    for (let k = 0; k < perStream; k++) {
      state.sentAt.set(k, performance.now());
      const post = request(workerAgent, 'POST', `/v2/${endpoint}/job-stream/bench-worker/${id}`, keys.worker, { output: { k } });
      await tracker.until(id, k);
      const res = await post;
      if (res.status !== 200) throw new Error(`job-stream: HTTP ${res.status} ${res.text}`);
    }
    const done = await request(workerAgent, 'POST', `/v2/${endpoint}/job-done/bench-worker/${id}`, keys.worker, { output: { chunks: perStream } });
    if (done.status !== 200) throw new Error(`job-done: HTTP ${done.status} ${done.text}`);
  }));
  await endedAll;
  return { samples: tracker.samples, seconds: (performance.now() - startedAt) / 1000 };
}

/** CPU time (user + system) the process has used so far, in ms, from /proc (Linux; NaN elsewhere). */
function cpuMs(pid) {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    return (Number(fields[11]) + Number(fields[12])) * 10; // USER_HZ = 100
  } catch {
    return NaN;
  }
}

function percentile(sorted, p) {
  return sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1))];
}

function summarise({ samples, seconds }) {
  const s = Float64Array.from(samples).sort();
  const round = (x) => Math.round(x * 1000) / 1000;
  return { count: s.length, perSecond: Math.round(s.length / seconds), p50: round(percentile(s, 50)), p90: round(percentile(s, 90)), p99: round(percentile(s, 99)), max: round(s[s.length - 1]) };
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

async function createPgSchema() {
  const { default: pg } = await import('pg');
  const server = process.env.DATABASE_URL || 'postgres://postgres@127.0.0.1:5432/test';
  const schema = `gantry_streambench_${process.pid}`;
  const sql = async (text) => {
    const client = new pg.Client({ connectionString: server });
    await client.connect();
    try {
      await client.query(text);
    } finally {
      await client.end();
    }
  };
  await sql(`DROP SCHEMA IF EXISTS ${schema} CASCADE; CREATE SCHEMA ${schema}`);
  const url = new URL(server);
  url.searchParams.set('options', `-c search_path=${schema}`);
  return { url: url.toString(), drop: () => sql(`DROP SCHEMA IF EXISTS ${schema} CASCADE`) };
}

async function startGateway(dataDir, databaseUrl) {
  PORT = await freePort();
  const env = {
    ...process.env,
    PORT: String(PORT),
    GANTRY_HOST: HOST,
    GANTRY_DATA_DIR: dataDir,
    GANTRY_ADMIN_KEY: ADMIN_KEY,
    GANTRY_RATE_LIMITS: 'off',
    GANTRY_LOG_LEVEL: 'warn',
    GANTRY_IMAGE_WORKERS: 'off',
    ...(databaseUrl ? { DATABASE_URL: databaseUrl } : {}),
  };
  const nodeArgs = flags.profile ? ['--cpu-prof', `--cpu-prof-dir=${resolve(flags.profile)}`] : [];
  const child = spawn(process.execPath, [...nodeArgs, join(ROOT, 'dist/src/cli/main.js'), 'serve'], { cwd: ROOT, env, stdio: ['ignore', 'ignore', 'inherit'] });
  const deadline = Date.now() + 30_000;
  for (;;) {
    if (child.exitCode !== null) throw new Error(`gateway exited with code ${child.exitCode}`);
    try {
      if ((await request(undefined, 'GET', '/healthz', '')).status === 200) return child;
    } catch {
      // not listening yet
    }
    if (Date.now() > deadline) throw new Error('gateway did not start within 30 s');
    await new Promise((r) => setTimeout(r, 100));
  }
}

// ---- main ----------------------------------------------------------------------------------

async function main() {
  const dataDir = mkdtempSync(join(os.tmpdir(), 'gantry-streambench-'));
  const pg = flags.backend === 'postgres' ? await createPgSchema() : undefined;
  const gateway = await startGateway(dataDir, pg?.url);
  const watchdog = setTimeout(() => {
    console.error('bench/stream-latency.js: a run took too long; giving up');
    gateway.kill('SIGKILL');
    process.exit(1);
  }, RUN_TIMEOUT_MS * SCENARIOS.length * (STREAMS.length + 1));
  watchdog.unref();
  const results = [];
  try {
    const keys = { run: (await admin('keys', { name: 'bench run', scopes: ['run'] })).key, worker: (await admin('keys', { name: 'bench worker', scopes: ['worker'] })).key };
    log(`gateway pid ${gateway.pid} on ${flags.backend}; node ${process.version}; ${os.cpus().length} CPUs; load average ${os.loadavg().map((l) => l.toFixed(2)).join(' ')}`);
    // Warm-up: every scenario once before any is measured (the first one run is slower otherwise).
    for (const scenario of SCENARIOS) await runOnce(scenario, 1, 500, keys);
    for (const scenario of SCENARIOS) {
      for (const streams of STREAMS) {
        const cpuBefore = cpuMs(gateway.pid);
        const summary = { scenario, streams, ...summarise(await runOnce(scenario, streams, CHUNKS, keys)) };
        // Load-independent: the gateway's CPU per chunk (post, wake-up, drain, event, and the job's own requests).
        summary.gatewayCpuUsPerChunk = Math.round(((cpuMs(gateway.pid) - cpuBefore) * 1000) / summary.count);
        results.push(summary);
        log(`${scenario.padEnd(7)} streams ${String(streams).padStart(3)}  chunks ${summary.count} (${summary.perSecond}/s)  p50 ${summary.p50} ms  p90 ${summary.p90} ms  p99 ${summary.p99} ms  max ${summary.max} ms  gateway CPU ${summary.gatewayCpuUsPerChunk} µs/chunk`);
      }
    }
  } finally {
    gateway.kill('SIGTERM');
    await new Promise((r) => gateway.once('exit', r));
    rmSync(dataDir, { recursive: true, force: true });
    await pg?.drop();
    workerAgent.destroy();
    clientAgent.destroy();
  }
  if (flags.json) console.log(JSON.stringify({ command: COMMAND, backend: flags.backend, loadavg: os.loadavg(), results }, null, 2));
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
