#!/usr/bin/env node
/**
 * Cold start: a job submitted to an endpoint with 0 workers → its output at the client, with
 * the breakdown of where the time goes. The gateway runs in this process (dist/src/server.js,
 * fresh SQLite file, default autoscaler interval of 500 ms: the reaction to a job is
 * event-driven, not the interval) and the worker is a real process started by the pool.
 *
 *   spawn     job stored → worker process spawned (autoscaler reaction, key, spawn call)
 *   ready     spawn → the worker's first job-take poll (the worker's own start: runtime, SDK)
 *   dispatch  first poll → job claimed for it
 *   run       claimed → result stored (delivery to the worker, handler, job-done post)
 *   respond   result stored → runsync answer at the client
 *   overhead  total − ready: what is added to the worker's own start (aim < 50 ms)
 *   gateway   spawn + dispatch + respond: the gateway's own share of it (the rest, `run`, is
 *             mostly the worker's first job: a fresh runtime handling it and posting job-done)
 *
 * Each run waits until the endpoint is back at 0 workers (idleTimeout 1 s), so every run is
 * a real cold start of the same endpoint.
 *
 * Container mode (--driver docker --image IMAGE): the same worker runs in a container of IMAGE
 * on a Docker host (--docker-host, default the first engine of test/fixtures/docker/engines.sh),
 * placed, created, started and followed by the Docker driver. IMAGE is the container tests'
 * worker image (`docker images gantry-test-worker`): the runpod-python stand-in as its CMD, the
 * Node SDK echo worker at /app. `--driver both` alternates a local-process run and a container
 * run (so both see the same machine load) and prints what the container adds to spawn → first
 * job taken. The image holds this machine's /usr/bin/python3 and node: compare with
 * `--python /usr/bin/python3` (a pyenv shim in PATH costs hundreds of ms of its own).
 *
 *   taken     spawn → the job claimed by the fresh worker (what the container path adds to)
 *   launch    spawn → the driver's start resolved (container: placement, create and start
 *             calls to the engine; process: the spawn call), from the worker log's `started` note
 *
 * Warm pool (--flashboot, with --driver docker): the container endpoint has `flashboot: true`;
 * after a first run each run waits until its worker is paused (not gone) and measures the
 * resume instead: `spawn` and `ready` count from the resume request (the worker log's
 * `resuming` note), and the `ready` phase is then the unpause and the worker's next poll.
 *
 * The three ways up, on the engine alone (--paths: create+start, start of a kept container,
 * resume of a paused one, each to the worker's first job-take): see bench/cold-start-paths.js.
 *
 * usage: npm run build && node bench/cold-start.js [--runs N] [--worker node|python] [--json]
 *          [--driver process|docker|both] [--image IMAGE] [--docker-host unix:///…] [--python PATH]
 *          [--flashboot] [--paths]
 */
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { clearInterval, setInterval } from 'node:timers';
import { parseArgs } from 'node:util';

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '..');
const { values } = parseArgs({
  options: {
    runs: { type: 'string', default: '5' },
    worker: { type: 'string', default: 'node' },
    json: { type: 'boolean', default: false },
    driver: { type: 'string', default: 'process' },
    image: { type: 'string' },
    'docker-host': { type: 'string', default: 'unix:///run/gantry-test-docker/a/docker.sock' },
    python: { type: 'string', default: 'python3' },
    flashboot: { type: 'boolean', default: false },
    paths: { type: 'boolean', default: false },
  },
});
const runs = Number(values.runs);
if (!Number.isInteger(runs) || runs < 1 || runs > 100) throw new Error('--runs must be an integer from 1 to 100');
if (values.paths) {
  const { runPaths } = await import('./cold-start-paths.js');
  await runPaths({ ...values, worker: values.worker === 'node' ? 'node' : 'python' }, runs);
  process.exit(0);
}
if (values.flashboot && values.driver !== 'docker') throw new Error('--flashboot needs --driver docker (the warm pool pauses containers)');
const COMMANDS = {
  node: `node ${JSON.stringify(join(ROOT, 'dist/src/cli/main.js'))} worker ${JSON.stringify(join(ROOT, 'dist/examples/echo-worker.js'))}`,
  python: `${values.python} -u ${JSON.stringify(join(ROOT, 'test/e2e/fixtures/runpod_like_worker.py'))} --handler echo`,
};
const command = COMMANDS[values.worker];
if (!command) throw new Error('--worker must be node or python');
if (!['process', 'docker', 'both'].includes(values.driver)) throw new Error('--driver must be process, docker or both');
if (values.driver !== 'process' && !values.image) throw new Error('--driver docker needs --image (the container tests build gantry-test-worker:<hash>)');
/** The same workers inside the test image: its CMD is the runpod-python stand-in. */
const CONTAINER_WORKERS = {
  node: { image: values.image, command: ['node', '/app/node-worker.mjs', '/app/gantry/dist/examples/echo-worker.js'] },
  python: { image: values.image, env: { WORKER_HANDLER: 'echo' } },
};

