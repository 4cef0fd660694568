// Worker logs in the store (docs/logs.md, issue 27.1), on both stores, with real worker
// processes started by the pool: a line printed during a job is found by its job id after the
// worker stopped and after a gateway restart (and, on PostgreSQL, through a second gateway);
// a worker printing 100,000 lines at once is throttled with the gateway's memory flat and a
// note saying how many lines went; follow mode hands over a new line as it is stored.
// Needs `npm run build` (the pool workers run dist/src/cli/main.js).
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { GantryConfig } from '../../src/config/config.js';
import { createAdminClient, type AdminClient } from '../../src/sdk/admin-client.js';
import { createClient, type GantryClient } from '../../src/sdk/client.js';
import { eventually, startTestGantry, type TestBackend, type TestGantry } from '../helpers/gantry.js';
import { createTestSchema, type TestSchema } from '../helpers/postgres.js';

const ROOT = fileURLToPath(new URL('../..', import.meta.url));
const CLI = join(ROOT, 'dist/src/cli/main.js');
const LOG_WORKER = `exec node ${JSON.stringify(CLI)} worker ${JSON.stringify(join(ROOT, 'test/e2e/fixtures/log-worker.mjs'))}`;
const BURST = 100_000;
// Prints BURST lines at once, then stays up printing nothing.
const CHATTY = `exec node -e "let s='';for(let i=0;i<${BURST};i++)s+='chatty line '+i+'\\n';process.stdout.write(s);setInterval(()=>{},1e6)"`;
const SETTINGS: Partial<GantryConfig> = { autoscalerIntervalMs: 50, workerStopGraceMs: 5_000, workerRestartBackoffMs: 300, reaperIntervalMs: 200 };

interface Line { id: string; at: string; level: string | null; message: string; stream: string; endpointId: string; workerId: string; jobId: string | null; line: string }

/** The admin key of the gateway started last: each start installs its own, replacing the one before (docs/security.md). */
let adminKey = '';
const admin = (t: TestGantry): AdminClient => createAdminClient({ url: t.url, adminKey });
const client = (t: TestGantry): GantryClient => createClient({ url: t.url, apiKey: adminKey });
const get = (t: TestGantry, path: string, init: RequestInit = {}): Promise<Response> => fetch(`${t.url}${path}`, { ...init, headers: { authorization: `Bearer ${adminKey}` } });

async function start(backend: TestBackend, options: { dataDir?: string; databaseUrl?: string }): Promise<TestGantry> {
  const t = await startTestGantry(SETTINGS, { backend, ...options });
  adminKey = t.adminKey;
  return t;
}

async function logs(t: TestGantry, query: string): Promise<{ lines: Line[]; cursor: string | null }> {
  const res = await get(t, `/admin/v1/logs?${query}`);
  if (res.status !== 200) throw new Error(`GET /admin/v1/logs?${query}: ${res.status} ${await res.text()}`);
  return (await res.json()) as { lines: Line[]; cursor: string | null };
}

/** Heap in use after a full collection (gc exposed for this measurement only). */
function heapAfterGc(): number {
  setFlagsFromString('--expose-gc');
  const gc = runInNewContext('gc') as () => void;
  gc();
  gc();
  return process.memoryUsage().heapUsed;
}

/** Where a backend's gateways keep their data, so a restart finds it: a folder, or a schema. */
async function storage(backend: TestBackend): Promise<{ options: { dataDir?: string; databaseUrl?: string }; drop(): Promise<void> }> {
  if (backend === 'postgres') {
    const schema: TestSchema = await createTestSchema('logs');
    return { options: { databaseUrl: schema.url }, drop: () => schema.drop() };
  }
  const dir = mkdtempSync(join(tmpdir(), 'gantry-logs-'));
  return { options: { dataDir: dir }, drop: async () => rmSync(dir, { recursive: true, force: true }) };
}

