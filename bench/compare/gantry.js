/**
 * Gantry as a system under comparison: the gateway in its own process
 * (`node dist/src/cli/main.js serve`), on a fresh SQLite file or a fresh PostgreSQL database,
 * driven over HTTP with keep-alive node:http clients. Also the bare node:http ceiling.
 */
import { spawn } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { agent, freePort, freshDatabase, request, sleep } from './lib.js';

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '../..');
export const QUEUES = ['submit', 'e2e1', 'e2eb', 'backlog', 'sync', 'status'];

/** Starts a child node process and waits until GET /healthz answers 200. */
async function spawnServer({ args, env, port, nodeArgs = [] }) {
  const child = spawn(process.execPath, [...nodeArgs, ...args], { cwd: ROOT, env, stdio: ['ignore', 'ignore', 'pipe'] });
  let stderr = '';
  child.stderr.setEncoding('utf8');
  child.stderr.on('data', (chunk) => {
    stderr = (stderr + chunk).slice(-8000);
  });
  let exited = false;
  const exit = new Promise((r) => child.once('exit', () => ((exited = true), r())));
  const deadline = Date.now() + 30_000;
  for (;;) {
    if (exited) throw new Error(`${args.join(' ')} exited at start-up:\n${stderr}`);
    try {
      if ((await request(port, undefined, 'GET', '/healthz')).status === 200) break;
    } catch {
      // not listening yet
    }
    if (Date.now() > deadline) {
      child.kill('SIGKILL');
      throw new Error(`no answer on /healthz within 30 s:\n${stderr}`);
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

/**
 * Gantry on `backend` ('sqlite' or 'postgres'); `profileDir` runs the gateway under --cpu-prof.
 * `shared` (scale-model.js): `{url, adminKey}` of a database this gateway sets up but does not
 * drop; with `keys` too (another gateway's `sys.shared`), it joins without any set-up.
 */
export function gantrySystem(backend, { profileDir, extraNodeArgs = [], env: extraEnv = {}, shared } = {}) {
  const adminKey = shared?.adminKey ?? `cmp-admin-${process.pid}-${Date.now().toString(36)}`;
  const sys = {
    name: backend === 'sqlite' ? 'gantry-sqlite' : 'gantry-pg',
    label: backend === 'sqlite' ? 'Gantry, SQLite (HTTP)' : 'Gantry, PostgreSQL (HTTP)',
    inProcess: false,
    supportsBatch: true,
    pid: 0,
    port: 0,
  };
  let server;
  let dataDir;
  let db;
  let runKey;
  let workerKey;
  const clientAgent = agent(64);
  const workerAgent = agent(64);

  sys.start = async () => {
    dataDir = mkdtempSync(join(os.tmpdir(), 'gantry-cmp-'));
    if (backend === 'postgres') db = shared ? { url: shared.url, drop: async () => {} } : await freshDatabase('gantry');
    sys.port = await freePort();
    const main = join(ROOT, 'dist/src/cli/main.js');
    if (!existsSync(main)) throw new Error('dist/src/cli/main.js is missing: run `npm run build` first');
    const env = {
      ...process.env,
      PORT: String(sys.port),
      GANTRY_HOST: '127.0.0.1',
      GANTRY_DATA_DIR: dataDir,
      GANTRY_ADMIN_KEY: adminKey,
      GANTRY_RATE_LIMITS: 'off',
      GANTRY_LOG_LEVEL: 'warn',
      GANTRY_JOB_TAKE_WAIT_MS: '1000',
      // A 1M backlog is the point of the backlog scenario, not an overload.
      GANTRY_QUEUE_LIMIT_FACTOR: '100000',
      ...(db ? { DATABASE_URL: db.url } : {}),
      ...extraEnv,
    };
    delete env.NODE_OPTIONS;
    if (!db) delete env.DATABASE_URL;
    const nodeArgs = [...extraNodeArgs, ...(profileDir ? ['--cpu-prof', `--cpu-prof-dir=${resolve(profileDir)}`] : [])];
    server = await spawnServer({ args: [main, 'serve'], env, port: sys.port, nodeArgs });
    sys.pid = server.pid;
    const adminCall = async (path, body) => {
      const res = await request(sys.port, undefined, 'POST', `/admin/v1/${path}`, adminKey, body);
      if (res.status !== 200) throw new Error(`admin ${path}: HTTP ${res.status} ${res.text}`);
      return JSON.parse(res.text);
    };
    if (shared?.keys) {
      ({ runKey, workerKey } = shared.keys);
      return;
    }
    // workersMax high and GANTRY_QUEUE_LIMIT_FACTOR high: no queue-overload 429.
    for (const q of QUEUES) await adminCall('endpoints', { id: `cmp-${q}`, workersMax: 1000 });
    runKey = (await adminCall('keys', { name: 'cmp run', scopes: ['run'] })).key;
    workerKey = (await adminCall('keys', { name: 'cmp worker', scopes: ['worker'] })).key;
    sys.shared = { url: db?.url, adminKey, keys: { runKey, workerKey } };
  };

  sys.stop = async () => {
    clientAgent.destroy();
    workerAgent.destroy();
    await server?.stop();
    if (dataDir) rmSync(dataDir, { recursive: true, force: true });
    await db?.drop();
  };

  sys.submit = async (queue, i) => {
    const res = await request(sys.port, clientAgent, 'POST', `/v2/cmp-${queue}/run`, runKey, `{"input":{"n":${i},"prompt":"a small job"}}`);
    if (res.status !== 200) throw new Error(`run: HTTP ${res.status} ${res.text}`);
    return JSON.parse(res.text).id;
  };

  sys.status = async (queue, id) => {
    const res = await request(sys.port, clientAgent, 'GET', `/v2/cmp-${queue}/status/${id}`, runKey);
    if (res.status !== 200) throw new Error(`status: HTTP ${res.status} ${res.text}`);
    return res.text.startsWith('{"id":');
  };

  sys.fill = async (queue, n, onProgress) => {
    let next = 0;
    await Promise.all(
      Array.from({ length: 64 }, async () => {
        while (next < n) {
          const i = next++;
          await sys.submit(queue, i);
          if ((i + 1) % 5000 === 0) onProgress?.(i + 1);
        }
      }),
    );
  };

  sys.runsync = async (queue, i) => {
    const res = await request(sys.port, clientAgent, 'POST', `/v2/cmp-${queue}/runsync`, runKey, `{"input":{"n":${i}}}`);
    if (res.status !== 200) return false;
    const job = JSON.parse(res.text);
    return job.status === 'COMPLETED' && job.output?.n === i;
  };

  sys.baseline = async () => (await request(sys.port, clientAgent, 'GET', '/healthz')).status === 200;

  /** Worker loops: `batch` 1 uses job-take (one job per request), more uses job-take-batch. */
  sys.workers = (queue, { batch, concurrency, onDone }) => {
    let working = true;
    const finish = async (workerId, job) => {
      const res = await request(sys.port, workerAgent, 'POST', `/v2/cmp-${queue}/job-done/${workerId}/${job.id}?isStream=false`, workerKey, `{"output":{"n":${job.input.n}}}`);
      if (res.status !== 200) throw new Error(`job-done: HTTP ${res.status} ${res.text}`);
    };
    const loop = async (w) => {
      const workerId = `cmp-${queue}-w${w}`;
      const path = batch > 1 ? `/v2/cmp-${queue}/job-take-batch/${workerId}?batch_size=${batch}&job_in_progress=0` : `/v2/cmp-${queue}/job-take/${workerId}?job_in_progress=0`;
      while (working) {
        try {
          const res = await request(sys.port, workerAgent, 'GET', path, workerKey);
          if (res.status === 204) continue;
          if (res.status !== 200) throw new Error(`job-take: HTTP ${res.status} ${res.text}`);
          const jobs = batch > 1 ? JSON.parse(res.text) : [JSON.parse(res.text)];
          // Each job counts once its own job-done is answered; a failed one is recorded, not retried.
          await Promise.all(
            jobs.map((job) =>
              finish(workerId, job).then(
                () => onDone(1),
                (err) => {
                  sys.workerErrors = (sys.workerErrors ?? 0) + 1;
                  sys.lastWorkerError = String(err).slice(0, 300);
                },
              ),
            ),
          );
        } catch (err) {
          if (!working) return;
          sys.lastWorkerError = String(err);
          await sleep(5);
        }
      }
    };
    const loops = Array.from({ length: concurrency }, (_, w) => loop(w));
    return {
      async stop() {
        working = false;
        await Promise.race([Promise.all(loops), sleep(3_000)]);
      },
    };
  };

  return sys;
}

/** The machine's ceiling: a bare node:http server in its own process answering a small JSON. */
export function ceilingSystem() {
  const sys = { name: 'node-http', label: 'bare node:http (ceiling)', inProcess: false, ceiling: true, pid: 0, port: 0 };
  let server;
  const ag = agent(64);
  sys.start = async () => {
    sys.port = await freePort();
    const env = { ...process.env, PORT: String(sys.port) };
    delete env.NODE_OPTIONS;
    server = await spawnServer({ args: [join(ROOT, 'bench/compare/bare-server.js')], env, port: sys.port });
    sys.pid = server.pid;
  };
  sys.stop = async () => {
    ag.destroy();
    await server?.stop();
  };
  sys.submit = async (_queue, i) => {
    const res = await request(sys.port, ag, 'POST', '/v2/x/run', 'k', `{"input":{"n":${i},"prompt":"a small job"}}`);
    if (res.status !== 200) throw new Error(`HTTP ${res.status}`);
    return JSON.parse(res.text).id;
  };
  sys.status = async (_queue, id) => (await request(sys.port, ag, 'GET', `/v2/x/status/${id}`, 'k')).status === 200;
  return sys;
}
