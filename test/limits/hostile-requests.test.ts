// Issue 9 "What it must show": a property-style hostile-input run. A seeded generator (same
// seed, same requests; the seed is in the failure message) throws random and malformed requests
// at every route: bodies (random, truncated, deeply nested, invalid UTF-8, NUL bytes, wrong
// types, prototype names as keys), headers, ids (prototype names, thousands of characters),
// query values. First the /v2 client and worker routes, then (issue 22.4) the admin API, the
// console's API through a signed-in session, the OpenAI routes (answered by a real worker
// process) and /files. On both backends: never a 500, the gateway keeps answering, and no refused
// request changes a stored job or the endpoint's settings.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestGantry, type TestBackend, type TestGantry } from '../helpers/gantry.js';
import { spawnWorker, TOY_WORKER, type WorkerProcess } from '../openai/worker-process.js';
import { seededRandom as prng } from '../../src/util/seeded-random.js';

const PROTOTYPE_NAMES = ['constructor', 'toString', 'valueOf', 'hasOwnProperty', '__proto__', 'isPrototypeOf', '__defineSetter__'];
const ODD_SEGMENTS = ['%00', 'a%00b', '%ff', '%E2%82', '..', '%2F', 'x'.repeat(300), 'x'.repeat(6_000), '%F0%9F%98%80', 'a b', '%25', '-', '_', "'", '"', '\\', 'admin', '%0A', ...PROTOTYPE_NAMES];
const ODD_QUERY = ['', '-1', '0', '1e9', 'NaN', 'abc', '%00', '99999999999999999999', '1.5', '%ff', 'x'.repeat(2000)];
const CLIENT_OPS = ['run', 'runsync', 'status', 'status-sync', 'stream', 'cancel', 'retry', 'purge-queue', 'health', 'requests'];
const WORKER_OPS = ['job-take', 'job-take-batch', 'job-stop', 'ping', 'job-done', 'job-stream'];
const CONTENT_TYPES = ['application/json', 'text/plain', 'application/x-www-form-urlencoded', 'multipart/form-data; boundary=x', ''];

/** Random picks, JSON values and request bodies drawn from `rnd`. */
function generators(rnd: () => number) {
  const pick = <T>(xs: readonly T[]): T => xs[Math.floor(rnd() * xs.length)]!;
  const KEYS = ['input', 'output', 'error', 'policy', 'webhook', 's3Config', 'status', 'x', '\u0000', 'stopPod', 'name', 'scopes', 'endpoints', 'id', 'workersMax', 'rateLimits', 'key', 'password', 'model', 'messages', 'prompt', 'stream', ...PROTOTYPE_NAMES];
  const randomJson = (depth: number): unknown => {
    const r = rnd();
    if (depth > 3 || r < 0.3) return pick([0, -1, 1.5, 'x', '', '\u0000', 'é☃', true, null, 1e308, ...PROTOTYPE_NAMES]);
    if (r < 0.6) return Array.from({ length: Math.floor(rnd() * 4) }, () => randomJson(depth + 1));
    return Object.fromEntries(Array.from({ length: Math.floor(rnd() * 4) }, () => [pick(KEYS), randomJson(depth + 1)]));
  };
  const body = (): Buffer | string | undefined => {
    const r = rnd();
    if (r < 0.1) return undefined;
    if (r < 0.2) return Buffer.from([0x7b, 0x22, 0xff, 0xfe, 0x22, 0x3a, 0x31, 0x7d]); // {"\xff\xfe":1}
    if (r < 0.3) return `{"input":${'['.repeat(5_000)}${']'.repeat(5_000)}}`;
    if (r < 0.4) return JSON.stringify(randomJson(0)).slice(0, Math.floor(rnd() * 20));
    if (r < 0.45) return JSON.stringify({ input: { s: 'x'.repeat(1_000_000) } });
    if (r < 0.5) return `{"error":"a\\u0000b","output":1}`;
    if (r < 0.55) return `{"__proto__":{"admin":true},"constructor":{"prototype":{"x":1}},"input":{"toString":1}}`;
    return JSON.stringify(randomJson(0));
  };
  return { pick, body };
}

