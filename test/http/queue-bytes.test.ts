// The queue's bytes bound (issue 22.2): an endpoint's queued inputs may hold at most
// GANTRY_QUEUE_MAX_INPUT_BYTES; past it a submission gets 429 QUEUE_FULL with Retry-After, like
// the count bound. Over HTTP, on both stores: the bound counts UTF-8 bytes of the input, each
// endpoint alone; a job into an empty queue is always taken; jobs leaving the queue (taken by
// a worker, purged) make room again once the gauge re-reads the store (input_bytes summed).
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestGantry, type TestBackend, type TestGantry } from '../helpers/gantry.js';
import { clientFor, isErrorBody, uniqueId, workerFor, type Client } from './http-helpers.js';

/** The bound of these gateways: the least the setting takes. */
const MAX = 1_000_000;
/** An input of about `bytes` bytes of JSON text ({"s":"…"} is 8 bytes more). */
const input = (bytes: number, ch = 'x'): { s: string } => ({ s: ch.repeat(bytes) });

describe.each(['sqlite', 'postgres'] as const)('GANTRY_QUEUE_MAX_INPUT_BYTES (%s store)', (backend: TestBackend) => {
  let t: TestGantry;
  let runKey: string;
  let workerKey: string;

  beforeAll(async () => {
    t = await startTestGantry({ queueMaxInputBytes: MAX, jobTakeWaitMs: 200 }, { backend });
    runKey = await t.createKey(['run', 'read']);
    workerKey = await t.createKey(['worker']);
  }, 60_000);

  afterAll(async () => {
    await t?.close();
  });

  async function endpoint(): Promise<{ ep: string; c: Client }> {
    const ep = uniqueId('bytes');
    await t.createEndpoint(ep, { workersMax: 1 });
    return { ep, c: clientFor(t, ep, runKey) };
  }

  it('refuses past the bound with 429 QUEUE_FULL and Retry-After, counting UTF-8 bytes; another endpoint is not affected', async () => {
    const { c } = await endpoint();
    // 'é' is two bytes: three inputs of 150,000 characters are 900,024 bytes.
    for (let i = 0; i < 3; i++) expect((await c.run({ input: input(150_000, 'é') })).status).toBe(200);
    const refused = await c.run({ input: input(150_000) });
    expect(refused.status).toBe(429);
    expect(refused.json).toMatchObject({ code: 'QUEUE_FULL' });
    expect(refused.json.error).toMatch(/bytes of input/);
    expect(isErrorBody(refused)).toBe(true);
    expect(Number(refused.headers.get('retry-after'))).toBeGreaterThanOrEqual(1);
    // What still fits is taken: 900,024 + 50,008 ≤ 1,000,000.
    expect((await c.run({ input: input(50_000) })).status).toBe(200);
    // Far under the count bound (50): the bytes refused it.
    expect((await c.health()).json).toMatchObject({ jobs: { inQueue: 4 } });
    const other = await endpoint();
    expect((await other.c.run({ input: input(400_000) })).status).toBe(200);
  });

  it('takes one job larger than the bound into an empty queue, then nothing more until it leaves', async () => {
    const { ep, c } = await endpoint();
    const big = await c.run({ input: input(1_500_000) });
    expect(big.status).toBe(200);
    expect((await c.run({ input: { n: 1 } })).json).toMatchObject({ code: 'QUEUE_FULL' });
    // A worker takes it: once the gauge re-reads the queue (at most a second), there is room again.
    const taken = await workerFor(t, ep, workerKey).take();
    expect(taken.json).toMatchObject({ id: big.json.id });
    await expect.poll(async () => (await c.run({ input: input(600_000) })).status, { timeout: 20_000, interval: 250 }).toBe(200);
  });

  it('a purge makes room again', async () => {
    const { c } = await endpoint();
    for (let i = 0; i < 2; i++) expect((await c.run({ input: input(450_000) })).status).toBe(200);
    expect((await c.run({ input: input(450_000) })).status).toBe(429);
    expect((await c.purge()).json).toMatchObject({ removed: 2 });
    await expect.poll(async () => (await c.run({ input: input(450_000) })).status, { timeout: 20_000, interval: 250 }).toBe(200);
  });
});
