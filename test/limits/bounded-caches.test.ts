// Issue 9 item 4: a key that names random endpoint ids cannot grow the gateway's memory: the
// endpoint settings cache (known and unknown ids) stays at its bound. Asserted on the cache's
// size, not on RSS. Real gateway over HTTP.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ENDPOINT_CACHE_MAX } from '../../src/jobs/endpoint-service.js';
import { startTestGantry, type TestGantry } from '../helpers/gantry.js';

describe('caches keyed by what requests name are bounded', () => {
  let gantry: TestGantry;
  let key: string;

  beforeAll(async () => {
    gantry = await startTestGantry();
    key = await gantry.createKey(['read']);
  });
  afterAll(async () => gantry?.close());

  it(`keeps at most ${ENDPOINT_CACHE_MAX} endpoint ids cached after more random ids than that`, async () => {
    const total = ENDPOINT_CACHE_MAX + 500;
    let next = 0;
    const statuses = new Set<number>();
    const worker = async (): Promise<void> => {
      while (next < total) {
        const id = `nx-${(next++).toString(36)}-${Math.random().toString(36).slice(2, 10)}`;
        const res = await fetch(`${gantry.url}/v2/${id}/health`, { headers: { authorization: `Bearer ${key}` } });
        statuses.add(res.status);
        await res.arrayBuffer();
      }
    };
    await Promise.all(Array.from({ length: 32 }, worker));
    expect([...statuses]).toEqual([404]);
    expect(gantry.gantry.gateway.endpoints.cachedCount()).toBe(ENDPOINT_CACHE_MAX);
  }, 120_000);
});
