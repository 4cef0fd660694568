// Issue 9 item 4: a key that names random endpoint ids cannot grow the gateway's memory: the
// endpoint settings cache (known and unknown ids) stays at its bound. Asserted on the cache's
// size, not on RSS. Real gateway over HTTP. gaps-9 §11: the same for the API key cache (random
// keys presented) and for stop lists (a worker key pinging with job ids the store does not know,
// which are kept for the worker's job-stop): per worker, over all workers, and in list count.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { STOP_IDS_MAX, STOP_LISTS_MAX, STOP_LIST_MAX_IDS, type StopSignals } from '../../src/dispatch/stop-signals.js';
import { ENDPOINT_CACHE_MAX } from '../../src/jobs/endpoint-service.js';
import { KEY_CACHE_MAX_BYTES } from '../../src/security/keys.js';
import { startTestGantry, type TestGantry } from '../helpers/gantry.js';

/** Runs `request(i)` for i in [0, total) over `lanes` concurrent lanes. */
async function spread(total: number, lanes: number, request: (i: number) => Promise<void>): Promise<void> {
  let next = 0;
  await Promise.all(Array.from({ length: lanes }, async () => {
    while (next < total) await request(next++);
  }));
}

describe('caches keyed by what requests name are bounded', () => {
  let gantry: TestGantry;
  let key: string;

  beforeAll(async () => {
    gantry = await startTestGantry();
    key = await gantry.createKey(['read']);
  });
  afterAll(async () => gantry?.close());

  it(`keeps at most ${ENDPOINT_CACHE_MAX} endpoint ids cached after more random ids than that`, async () => {
    const statuses = new Set<number>();
    await spread(ENDPOINT_CACHE_MAX + 500, 32, async (i) => {
      const id = `nx-${i.toString(36)}-${Math.random().toString(36).slice(2, 10)}`;
      const res = await fetch(`${gantry.url}/v2/${id}/health`, { headers: { authorization: `Bearer ${key}` } });
      statuses.add(res.status);
      await res.arrayBuffer();
    });
    expect([...statuses]).toEqual([404]);
    expect(gantry.gantry.gateway.endpoints.cachedCount()).toBe(ENDPOINT_CACHE_MAX);
  }, 120_000);

  it('keeps the API key cache at its bound after more random keys than that', async () => {
    const cache = (gantry.gantry.gateway.keys as unknown as { cache: { size: number; maxEntries: number } }).cache;
    const total = cache.maxEntries + 500;
    const statuses = new Set<number>();
    await spread(total, 32, async (i) => {
      const res = await fetch(`${gantry.url}/v2/nx/health`, { headers: { authorization: `Bearer nokey-${i}-${Math.random().toString(36).slice(2)}` } });
      statuses.add(res.status);
      await res.arrayBuffer();
    });
    expect([...statuses]).toEqual([401]);
    expect(cache.size).toBe(cache.maxEntries);
  }, 120_000);

  it('keeps the API key cache within its byte bound when the random keys are long (issue 22 item 7)', async () => {
    const cache = (gantry.gantry.gateway.keys as unknown as { cache: { size: number; bytes: number; clear(): void } }).cache;
    cache.clear();
    // 512-character keys (the longest looked up): about 1.1 kB each by the cache's estimate.
    const total = Math.ceil(KEY_CACHE_MAX_BYTES / 1_000);
    const statuses = new Set<number>();
    await spread(total, 32, async (i) => {
      const long = `nokey-${i}-`.padEnd(512, Math.random().toString(36).slice(2, 3));
      const res = await fetch(`${gantry.url}/v2/nx/health`, { headers: { authorization: `Bearer ${long}` } });
      statuses.add(res.status);
      await res.arrayBuffer();
    });
    expect([...statuses]).toEqual([401]);
    expect(cache.bytes).toBeLessThanOrEqual(KEY_CACHE_MAX_BYTES);
    expect(cache.bytes).toBeGreaterThan(KEY_CACHE_MAX_BYTES - 2_000);
    expect(cache.size).toBeLessThan(total);
  }, 120_000);

  it('refuses an endpoint id longer than any valid one before any cache (issue 22 item 7)', async () => {
    const before = gantry.gantry.gateway.endpoints.cachedCount();
    for (let i = 0; i < 50; i++) {
      const res = await fetch(`${gantry.url}/v2/${`x${i}-`.padEnd(6_000, 'y')}/health`, { headers: { authorization: `Bearer ${key}` } });
      expect(res.status).toBe(400);
      expect(await res.json()).toMatchObject({ code: 'INVALID_PARAMETER', field: 'endpointId' });
    }
    expect(gantry.gantry.gateway.endpoints.cachedCount()).toBeLessThanOrEqual(before);
  });

  describe('stop lists', () => {
    let workerKey: string;
    let stops: StopSignals;
    beforeAll(async () => {
      workerKey = await gantry.createKey(['worker']);
      await gantry.createEndpoint('stops');
      stops = (gantry.gantry.gateway.workers as unknown as { deps: { stopSignals: StopSignals } }).deps.stopSignals;
    });
    const ping = async (workerId: string, jobIds: string[]): Promise<void> => {
      const res = await fetch(`${gantry.url}/v2/stops/ping/${workerId}?job_id=${jobIds.join(',')}`, { headers: { authorization: `Bearer ${workerKey}` } });
      expect(res.status).toBe(200);
      await res.arrayBuffer();
    };
    const jobStop = async (workerId: string): Promise<string[]> => {
      const res = await fetch(`${gantry.url}/v2/stops/job-stop/${workerId}`, { headers: { authorization: `Bearer ${workerKey}` } });
      return res.status === 204 ? [] : ((await res.json()) as { jobsToStop: string[] }).jobsToStop;
    };
    const ids = (prefix: string, from: number, to: number): string[] => Array.from({ length: to - from }, (_, i) => `${prefix}${(from + i).toString(36)}`);

    it(`keeps at most ${STOP_LIST_MAX_IDS} ids for one worker, the newest`, async () => {
      const half = Math.ceil((STOP_LIST_MAX_IDS * 1.4) / 2);
      await ping('w-many', ids('a', 0, half));
      await ping('w-many', ids('a', half, 2 * half));
      expect(stops.size()).toEqual({ workers: 1, ids: STOP_LIST_MAX_IDS });
      const taken = await jobStop('w-many');
      expect(taken).toHaveLength(STOP_LIST_MAX_IDS);
      expect(taken).toEqual(expect.arrayContaining(ids('a', half, 2 * half)));
      expect(taken).not.toContain('a0');
      expect(stops.size()).toEqual({ workers: 0, ids: 0 });
    });

    it(`keeps at most ${STOP_IDS_MAX} ids over all workers, dropping the oldest lists`, async () => {
      const workers = Math.ceil(STOP_IDS_MAX / STOP_LIST_MAX_IDS) + 5;
      await spread(workers, 8, (w) => ping(`w-full-${w}`, ids(`${w.toString(36)}-`, 0, STOP_LIST_MAX_IDS)));
      expect(stops.size().ids).toBeLessThanOrEqual(STOP_IDS_MAX);
      expect(stops.size().ids).toBeGreaterThan(STOP_IDS_MAX - STOP_LIST_MAX_IDS);
      // The newest list is whole; the oldest ones are gone (the next ping of such a worker adds them back).
      const kept = await Promise.all(Array.from({ length: workers }, (_, w) => jobStop(`w-full-${w}`)));
      expect(kept.filter((k) => k.length === 0).length).toBeGreaterThanOrEqual(5);
      expect(kept.filter((k) => k.length > 0).every((k) => k.length === STOP_LIST_MAX_IDS)).toBe(true);
      expect(stops.size()).toEqual({ workers: 0, ids: 0 });
    }, 60_000);

    it(`keeps at most ${STOP_LISTS_MAX} lists after pings from more worker ids than that`, async () => {
      await spread(STOP_LISTS_MAX + 500, 32, (w) => ping(`w-one-${w}`, [`j${w}`]));
      expect(stops.size()).toEqual({ workers: STOP_LISTS_MAX, ids: STOP_LISTS_MAX });
    }, 120_000);
  });
});
