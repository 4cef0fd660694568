// Issue 9 "What it must show": a property-style hostile-input run. A seeded generator (same
// seed, same requests; the seed is in the failure message) throws random and malformed requests
// at every route: bodies (random, truncated, deeply nested, invalid UTF-8, NUL bytes, wrong
// types), headers, ids, query values. On both backends: never a 500, the gateway keeps
// answering, and no refused request changes a stored job.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestGantry, type TestBackend, type TestGantry } from '../helpers/gantry.js';

/** mulberry32: a small seeded PRNG, so a failing run can be replayed from its seed. */
function prng(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

const ODD_SEGMENTS = ['%00', 'a%00b', '%ff', '%E2%82', '..', '%2F', 'x'.repeat(300), '%F0%9F%98%80', 'a b', '%25', '-', '_', "'", '"', '\\', 'admin'];
const ODD_QUERY = ['', '-1', '0', '1e9', 'NaN', 'abc', '%00', '99999999999999999999', '1.5', '%ff', 'x'.repeat(2000)];
const CLIENT_OPS = ['run', 'runsync', 'status', 'status-sync', 'stream', 'cancel', 'retry', 'purge-queue', 'health', 'requests'];
const WORKER_OPS = ['job-take', 'job-take-batch', 'job-stop', 'ping', 'job-done', 'job-stream'];
const CONTENT_TYPES = ['application/json', 'text/plain', 'application/x-www-form-urlencoded', 'multipart/form-data; boundary=x', ''];

describe.each<TestBackend>(['sqlite', 'postgres'])('hostile requests at every route (%s)', (backend) => {
  let gantry: TestGantry;
  let runKey: string;
  let workerKey: string;
  const jobIds: string[] = [];

  beforeAll(async () => {
    gantry = await startTestGantry({ jobTakeWaitMs: 100 }, { backend });
    runKey = await gantry.createKey(['run', 'read']);
    workerKey = await gantry.createKey(['worker']);
    await gantry.createEndpoint('hx');
    for (let i = 0; i < 3; i++) {
      const res = await fetch(`${gantry.url}/v2/hx/run`, { method: 'POST', headers: { authorization: `Bearer ${runKey}` }, body: '{"input":{"n":1}}' });
      jobIds.push(((await res.json()) as { id: string }).id);
    }
  });
  afterAll(async () => gantry?.close());

  /** The stored jobs as the admin key reads them, to see that refused requests change none. */
  async function snapshot(): Promise<string> {
    const parts = await Promise.all(jobIds.map(async (id) => (await fetch(`${gantry.url}/v2/hx/status/${id}`, { headers: { authorization: `Bearer ${gantry.adminKey}` } })).text()));
    return parts.join('\n');
  }

  it('answers 300 seeded random requests without a 500, and refused ones change no job', async () => {
    const seed = Number(process.env.HOSTILE_SEED ?? 9_2026);
    const rnd = prng(seed);
    const pick = <T>(xs: readonly T[]): T => xs[Math.floor(rnd() * xs.length)]!;
    const randomJson = (depth: number): unknown => {
      const r = rnd();
      if (depth > 3 || r < 0.3) return pick([0, -1, 1.5, 'x', '', '\u0000', 'é☃', true, null, 1e308]);
      if (r < 0.6) return Array.from({ length: Math.floor(rnd() * 4) }, () => randomJson(depth + 1));
      return Object.fromEntries(Array.from({ length: Math.floor(rnd() * 4) }, () => [pick(['input', 'output', 'error', 'policy', 'webhook', 's3Config', 'status', 'x', '\u0000', 'stopPod']), randomJson(depth + 1)]));
    };
    const body = (): Buffer | string | undefined => {
      const r = rnd();
      if (r < 0.1) return undefined;
      if (r < 0.2) return Buffer.from([0x7b, 0x22, 0xff, 0xfe, 0x22, 0x3a, 0x31, 0x7d]); // {"\xff\xfe":1}
      if (r < 0.3) return `{"input":${'['.repeat(5_000)}${']'.repeat(5_000)}}`;
      if (r < 0.4) return JSON.stringify(randomJson(0)).slice(0, Math.floor(rnd() * 20));
      if (r < 0.45) return JSON.stringify({ input: { s: 'x'.repeat(1_000_000) } });
      if (r < 0.5) return `{"error":"a\\u0000b","output":1}`;
      return JSON.stringify(randomJson(0));
    };
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
      const data = method === 'GET' ? undefined : body();
      const before = await snapshot();
      let status: number;
      try {
        const res = await fetch(`${gantry.url}${path}`, { method, headers, body: data });
        status = res.status;
        await res.arrayBuffer();
      } catch (err) {
        failures.push(`#${i} ${method} ${path.slice(0, 120)}: ${(err as Error).message}`);
        continue;
      }
      if (status >= 500) failures.push(`#${i} ${method} ${path.slice(0, 120)} -> ${status}`);
      if (status >= 400 && (await snapshot()) !== before) failures.push(`#${i} ${method} ${path.slice(0, 120)} -> ${status} changed a stored job`);
    }
    expect(failures, `seed ${seed}`).toEqual([]);
    expect((await fetch(`${gantry.url}/healthz`)).status).toBe(200);
  }, 120_000);
});
