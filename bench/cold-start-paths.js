/**
 * `node bench/cold-start.js --paths --image IMAGE` (after `npm run build`): the three ways a
 * worker container can come up, side by side, on a real Docker engine, each timed from the
 * engine call to the worker's first job-take (the same end as a cold start: docs/scaling.md):
 *
 *   create+start  POST /containers/create, POST /containers/{id}/start (what the pool does for a
 *                 new worker: the image's filesystem set up, the worker's runtime started)
 *   kept start    POST /containers/{id}/start of that container once stopped (a container kept,
 *                 not removed: no create, but the worker's process starts over)
 *   resume        POST /containers/{id}/unpause of that container paused while idle (flashboot's
 *                 warm pool: the worker's process goes on where it was)
 *
 * The worker is the container tests' image (its CMD: the runpod-python stand-in; `--worker node`:
 * the Node SDK's echo worker) pointed at an HTTP server in this process standing in for the
 * gateway's worker API: it records each job-take's arrival and answers 204 after 100 ms (an
 * empty long-poll), pings and job-stop polls likewise. No GPU is asked for (the mechanisms are
 * the engine's; a real GPU adds the driver's own device setup to create+start and start only).
 * Each run uses a fresh container, removed at the end.
 *
 * usage: node bench/cold-start.js --paths --image IMAGE [--runs N] [--worker python|node]
 *          [--docker-host unix:///…] [--json]
 */
import http from 'node:http';
import os from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '..');
const { createEngineClient } = await import(join(ROOT, 'dist/src/pool/docker/engine-client.js'));
const { containerCreateBody } = await import(join(ROOT, 'dist/src/pool/docker/container-spec.js'));

/** Empty long-polls are held this long, so an idle worker does not spin. */
const HOLD_MS = 100;
/** A worker idles this long before it is paused, and stays paused this long before the resume. */
const IDLE_MS = 1_000;

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const median = (xs) => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length % 2 ? s[(s.length - 1) / 2] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2;
};

