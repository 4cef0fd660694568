// What a runpod-python worker puts on the wire, recorded through a proxy in front of a real
// gateway and reduced to what must not differ between two implementations of the protocol:
// methods, paths and query strings, header names and the values that matter, and bodies, with
// ids, keys, timings, platform strings and tracebacks replaced by placeholders. Used to keep
// the real runpod-python 1.12's traffic as a fixture (test/e2e/fixtures/runpod-python-traffic.json)
// and to check the stand-in (fixtures/runpod_like_worker.py) against it. GANTRY_TRAFFIC_DUMP=1
// prints every request and answer status as the proxy sees them.
import type { ChildProcess } from 'node:child_process';
import { spawnOwned } from '../helpers/processes.js';
import { randomUUID } from 'node:crypto';
import { createServer, request as httpRequest, type IncomingHttpHeaders, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { eventually, type startTestGantry } from '../helpers/gantry.js';

type Gantry = Awaited<ReturnType<typeof startTestGantry>>;
type Json = Record<string, unknown>;

/** One request a worker made, as the proxy saw it. */
export interface RawExchange {
  method: string;
  url: string;
  headers: IncomingHttpHeaders;
  body: string;
  status: number;
  /** How many requests had reached the proxy when this one's answer came back; unset until then. */
  answeredAt?: number;
}

/** One request reduced to what two implementations of the protocol must agree on. */
export interface RequestShape {
  method: string;
  /** Path and query, ids replaced by `{endpoint}`, `{worker}`, `{job}`. */
  target: string;
  /** Header names (lower case, sorted) with their values where the value matters, else `*`. */
  headers: Record<string, string>;
  /** The body as JSON, normalised; a string when it is not JSON; absent when empty. */
  body?: unknown;
}

/** A scenario: one endpoint, one worker process, some jobs, what their records must end as. */
export interface Scenario {
  name: string;
  handler: 'echo' | 'fail' | 'progress' | 'stream' | 'sleep';
  concurrency?: number;
  aggregate?: boolean;
  jobs: unknown[];
  /** Cancel every job once it is IN_PROGRESS. */
  cancel?: boolean;
  /** The job statuses wanted at the end, in submit order. */
  want: string[];
}

export const SCENARIOS: Scenario[] = [
  { name: 'plain handler', handler: 'echo', jobs: [{ prompt: 'grüße, 世界', n: [1, 2, 3], nested: { ok: true } }], want: ['COMPLETED'] },
  { name: 'dict output with an error key', handler: 'echo', jobs: [{ error: 'bad prompt', detail: 1 }], want: ['FAILED'] },
  { name: 'handler raises', handler: 'fail', jobs: [{ message: 'model not found' }], want: ['FAILED'] },
  { name: 'progress updates', handler: 'progress', jobs: [{ steps: 2, step_seconds: 0.4 }], want: ['COMPLETED'] },
  { name: 'generator with aggregate', handler: 'stream', aggregate: true, jobs: [{ chunks: ['a', { b: 2 }, 'c'], chunk_seconds: 0.2 }], want: ['COMPLETED'] },
  { name: 'generator without aggregate', handler: 'stream', jobs: [{ chunks: ['x', 'y'], chunk_seconds: 0.2 }], want: ['COMPLETED'] },
  { name: 'cancelled while running', handler: 'sleep', jobs: [{ seconds: 30 }], cancel: true, want: ['CANCELLED'] },
  { name: 'concurrency 3', handler: 'sleep', concurrency: 3, jobs: [{ seconds: 1.5 }, { seconds: 1.5 }, { seconds: 1.5 }], want: ['COMPLETED', 'COMPLETED', 'COMPLETED'] },
];

/** How to start a worker: the stand-in or the real runpod-python (runpod_real_worker.py). */
export interface WorkerCommand {
  command: string;
  args: (s: Scenario) => string[];
  env: (s: Scenario) => Record<string, string>;
}

/** A recording HTTP proxy in front of `target`: every request and its answer's status. */
async function startProxy(target: string): Promise<{ url: string; seen: RawExchange[]; close(): Promise<void> }> {
  const seen: RawExchange[] = [];
  const upstream = new URL(target);
  const server: Server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const body = Buffer.concat(chunks);
      const entry: RawExchange = { method: req.method ?? '', url: req.url ?? '', headers: req.headers, body: body.toString('utf8'), status: 0 };
      seen.push(entry);
      if (process.env.GANTRY_TRAFFIC_DUMP) console.log(`${new Date().toISOString().slice(17, 23)} ${entry.method} ${entry.url} rid=${String(req.headers['x-request-id'] ?? '')}`);
      const out = httpRequest(
        { host: upstream.hostname, port: upstream.port, method: req.method, path: req.url, headers: { ...req.headers, host: upstream.host } },
        (answer) => {
          entry.status = answer.statusCode ?? 0;
          entry.answeredAt = seen.length;
          if (process.env.GANTRY_TRAFFIC_DUMP) console.log(`${new Date().toISOString().slice(17, 23)}   -> ${entry.status} ${entry.method} ${entry.url}`);
          res.writeHead(answer.statusCode ?? 502, answer.headers);
          answer.pipe(res);
        },
      );
      out.on('error', () => res.destroy());
      out.end(body);
    });
  });
  server.keepAliveTimeout = 60_000;
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    seen,
    close: () => new Promise<void>((resolve) => { server.closeAllConnections(); server.close(() => resolve()); }),
  };
}