const { startGantry } = await import(join(ROOT, 'dist/src/server.js'));
const { pino } = await import('pino');

const dataDir = mkdtempSync(join(os.tmpdir(), 'gantry-cold-'));
const adminKey = `bench-admin-${process.pid}-${Date.now().toString(36)}`;
const gantry = await startGantry({
  // The public image endpoints' workers are left off: they would share the CPU with the measured one.
  env: {
    GANTRY_IMAGE_WORKERS: 'off',
    // Containers reach the gateway on the Docker bridge's address of this machine.
    GANTRY_DOCKER_HOSTS: JSON.stringify([{ name: 'bench', url: values['docker-host'] }]),
  },
  config: { port: 0, host: values.driver === 'process' ? '127.0.0.1' : '0.0.0.0', dataDir, adminKey, logLevel: 'silent', rateLimits: false },
  logger: pino({ level: 'silent' }),
});
const headers = { authorization: `Bearer ${adminKey}`, 'content-type': 'application/json' };
const post = async (path, body) => {
  const res = await fetch(`${gantry.url}${path}`, { method: 'POST', headers, body: JSON.stringify(body) });
  if (res.status !== 200) throw new Error(`${path}: ${res.status} ${await res.text()}`);
  return res.json();
};
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

async function until(check, timeoutMs, what) {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = check();
    if (value) return value;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await sleep(5);
  }
}

/** One cold start of endpoint `id`: waits for its pool to be empty (or, resuming, its worker paused), runs a job, returns the phases. */
async function coldStart(id, i, resuming = false) {
  const pool = () => gantry.gateway.autoscaler.view.workers(id) ?? [];
  if (resuming) await until(() => pool().length === 1 && pool()[0].state === 'paused', 60_000, 'the worker to be paused');
  else await until(() => pool().length === 0, 60_000, 'the pool to be empty');
  // The pool forgets a worker once it exits; note its timestamps while it is alive.
  let seen;
  let launched;
  let resumedAt;
  const t0 = Date.now();
  const watch = setInterval(() => {
    const w = pool()[0];
    const log = w ? (gantry.gateway.autoscaler.view.logs(id, w.id, 500) ?? []) : [];
    // Resuming: `spawn` and `ready` count from this run's resume request (its log note).
    if (resuming && w && resumedAt === undefined) resumedAt = log.find((l) => l.line.startsWith('resuming (') && l.at >= t0)?.at;
    if (w?.readyAt && (!resuming || (resumedAt !== undefined && w.readyAt >= resumedAt))) seen = resuming ? { ...w, startedAt: resumedAt } : w;
    if (w && !resuming && launched === undefined) launched = log.find((l) => l.line.startsWith('started:'))?.at;
  }, 1);
  const job = await post(`/v2/${id}/runsync?wait=60000`, { input: { run: i } });
  const t1 = Date.now();
  if (job.status !== 'COMPLETED') throw new Error(`run ${i}: ${JSON.stringify(job)}`);
  const stored = await gantry.gateway.jobs.getJob(id, job.id);
  await until(() => seen, 5_000, 'the worker timestamps');
  clearInterval(watch);
  const r = {
    total: t1 - t0,
    spawn: seen.startedAt - stored.createdAt,
    ready: seen.readyAt - seen.startedAt,
    dispatch: stored.startedAt - seen.readyAt,
    run: stored.finishedAt - stored.startedAt,
    respond: t1 - stored.finishedAt,
    taken: stored.startedAt - seen.startedAt,
    launch: launched === undefined ? NaN : launched - seen.startedAt,
  };
  r.overhead = r.total - r.ready;
  r.gateway = r.spawn + r.dispatch + r.respond;
  if (!values.json) console.error(`${id} run ${i + 1}/${runs}: ${JSON.stringify(r)}`);
  return r;
}