/** The stand-in gateway: job-take arrivals by time, every poll answered empty after HOLD_MS. */
function startFakeGateway() {
  const takes = [];
  const server = http.createServer((req, res) => {
    req.resume();
    if (/\/job-take(-batch)?\//.test(req.url ?? '')) takes.push(performance.now());
    const answer = () => (res.writableEnded ? undefined : res.writeHead(req.method === 'GET' ? 204 : 200).end());
    if (req.method === 'GET') setTimeout(answer, HOLD_MS);
    else req.on('end', answer);
  });
  server.keepAliveTimeout = 120_000;
  return new Promise((resolve) => server.listen(0, '0.0.0.0', () => resolve({ server, port: server.address().port, takes })));
}

/** Resolves with the arrival of the first job-take after `since` (performance.now() ms). */
async function firstTakeAfter(takes, since, what) {
  const deadline = performance.now() + 60_000;
  for (;;) {
    const at = takes.find((t) => t > since);
    if (at !== undefined) return at;
    if (performance.now() > deadline) throw new Error(`no job-take within 60 s after ${what}`);
    await sleep(2);
  }
}

/** One run: create+start, then stop and start the kept container, then pause and resume it. */
async function oneRun(engine, gateway, spec, i) {
  const call = async (method, path, options) => {
    const t = performance.now();
    const out = await engine.call(method, path, options);
    return { out, ms: performance.now() - t };
  };
  const workerId = `bench-paths-${process.pid}-${i}`;
  const body = containerCreateBody(
    { workerId, endpointId: 'bench', image: spec.image, ...(spec.command ? { command: spec.command } : {}), env: spec.env, runpod: { endpointId: 'bench', workerId, apiKey: 'bench', pingIntervalMs: 10_000 } },
    { host: { network: 'bridge' }, deviceIds: [], gatewayUrl: `http://host.docker.internal:${gateway.port}`, hostGatewayAlias: true, instance: `bench-paths-${process.pid}`, gateway: 'bench' },
  );
  const r = {};
  let t0 = performance.now();
  const created = await call('POST', `/containers/create?name=gantry-${workerId}`, { body });
  const id = created.out.Id;
  try {
    const started = await call('POST', `/containers/${id}/start`, { timeoutMs: 120_000 });
    r.createStart = (await firstTakeAfter(gateway.takes, t0, 'create+start')) - t0;
    r.createCall = created.ms;
    r.startCall = started.ms;

    // Kept: stopped (SIGTERM; the worker exits once its open poll is answered), not removed, started again.
    await sleep(IDLE_MS);
    await engine.call('POST', `/containers/${id}/stop?t=10`, { timeoutMs: 30_000 });
    t0 = performance.now();
    const again = await call('POST', `/containers/${id}/start`, { timeoutMs: 120_000 });
    r.keptStart = (await firstTakeAfter(gateway.takes, t0, 'the kept start')) - t0;
    r.keptStartCall = again.ms;

    // Warm pool: paused while idle, unpaused.
    await sleep(IDLE_MS);
    await engine.call('POST', `/containers/${id}/pause`);
    await sleep(IDLE_MS);
    t0 = performance.now();
    const unpaused = await call('POST', `/containers/${id}/unpause`);
    r.resume = (await firstTakeAfter(gateway.takes, t0, 'the resume')) - t0;
    r.unpauseCall = unpaused.ms;
  } finally {
    await engine.call('DELETE', `/containers/${id}?force=1&v=1`).catch(() => undefined);
  }
  for (const k of Object.keys(r)) r[k] = Math.round(r[k] * 10) / 10;
  return r;
}

/** Runs the comparison; `values` are cold-start.js's parsed options. */
export async function runPaths(values, runs) {
  if (!values.image) throw new Error('--paths needs --image (the container tests build gantry-test-worker:<hash>: docker images gantry-test-worker)');
  const spec =
    values.worker === 'node'
      ? { image: values.image, command: ['node', '/app/node-worker.mjs', '/app/gantry/dist/examples/echo-worker.js'], env: {} }
      : { image: values.image, env: { WORKER_HANDLER: 'echo' } };
  const engine = createEngineClient({ name: 'bench', url: values['docker-host'], gpus: [], gpuTypes: [], tls: null, gatewayUrl: null, network: 'bridge', sshConfig: null });
  const version = await engine.call('GET', '/version');
  const gateway = await startFakeGateway();
  const measured = [];
  try {
    for (let i = 0; i < runs; i++) {
      const r = await oneRun(engine, gateway, spec, i);
      measured.push(r);
      if (!values.json) console.error(`run ${i + 1}/${runs}: ${JSON.stringify(r)}`);
    }
  } finally {
    gateway.server.closeAllConnections();
    gateway.server.close();
    engine.close();
  }
  const keys = ['createStart', 'keptStart', 'resume', 'createCall', 'startCall', 'keptStartCall', 'unpauseCall'];
  const round = (v) => Math.round(v * 10) / 10;
  const summary = Object.fromEntries(keys.map((k) => [k, { median: round(median(measured.map((r) => r[k]))), max: Math.max(...measured.map((r) => r[k])) }]));
  const machine = `${os.cpus().length} × ${os.cpus()[0]?.model ?? 'cpu'}, node ${process.version}, load ${os.loadavg()[0].toFixed(1)}, Docker ${version.Version}`;
  if (values.json) {
    console.log(JSON.stringify({ worker: values.worker, runs, machine, summary, measured }, null, 2));
    return;
  }
  console.log(`worker container up to its first job-take, ${values.worker} worker, ${runs} runs (${machine})`);
  console.log('path            median ms   max ms   engine call median ms');
  const row = (name, k, callKey) => console.log(`${name.padEnd(15)} ${String(summary[k].median).padStart(9)} ${String(summary[k].max).padStart(8)}   ${callKey.map((c) => `${c} ${summary[c].median}`).join(', ')}`);
  row('create+start', 'createStart', ['createCall', 'startCall']);
  row('kept start', 'keptStart', ['keptStartCall']);
  row('resume', 'resume', ['unpauseCall']);
  console.log(`resume is ${(summary.createStart.median / summary.resume.median).toFixed(1)}× faster than create+start, ${(summary.keptStart.median / summary.resume.median).toFixed(1)}× faster than a kept start (medians)`);
}
