// Issue 9 item 6: held long-polls (status-sync, an empty stream) count against their own cap,
// so a key that opens hundreds of them cannot lock other clients out of /status and /stream.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { eventually, startTestGantry, type TestGantry } from '../helpers/gantry.js';

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
