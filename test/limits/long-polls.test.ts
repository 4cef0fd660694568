// Issue 9 item 6: held long-polls (status-sync, an empty stream) count against their own cap,
// so a key that opens hundreds of them cannot lock other clients out of /status and /stream.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { eventually, parkedJobCalls, startTestGantry, type TestBackend, type TestGantry } from '../helpers/gantry.js';
import { clientFor, uniqueId, workerFor } from '../http/http-helpers.js';

describe('long-polls have a cap of their own', () => {
  let gantry: TestGantry;
  let key: string;
  const aborts = new AbortController();

  beforeAll(async () => {
    gantry = await startTestGantry({ rateLimits: true });
    key = await gantry.createKey(['run', 'read']);
    await gantry.createEndpoint('lp');
  });
  afterAll(async () => {
    aborts.abort();
    await gantry?.close();
  });

  const get = (path: string, signal?: AbortSignal): Promise<Response> => fetch(`${gantry.url}/v2/lp/${path}`, { headers: { authorization: `Bearer ${key}` }, signal });

  it('keeps /status and an unheld /stream answering while the long-poll cap is full', async () => {
    const run = await fetch(`${gantry.url}/v2/lp/run`, { method: 'POST', headers: { authorization: `Bearer ${key}` }, body: '{"input":{}}' });
    const { id } = (await run.json()) as { id: string };
    const cap = 400; // the spec's concurrency for status reads, and the long-poll cap
    // No worker: every status-sync is held until it is aborted.
    const heldCalls = Array.from({ length: cap }, () => get(`status-sync/${id}?wait=60000`, aborts.signal).catch(() => undefined));
    const refused = await eventually(async () => {
      const res = await get(`status-sync/${id}?wait=1000`);
      return res.status === 429 ? ((await res.json()) as { code: string }) : undefined;
    }, 20_000, 'the long-poll cap to be full');
    expect(refused.code).toBe('TOO_MANY_CONCURRENT');
    const status = await get(`status/${id}`);
    expect(status.status).toBe(200);
    expect(((await status.json()) as { status: string }).status).toBe('IN_QUEUE');
    const stream = await get(`stream/${id}?wait=0`);
    expect(stream.status).toBe(200);
    aborts.abort();
    await Promise.all(heldCalls);
  }, 60_000);
});

// Issue 24, item 4: the long-poll cap is shared between keys (keyShare, docs/security.md).
describe.each<TestBackend>(['sqlite', 'postgres'])('the long-poll cap is shared between keys (%s)', (backend) => {
  let gantry: TestGantry;
  const aborts = new AbortController();
  afterAll(async () => {
    aborts.abort();
    await gantry?.close();
  });

  it("one key holding every long-poll slot it may still leaves another key's held status-sync working", async () => {
    gantry = await startTestGantry({ rateLimits: true }, { backend });
    const ep = uniqueId('lp-share');
    const cap = 8;
    await gantry.createEndpoint(ep, { rateLimits: { 'long-poll': { concurrent: cap } } });
    const keyA = await gantry.createKey(['run', 'read'], [ep]);
    const keyB = await gantry.createKey(['run', 'read'], [ep]);
    const worker = workerFor(gantry, ep, await gantry.createKey(['worker'], [ep]));
    const a = clientFor(gantry, ep, keyA);
    const b = clientFor(gantry, ep, keyB);
    const jobA = (await a.run({ input: { a: 1 } })).json.id as string;
    // A alone may hold the whole cap: no worker takes its job, so each call is held until aborted.
    const heldByA = Array.from({ length: cap }, () =>
      fetch(`${gantry.url}/v2/${ep}/status-sync/${jobA}?wait=60000`, { headers: { authorization: `Bearer ${keyA}` }, signal: aborts.signal }).catch(() => undefined),
    );
    await parkedJobCalls(gantry.gantry, cap);
    expect((await a.call('GET', `status-sync/${jobA}?wait=5000`)).json).toMatchObject({ code: 'TOO_MANY_CONCURRENT' });

    // B's held status-sync is let in beside A's, and answers with B's result.
    const jobB = (await b.run({ input: { b: 1 } })).json.id as string;
    const heldByB = b.call('GET', `status-sync/${jobB}?wait=60000`);
    await parkedJobCalls(gantry.gantry, cap + 1);
    // Once B holds one, A is held to its half and refused.
    expect((await a.call('GET', `status-sync/${jobA}?wait=5000`)).status).toBe(429);
    const taken = await worker.takeJob(20_000);
    expect(taken.id).toBe(jobA); // A's job was queued first
    expect((await worker.done(jobA, { output: 'a' })).status).toBe(200);
    expect((await worker.takeJob(20_000)).id).toBe(jobB);
    expect((await worker.done(jobB, { output: 'b' })).status).toBe(200);
    const answered = await heldByB;
    expect(answered.status).toBe(200);
    expect(answered.json).toMatchObject({ id: jobB, status: 'COMPLETED', output: 'b' });
    aborts.abort();
    await Promise.all(heldByA);
  }, 90_000);
});