const endpoints = {
  ...(values.driver !== 'docker' ? { process: { id: 'cold', worker: { command } } } : {}),
  ...(values.driver !== 'process' ? { docker: { id: 'coldcontainer', worker: CONTAINER_WORKERS[values.worker] } } : {}),
};
const measured = Object.fromEntries(Object.keys(endpoints).map((k) => [k, []]));
try {
  for (const { id, worker } of Object.values(endpoints)) await post('/admin/v1/endpoints', { id, workersMax: 1, idleTimeout: 1, worker, ...(values.flashboot ? { flashboot: true } : {}) });
  // The warm pool's first worker is a fresh container: started once, then every run resumes it.
  if (values.flashboot) await coldStart(endpoints.docker.id, -1);
  for (let i = 0; i < runs; i++) {
    for (const [driver, { id }] of Object.entries(endpoints)) measured[driver].push(await coldStart(id, i, values.flashboot));
  }
} finally {
  // Keeps the event loop alive while close() waits for background threads that are unref'd.
  const keepAlive = setInterval(() => {}, 1_000);
  await gantry.close();
  clearInterval(keepAlive);
  rmSync(dataDir, { recursive: true, force: true });
}

const median = (xs) => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length % 2 ? s[(s.length - 1) / 2] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2;
};
const keys = ['total', 'spawn', 'ready', 'dispatch', 'run', 'respond', 'taken', 'launch', 'overhead', 'gateway'];
const summarize = (results) => Object.fromEntries(keys.map((k) => [k, { median: median(results.map((r) => r[k])), max: Math.max(...results.map((r) => r[k])) }]));
const summaries = Object.fromEntries(Object.entries(measured).map(([driver, results]) => [driver, summarize(results)]));
const machine = `${os.cpus().length} × ${os.cpus()[0]?.model ?? 'cpu'}, node ${process.version}, load ${os.loadavg()[0].toFixed(1)}`;
const added = summaries.process && summaries.docker ? summaries.docker.taken.median - summaries.process.taken.median : null;
if (values.json) {
  console.log(JSON.stringify({ worker: values.worker, runs, machine, summaries, containerAddsMs: added, measured }, null, 2));
} else {
  for (const [driver, summary] of Object.entries(summaries)) {
    console.log(`${values.flashboot ? 'resume from the warm pool (flashboot)' : 'cold start'}, ${values.worker} worker as a ${driver === 'docker' ? `container (${values.image})` : 'local process'}, ${runs} runs (${machine})`);
    console.log('phase      median ms   max ms');
    for (const k of keys) console.log(`${k.padEnd(10)} ${String(summary[k].median).padStart(9)} ${String(summary[k].max).padStart(8)}`);
    if (driver === 'process') {
      const ok = summary.overhead.median < 50;
      console.log(`overhead beyond the worker's own start: ${summary.overhead.median} ms median (aim < 50 ms) ${ok ? 'OK' : 'MISSED'}`);
    }
  }
  if (added !== null) console.log(`the container adds ${added} ms (median) to spawn → first job taken`);
}
