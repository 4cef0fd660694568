// Numbers docs/api.md and the spec promise, over HTTP: the queue-overload refusal with workersMax ≥ 1,
// the runsync wait clamp and default, /requests' default and cap, and job-take-batch's cap.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parkedJobCalls, startTestGantry, waitingJobCalls, type TestGantry } from '../helpers/gantry.js';
import { clientFor, isErrorBody, uniqueId, workerFor, type Client } from './http-helpers.js';

let t: TestGantry;
let runKey: string;
let workerKey: string;

beforeAll(async () => {
  t = await startTestGantry({ jobTakeWaitMs: 200 });
  runKey = await t.createKey(['run']);
  workerKey = await t.createKey(['worker']);
});

afterAll(async () => {
  await t?.close();
});

async function endpoint(settings: Record<string, unknown> = {}): Promise<{ ep: string; c: Client }> {
  const ep = uniqueId('limits');
  await t.createEndpoint(ep, settings);
  return { ep, c: clientFor(t, ep, runKey) };
}

/** Submits `n` jobs, 8 at a time; returns their ids (each must be accepted). */
async function submitMany(c: Client, n: number): Promise<string[]> {
  const ids: string[] = [];
  let next = 0;
  const client = async (): Promise<void> => {
    while (next < n) {
      next++;
      ids.push(await c.submit({ input: {} }));
    }
  };
  await Promise.all(Array.from({ length: 8 }, client));
  return ids;
}

describe('QUEUE_FULL (spec: over 50 queued AND over workersMax × 500)', () => {
  it('with workersMax 1, about 500 queued jobs are accepted, then 429 QUEUE_FULL with Retry-After', async () => {
    const { c } = await endpoint({ workersMax: 1 });
    // Far past 50: the limit is workersMax × 500 here.
    expect(await submitMany(c, 490)).toHaveLength(490);
    // The gateway's queue count is re-read once a second and may be off by the submissions in
    // flight at that moment (src/jobs/queue-gauge.ts), so the refusal is looked for around 500.
    let queued = 490;
    let refused = await c.run({ input: {} });
    while (refused.status === 200 && queued < 520) {
      queued++;
      refused = await c.run({ input: {} });
    }
    expect(queued).toBeGreaterThanOrEqual(495);
    expect(refused.status).toBe(429);
    expect(refused.json).toMatchObject({ code: 'QUEUE_FULL' });
    expect(isErrorBody(refused)).toBe(true);
    expect(Number(refused.headers.get('retry-after'))).toBeGreaterThanOrEqual(1);
    // A job leaving the queue makes room again (the count is re-read from the store).
    expect((await c.purge()).json).toMatchObject({ removed: queued });
    await expect
      .poll(async () => (await c.run({ input: {} })).status, { timeout: 10_000, interval: 200 })
      .toBe(200);
  }, 60_000);
});

describe('runsync wait', () => {
  it('a wait under 1000 ms is raised to 1000 ms; one over 300000 is accepted (clamped), not refused', async () => {
    const { c } = await endpoint();
    const short = await c.runsync({ input: {} }, '?wait=10');
    expect(short.status).toBe(200);
    expect(short.json).toMatchObject({ status: 'IN_QUEUE' });
    expect(short.ms).toBeGreaterThanOrEqual(950);
    const long = c.runsync({ input: {} }, '?wait=999999999');
    await parkedJobCalls(t.gantry);
    const [job] = (await c.requests()).json.requests as { id: string }[];
    expect((await c.cancel(job!.id)).status).toBe(200);
    expect((await long).json).toMatchObject({ id: job!.id, status: 'CANCELLED' });
  });

  it('without ?wait a runsync is still waiting after a 1 s runsync has come and gone (default 90 s)', async () => {
    const { c } = await endpoint();
    let answered = false;
    const waiting = c.runsync({ input: { first: true } }).finally(() => (answered = true));
    await parkedJobCalls(t.gantry);
    const [first] = (await c.requests()).json.requests as { id: string }[];
    const oneSecond = await c.runsync({ input: {} }, '?wait=1000');
    expect(oneSecond.json.status).toBe('IN_QUEUE');
    expect(answered).toBe(false);
    expect(waitingJobCalls(t.gantry)).toBe(1);
    expect((await c.cancel(first!.id)).status).toBe(200);
    expect((await waiting).json).toMatchObject({ id: first!.id, status: 'CANCELLED' });
  });
});

describe('/requests', () => {
  it('lists 50 by default, up to 1000 with ?limit, and refuses ?limit=1001 naming limit', async () => {
    const { c } = await endpoint();
    const ids = await submitMany(c, 60);
    const byDefault = await c.requests();
    expect((byDefault.json.requests as unknown[]).length).toBe(50);
    const all = await c.requests('?limit=1000');
    expect((all.json.requests as { id: string }[]).map((j) => j.id).sort()).toEqual([...ids].sort());
    const over = await c.requests('?limit=1001');
    expect(over.status).toBe(400);
    expect(over.json.error).toContain('limit');
  });
});

describe('job-take-batch', () => {
  it('hands out at most 100 jobs however large batch_size is', async () => {
    const { ep, c } = await endpoint();
    await submitMany(c, 101);
    const w = workerFor(t, ep, workerKey);
    const r = await w.takeBatch(500);
    expect(r.status).toBe(200);
    expect(r.json as unknown as unknown[]).toHaveLength(100);
    const rest = await w.takeBatch(500);
    expect(rest.json as unknown as unknown[]).toHaveLength(1);
  });
});