/**
 * Runs every scenario against `gantry` with workers started by `worker`, through a recording
 * proxy, and returns each scenario's normalised requests (distinct shapes, first seen first).
 * Fails when a job does not end as the scenario wants.
 */
export async function recordScenarios(gantry: Gantry, runKey: string, worker: WorkerCommand, scenarios = SCENARIOS): Promise<Record<string, RequestShape[]>> {
  const out: Record<string, RequestShape[]> = {};
  for (const [i, s] of scenarios.entries()) {
    const endpointId = `traffic-${i}-${Date.now().toString(36)}`;
    // A worker id of its own per run: an id belongs to the first endpoint that saw it (docs/security.md).
    const workerId = `traffic-worker-${i}-${randomUUID().slice(0, 8)}`;
    await gantry.createEndpoint(endpointId);
    const proxy = await startProxy(gantry.url);
    const env = gantry.workerEnv(endpointId, workerId);
    for (const k of Object.keys(env)) env[k] = env[k]!.replace(gantry.url, proxy.url);
    const base = Object.fromEntries(Object.entries(process.env).filter(([k]) => !k.startsWith('RUNPOD_')));
    const proc: ChildProcess = spawnOwned(worker.command, worker.args(s), { env: { ...base, ...env, ...worker.env(s) }, stdio: ['ignore', 'pipe', 'pipe'] });
    let log = '';
    proc.stdout?.setEncoding('utf8').on('data', (c: string) => (log += c));
    proc.stderr?.setEncoding('utf8').on('data', (c: string) => (log += c));
    const exited = new Promise((resolve) => proc.once('exit', resolve));
    try {
      const api = async (method: string, path: string, body?: unknown): Promise<Json> => {
        const res = await fetch(`${gantry.url}/v2/${endpointId}/${path}`, {
          method,
          headers: { Authorization: `Bearer ${runKey}`, 'Content-Type': 'application/json' },
          body: body === undefined ? undefined : JSON.stringify(body),
        });
        return (await res.json()) as Json;
      };
      const ids: string[] = [];
      for (const input of s.jobs) ids.push((await api('POST', 'run', { input })).id as string);
      if (s.cancel) {
        for (const id of ids) {
          await eventually(async () => ((await api('GET', `status/${id}`)).status === 'IN_PROGRESS' ? true : undefined), 30_000, `job ${id} to start (${s.name})`);
          // The worker's heartbeat names the job it holds (job_id=...), as RunPod's reaper expects.
          await eventually(async () => (proxy.seen.some((e) => e.url.includes('/ping/') && e.url.includes(`job_id=${id}`)) ? true : undefined), 15_000, `a ping naming job ${id} (${s.name})`);
          await api('POST', `cancel/${id}`);
        }
        // The worker hears of the cancel on its job-stop poll; that it acted on it is part of settled() below.
        await eventually(async () => (proxy.seen.some((e) => e.url.includes('/job-stop/') && e.status === 200) ? true : undefined), 15_000, `a job-stop answer (${s.name})`);
      }
      const finals = await eventually(async () => {
        const statuses = await Promise.all(ids.map(async (id) => (await api('GET', `status/${id}`)).status as string));
        return statuses.every((st) => ['COMPLETED', 'FAILED', 'CANCELLED', 'TIMED_OUT'].includes(st)) ? statuses : undefined;
      }, 60_000, `jobs of "${s.name}" to end`);
      if (JSON.stringify(finals) !== JSON.stringify(s.want)) throw new Error(`"${s.name}": jobs ended ${finals.join(',')}, wanted ${s.want.join(',')}`);
      await eventually(async () => (settled(proxy.seen) ? true : undefined), 30_000, `the worker to ask for work again and ping after its last job (${s.name})`);
      out[s.name] = distinct(proxy.seen.map((e) => normalise(e, { endpointId, workerId, jobIds: ids })));
    } catch (err) {
      throw new Error(`${(err as Error).message}\n--- the worker's output:\n${log.slice(-3000)}`, { cause: err });
    } finally {
      // What was recorded is complete: end it at once (SIGTERMed, runpod-python waits for its open polls).
      proc.kill('SIGKILL');
      await exited;
      await proxy.close();
    }
  }
  return out;
}

/** A job-done with the job's result: not a progress update ({"status": "IN_PROGRESS", ...}). */
function isResult(e: RawExchange): boolean {
  if (e.method !== 'POST' || !e.url.includes('/job-done/')) return false;
  try {
    return (JSON.parse(e.body) as Json | null)?.status !== 'IN_PROGRESS';
  } catch {
    return true;
  }
}