describe.each<TestBackend>(['sqlite', 'postgres'])('hostile requests at every route (%s)', (backend) => {
  let gantry: TestGantry;
  let runKey: string;
  let workerKey: string;
  const jobIds: string[] = [];

  beforeAll(async () => {
    // No worker is lost while the test runs: a job a random job-take claimed stays as it is (the snapshots compare).
    gantry = await startTestGantry({ jobTakeWaitMs: 100, workerLostMs: 3_600_000 }, { backend });
    runKey = await gantry.createKey(['run', 'read']);
    workerKey = await gantry.createKey(['worker']);
    await gantry.createEndpoint('hx');
    for (let i = 0; i < 3; i++) {
      const res = await fetch(`${gantry.url}/v2/hx/run`, { method: 'POST', headers: { authorization: `Bearer ${runKey}` }, body: '{"input":{"n":1}}' });
      jobIds.push(((await res.json()) as { id: string }).id);
    }
  });
  afterAll(async () => gantry?.close());

  /** The stored jobs and the endpoint's settings as the admin key reads them, to see that refused requests change none. */
  async function snapshot(): Promise<string> {
    const admin = { authorization: `Bearer ${gantry.adminKey}` };
    const parts = await Promise.all([...jobIds.map((id) => `/v2/hx/status/${id}`), '/admin/v1/endpoints/hx'].map(async (path) => (await fetch(`${gantry.url}${path}`, { headers: admin })).text()));
    return parts.join('\n');
  }

  /** Sends one request; a failure (no answer, a 5xx, or a refused request that changed what snapshot reads) is added to `failures`. */
  async function probe(failures: string[], i: number, method: string, path: string, headers: Record<string, string>, data: Buffer | string | undefined): Promise<number | undefined> {
    const before = await snapshot();
    const what = `#${i} ${method} ${path.slice(0, 120)}`;
    let status: number;
    try {
      const res = await fetch(`${gantry.url}${path}`, { method, headers, body: data });
      status = res.status;
      await res.arrayBuffer();
    } catch (err) {
      failures.push(`${what}: ${(err as Error).message}`);
      return undefined;
    }
    if (status >= 500) failures.push(`${what} -> ${status}`);
    if (status >= 400 && (await snapshot()) !== before) failures.push(`${what} -> ${status} changed a stored job`);
    return status;
  }

  it('answers 300 seeded random requests without a 500, and refused ones change no job', async () => {
    const seed = Number(process.env.HOSTILE_SEED ?? 9_2026);
    const rnd = prng(seed);
    const { pick, body } = generators(rnd);
    const segment = (real: string): string => (rnd() < 0.5 ? real : pick(ODD_SEGMENTS));
    const failures: string[] = [];
    for (let i = 0; i < 300; i++) {
      const worker = rnd() < 0.4;
      const op = worker ? pick(WORKER_OPS) : pick(CLIENT_OPS);
      const jobId = segment(pick(jobIds));
      const extra = worker ? `/${segment('w-hx')}${op === 'job-done' || op === 'job-stream' ? `/${jobId}` : ''}` : ['status', 'status-sync', 'stream', 'cancel', 'retry'].includes(op) || rnd() < 0.1 ? `/${jobId}` : '';
      const query = `?wait=${pick(ODD_QUERY)}&batch_size=${pick(ODD_QUERY)}&job_id=${segment(pick(jobIds))}&ttl=${pick(ODD_QUERY)}&runpod_version=1.12.0`;
      const path = `/v2/${segment('hx')}/${rnd() < 0.95 ? op : pick(ODD_SEGMENTS)}${extra}${rnd() < 0.8 ? query : ''}`;
      const method = rnd() < 0.8 ? (['run', 'runsync', 'cancel', 'retry', 'purge-queue', 'job-done', 'job-stream'].includes(op) ? 'POST' : 'GET') : pick(['PUT', 'DELETE', 'PATCH', 'POST', 'GET']);
      const key = pick([worker ? workerKey : runKey, worker ? workerKey : runKey, 'garbage', '', `Bearer ${runKey}\u0000`]);
      const headers: Record<string, string> = { authorization: key.startsWith('Bearer') ? key.replace('\u0000', '') + 'x' : `Bearer ${key}` };
      const ct = pick(CONTENT_TYPES);
      if (ct) headers['content-type'] = ct;
      await probe(failures, i, method, path, headers, method === 'GET' ? undefined : body());
    }
    expect(failures, `seed ${seed}`).toEqual([]);
    expect((await fetch(`${gantry.url}/healthz`)).status).toBe(200);
  }, 120_000);

  it('answers 300 seeded random requests at the admin, console, OpenAI, /files and worker routes without a 500, and refused ones change no job', async () => {
    const seed = Number(process.env.HOSTILE_SEED ?? 22_2026) + 1;
    const rnd = prng(seed);
    const { pick, body } = generators(rnd);
    const odd = (real: string): string => (rnd() < 0.5 ? real : pick(ODD_SEGMENTS));
    const session = await signIn();
    const worker = await startToyWorker();
    const failures: string[] = [];
    const families: Record<string, () => { path: string; methods: string[]; headers: Record<string, string> }> = {
      admin: () => ({
        path: `/admin/${odd('v1')}/${pick(['keys', 'endpoints', 'usage', ...PROTOTYPE_NAMES])}${rnd() < 0.6 ? `/${odd('hx-adm')}` : ''}${rnd() < 0.3 ? `/${odd('workers')}${rnd() < 0.5 ? `/${odd('w1')}/${odd('logs')}` : ''}` : ''}?lines=${pick(ODD_QUERY)}&from=${pick(ODD_QUERY)}&groupBy=${pick(['key', 'endpoint', ...PROTOTYPE_NAMES])}`,
        methods: ['GET', 'POST', 'PATCH', 'DELETE', 'PUT'],
        headers: { authorization: `Bearer ${pick([gantry.adminKey, gantry.adminKey, runKey, 'garbage'])}` },
      }),
      console: () => ({
        path: `/console/${pick(['api', 'api', 'api', 'assets', ...PROTOTYPE_NAMES])}/${pick(['admin', 'v2', 'jobs', 'charts', 'session', ...PROTOTYPE_NAMES])}/${odd(pick(['hx', 'keys', 'endpoints']))}/${odd(pick([...CLIENT_OPS, ...jobIds]))}${rnd() < 0.4 ? `/${odd(pick(jobIds))}` : ''}?chunks=${pick(ODD_QUERY)}&minutes=${pick(ODD_QUERY)}`,
        methods: ['GET', 'POST', 'PATCH', 'PUT'],
        headers: rnd() < 0.8 ? { cookie: session.cookie, ...(rnd() < 0.7 ? { 'x-csrf-token': session.csrf } : {}) } : {},
      }),
      openai: () => ({
        path: `/v2/${odd('hx-oai')}/openai/${odd('v1')}/${pick(['chat/completions', 'completions', 'models', 'embeddings', ...PROTOTYPE_NAMES])}${rnd() < 0.2 ? `/${pick(ODD_SEGMENTS)}` : ''}`,
        methods: ['POST', 'GET', 'DELETE'],
        headers: { authorization: `Bearer ${pick([runKey, runKey, workerKey, 'garbage'])}` },
      }),
      files: () => ({
        path: `/files/${odd('image-fast')}/${odd('0192e0c4-7e2f-7000-8000-000000000000.jpeg')}?expires=${pick(ODD_QUERY)}&sig=${pick(ODD_QUERY)}`,
        methods: ['GET', 'HEAD', 'POST'],
        headers: {},
      }),
      worker: () => ({
        path: `/v2/${odd('hx')}/${pick(WORKER_OPS)}/${odd('w-hx')}${rnd() < 0.6 ? `/${odd(pick(jobIds))}` : ''}?job_id=${odd(pick(jobIds))}&batch_size=${pick(ODD_QUERY)}`,
        methods: ['GET', 'POST'],
        headers: { authorization: `Bearer ${pick([workerKey, workerKey, runKey])}` },
      }),
    };
    try {
      for (let i = 0; i < 300; i++) {
        const { path, methods, headers } = families[pick(Object.keys(families))]!();
        const method = pick(methods);
        const ct = pick(CONTENT_TYPES);
        if (ct) headers['content-type'] = ct;
        await probe(failures, i, method, path, headers, method === 'GET' || method === 'HEAD' ? undefined : body());
      }
    } finally {
      await worker.stop();
    }
    expect(failures, `seed ${seed}`).toEqual([]);
    expect((await fetch(`${gantry.url}/healthz`)).status).toBe(200);
  }, 120_000);

  /** A console session of the admin key: its cookie and CSRF token. */
  async function signIn(): Promise<{ cookie: string; csrf: string }> {
    const res = await fetch(`${gantry.url}/console/api/session`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ key: gantry.adminKey }) });
    const cookie = res.headers.get('set-cookie')!.split(';')[0]!;
    return { cookie, csrf: ((await res.json()) as { csrfToken: string }).csrfToken };
  }

  /** The toy LLM worker (a real `gantry worker` process) on endpoint hx-oai, so the OpenAI requests that make jobs are answered. */
  async function startToyWorker(): Promise<WorkerProcess> {
    await gantry.createEndpoint('hx-oai');
    const worker = spawnWorker(TOY_WORKER, gantry.workerEnv('hx-oai'));
    const res = await fetch(`${gantry.url}/v2/hx-oai/openai/v1/models`, { headers: { authorization: `Bearer ${runKey}` } });
    expect(res.status).toBe(200);
    return worker;
  }
});