describe.each(['sqlite', 'postgres'] as const)('worker logs in the store (%s)', (backend) => {
  let where: Awaited<ReturnType<typeof storage>>;
  let a: TestGantry;
  let b: TestGantry | undefined;
  beforeAll(async () => {
    if (!existsSync(CLI)) throw new Error('run `npm run build` first: the pool workers run dist/src/cli/main.js');
    where = await storage(backend);
    a = await start(backend, where.options);
    // PostgreSQL: a second gateway on the same schema; the first leads and runs the pool.
    if (backend === 'postgres') b = await start(backend, where.options);
  });
  afterAll(async () => {
    await b?.close();
    await a?.close();
    await where?.drop();
  });

  it('a line printed during a job is found by its job id after the worker stopped and after a restart', async () => {
    await admin(a).createEndpoint({ id: 'logged', workersMax: 1, idleTimeout: 1, worker: { command: LOG_WORKER } });
    const { id } = await client(a).run('logged', { input: { marker: `m-${backend}` } });
    const job = await eventually(async () => {
      const j = await client(a).status('logged', id);
      return j.status === 'COMPLETED' ? j : undefined;
    }, 30_000, 'the job');
    const workerId = job.workerId as string;
    // Scaled down after its idle second; its last note is stored once it is gone.
    await eventually(async () => ((await logs(a, `worker=${workerId}&q=stopped (scaled down`)).lines.length > 0 ? true : undefined), 30_000, 'the worker to stop');

    const check = async (t: TestGantry): Promise<void> => {
      const { lines } = await logs(t, `job=${id}`);
      const plain = lines.find((l) => l.line === `plain line of m-${backend}`);
      expect(plain).toMatchObject({ jobId: id, workerId, endpointId: 'logged', stream: 'stdout', level: null, message: `plain line of m-${backend}` });
      const runpod = lines.find((l) => l.message === `runpod line of m-${backend}`);
      expect(runpod).toMatchObject({ jobId: id, level: 'warn', stream: 'stdout' });
      expect(JSON.parse(runpod!.line)).toEqual({ requestId: id, message: `runpod line of m-${backend}`, level: 'WARN' });
      // The SDK's own pino lines name the job too.
      expect(lines.some((l) => l.message === 'job started' && l.level === 'info')).toBe(true);
      // The worker's key is never stored.
      expect(lines.find((l) => l.line.startsWith('my key is'))?.line).toBe('my key is [redacted]');
      expect(Date.parse(plain!.at)).toBeGreaterThan(0);
      // The worker's own route reads the same store.
      const res = await get(t, `/admin/v1/endpoints/logged/workers/${workerId}/logs?lines=1000`);
      const own = (await res.json()) as { lines: Line[] };
      expect(own.lines.some((l) => l.line === `plain line of m-${backend}` && l.jobId === id)).toBe(true);
    };
    await check(a);
    if (b) await check(b);

    // A restart: the first gateway goes and comes back on the same store.
    await a.close();
    a = await start(backend, where.options);
    await check(a);
    if (b) await check(b);
  }, 120_000);

  it('a worker printing 100,000 lines at once is throttled, with a note of the lines dropped and the memory flat', async () => {
    // After the restart on PostgreSQL the other gateway may lead: the pool runs there.
    const leader = await eventually(async () => [a, b].find((t) => t?.gantry.leader.isLeader()), 20_000, 'a leader');
    const before = heapAfterGc();
    const rssBefore = process.memoryUsage().rss;
    await admin(leader).createEndpoint({ id: 'chatty', workersMin: 1, workersMax: 1, worker: { command: CHATTY } });
    // Every line printed is either stored or counted in a note: once the two add up to the burst, it is all accounted for.
    const count = async (): Promise<{ kept: number; dropped: number; notes: Line[] }> => {
      const notes = (await logs(leader, 'endpoint=chatty&q=not kept&limit=1000')).lines;
      const dropped = notes.reduce((sum, n) => sum + Number(/^(\d+) lines? not kept: \1 over 100 lines a second \(GANTRY_LOG_LINES_PER_SECOND\)$/.exec(n.line)?.[1] ?? NaN), 0);
      let kept = 0;
      for (let cursor: string | null = ''; cursor !== null; ) {
        const page = await logs(leader, `endpoint=chatty&q=chatty line&limit=1000&cursor=${cursor}`);
        // The `started` note quotes the command, which holds the words too.
        kept += page.lines.filter((l) => l.stream === 'stdout').length;
        cursor = page.cursor;
      }
      return { kept, dropped, notes };
    };
    let last: unknown;
    const { kept, dropped, notes } = await eventually(async () => {
      const c = await count();
      last = c;
      return c.kept + c.dropped === BURST ? c : undefined;
    }, 60_000, 'the burst to be stored or noted as dropped').catch((err: unknown) => {
      throw new Error(`${String(err)}: ${JSON.stringify(last)}`);
    });
    expect(notes.every((n) => n.stream === 'gantry')).toBe(true);
    // Kept: the burst allowance (1,000) and the rate over the time it took; far from all of them.
    expect(kept).toBeGreaterThanOrEqual(1_000);
    expect(kept).toBeLessThan(BURST / 20);
    expect(dropped).toBeGreaterThan(BURST * 0.9);
    expect(leader.gantry.gateway.logs.stats().pendingLines).toBeLessThanOrEqual(20_000);
    const grown = heapAfterGc() - before;
    // Generous: the test process holds both gateways and their clients.
    expect(grown).toBeLessThan(40_000_000);
    expect(process.memoryUsage().rss - rssBefore).toBeLessThan(200_000_000);
    await admin(leader).updateEndpoint('chatty', { workersMin: 0, workersMax: 0 });
  }, 120_000);

  it('follow mode hands over a new line as it is stored (through the other gateway on PostgreSQL)', async () => {
    const reader = b ?? a;
    await admin(a).createEndpoint({ id: 'followed', workersMax: 1, idleTimeout: 5, worker: { command: LOG_WORKER } });
    const controller = new AbortController();
    const res = await get(reader, '/admin/v1/logs?endpoint=followed&follow=1', { signal: controller.signal });
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toMatch(/^text\/event-stream/);
    const events: Line[] = [];
    let text = '';
    const reading = (async () => {
      const decoder = new TextDecoder();
      for await (const chunk of res.body as unknown as AsyncIterable<Uint8Array>) {
        text += decoder.decode(chunk, { stream: true });
        let end: number;
        while ((end = text.indexOf('\n\n')) >= 0) {
          const block = text.slice(0, end);
          text = text.slice(end + 2);
          const data = block.split('\n').filter((l) => l.startsWith('data: ')).map((l) => l.slice(6)).join('\n');
          if (data) events.push(JSON.parse(data) as Line);
        }
      }
    })().catch(() => undefined);
    try {
      const { id } = await client(a).run('followed', { input: { marker: 'followed' } });
      const line = await eventually(async () => events.find((e) => e.line === 'plain line of followed'), 30_000, 'the followed line');
      expect(line).toMatchObject({ jobId: id, endpointId: 'followed' });
      // Delivered in well under the generous bound once stored (the writer flushes every 250 ms and its notification wakes the follow).
      expect(Date.now() - Date.parse(line.at)).toBeLessThan(20_000);
    } finally {
      controller.abort();
      await reading;
    }
  }, 60_000);
});