/**
 * Whether the worker is through with the scenario: after the answer to the last end of a job
 * (its result, or a job-stop naming it), it has asked for work again (so it let go of the job and
 * sent everything the job made) and sent a heartbeat, and after a job-stop answer it has opened
 * its next job-stop poll. Both implementations are recorded up to the same point in the protocol
 * rather than for a time, so a slow machine cannot leave a request out of one side only.
 */
function settled(seen: RawExchange[]): boolean {
  let from = -1;
  let byStop = false;
  for (const e of seen) {
    const stop = e.url.includes('/job-stop/') && e.status === 200;
    if (!stop && !isResult(e)) continue;
    if (e.answeredAt === undefined) return false;
    if (e.answeredAt >= from) [from, byStop] = [e.answeredAt, stop];
  }
  if (from < 0) return false;
  const later = seen.slice(from);
  const sent = (path: string): boolean => later.some((e) => e.url.includes(path));
  return (sent('/job-take/') || sent('/job-take-batch/')) && sent('/ping/') && (!byStop || sent('/job-stop/'));
}

/** Header values that are part of the protocol; other headers are recorded by name only. */
const KEPT_VALUES = new Set(['content-type', 'charset', 'accept', 'accept-encoding', 'authorization', 'x-request-id', 'user-agent', 'connection']);
/** Headers that every HTTP client sends differently and that carry nothing of the protocol. */
const DROPPED = new Set(['host', 'content-length', 'transfer-encoding']);

function normalise(e: RawExchange, ids: { endpointId: string; workerId: string; jobIds: string[] }): RequestShape {
  const swap = (text: string): string => {
    let t = text.split(ids.endpointId).join('{endpoint}').split(ids.workerId).join('{worker}');
    for (const id of ids.jobIds) t = t.split(id).join('{job}');
    return t;
  };
  // A ping names the jobs held at that moment, or none: which, and whether a ping fell inside a
  // job, is timing. That a ping names held jobs is checked by the cancel scenario, which waits for one.
  const target = swap(e.url).replace(/\/ping\/\{worker\}\?(job_id=(\{job\}(%2C|,)?)+&)?/, '/ping/{worker}?[job_id={jobs}&]');
  const headers: Record<string, string> = {};
  for (const [name, value] of Object.entries(e.headers)) {
    if (DROPPED.has(name)) continue;
    const v = Array.isArray(value) ? value.join(', ') : (value ?? '');
    headers[name] = KEPT_VALUES.has(name) ? headerValue(name, swap(v)) : '*';
  }
  const sorted = Object.fromEntries(Object.entries(headers).sort(([a], [b]) => (a < b ? -1 : 1)));
  const shape: RequestShape = { method: e.method, target, headers: sorted };
  if (e.body !== '') shape.body = bodyShape(swap(e.body));
  return shape;
}

/** Keys are secrets of the run; versions and platforms belong to the machine, not the protocol. */
function headerValue(name: string, v: string): string {
  if (name === 'authorization') return v.replace(/^(Bearer )?\S+$/, (_m, bearer: string | undefined) => `${bearer ?? ''}{worker-key}`);
  if (name === 'user-agent') {
    return v
      .replace(/\([^)]*\)/g, '(…)')
      .replace(/(RunPod-Python-SDK)\/\S+/, '$1/{version}')
      .replace(/(Language\/Python) \S+/, '$1 {version}')
      .replace(/(python-requests)\/\S+/, '$1/{version}')
      .replace(/(Python\/)\S+ (aiohttp\/)\S+/, '$1{version} $2{version}');
  }
  return v;
}

function bodyShape(text: string): unknown {
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch {
    return text;
  }
  return scrub(value);
}

/** A handler error's traceback, host and paths are the machine's; its keys and message are protocol. */
function scrub(value: unknown): unknown {
  if (Array.isArray(value)) return value.map(scrub);
  if (value === null || typeof value !== 'object') return value;
  const o: Json = {};
  for (const [k, v] of Object.entries(value as Json)) {
    if (k === 'error' && typeof v === 'string') o[k] = errorShape(v);
    else o[k] = scrub(v);
  }
  return o;
}

function errorShape(error: string): unknown {
  try {
    const info = JSON.parse(error) as unknown;
    if (info && typeof info === 'object' && !Array.isArray(info)) {
      const o = info as Json;
      return {
        json: Object.keys(o).sort(),
        error_type: o.error_type,
        error_message: o.error_message,
        runpod_version: typeof o.runpod_version === 'string' ? '{version}' : o.runpod_version,
      };
    }
  } catch {
    // not JSON: a plain message
  }
  return error.replace(/\ntraceback: [\s\S]*$/, '\ntraceback: {traceback}');
}

function distinct(shapes: RequestShape[]): RequestShape[] {
  const seen = new Set<string>();
  return shapes.filter((s) => {
    const key = JSON.stringify(s);
    if (seen.has(key)) return false;
    seen.add(key);
    return true;
  });
}
