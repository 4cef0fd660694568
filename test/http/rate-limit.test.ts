import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createRateLimiter } from '../../src/http/rate-limit.js';
import { createManualClock } from '../helpers/clock.js';
import { parkedJobCalls, startTestGantry, type TestGantry } from '../helpers/gantry.js';
import { clientFor, uniqueId } from './http-helpers.js';

// The limits as the spec's table states them (RunPod's; docs/configuration.md, "Rate limits"), written
// here, not read from the code's own table.
const SPEC = { cancel: { per10s: 100, concurrent: 20 }, purgeQueue: 2, requests: { per10s: 10, concurrent: 2 }, status: 2000 };

describe('rate limiter', () => {
  it('allows the spec table per 10 s window, then 429 with Retry-After, and opens a new window', () => {
    let now = 1_000_000;
    const limiter = createRateLimiter(true, () => now);
    const limit = SPEC.cancel.per10s;
    for (let i = 0; i < limit; i++) limiter.enter('ep', 'cancel')();
    let refused: unknown;
    try {
      limiter.enter('ep', 'cancel');
    } catch (err) {
      refused = err;
    }
    expect(refused).toMatchObject({ status: 429, code: 'RATE_LIMITED', headers: { 'retry-after': '10' } });
    // Other endpoints and operations have their own windows.
    expect(() => limiter.enter('other', 'cancel')()).not.toThrow();
    expect(() => limiter.enter('ep', 'run')()).not.toThrow();
    now += 9_999;
    expect(() => limiter.enter('ep', 'cancel')).toThrow(expect.objectContaining({ code: 'RATE_LIMITED', headers: { 'retry-after': '1' } }) as Error);
    now += 1;
    expect(() => limiter.enter('ep', 'cancel')()).not.toThrow();
  });

  it('shares a limit between keys: one key alone may use it all, then each is held to half, a key under its half let in', () => {
    let now = 1_000_000;
    const limiter = createRateLimiter(true, () => now);
    const enter = (keyId: string, op = 'cancel') => limiter.enter('ep', op, { keyId });
    // cancel: 100 per 10 s, 20 concurrent. A alone takes the whole window.
    for (let i = 0; i < SPEC.cancel.per10s; i++) enter('A')();
    expect(() => enter('A')).toThrow(expect.objectContaining({ code: 'RATE_LIMITED' }) as Error);
    // B still gets its half (50) past the limit, then no more; A stays refused.
    for (let i = 0; i < SPEC.cancel.per10s / 2; i++) enter('B')();
    expect(() => enter('B')).toThrow(expect.objectContaining({ code: 'RATE_LIMITED' }) as Error);
    expect(() => enter('C')).toThrow(expect.objectContaining({ code: 'RATE_LIMITED' }) as Error);
    // A new window: both are counted again; with B seen, A is held to its half.
    now += 10_000;
    enter('B')();
    for (let i = 0; i < SPEC.cancel.per10s / 2; i++) enter('A')();
    expect(() => enter('A')).toThrow(expect.objectContaining({ code: 'RATE_LIMITED' }) as Error);
    // Concurrency: A holds all 20 alone; B gets in; A, now sharing, is refused until it is under 10.
    now += 10_000;
    const heldByA = Array.from({ length: SPEC.cancel.concurrent }, () => enter('A'));
    expect(() => enter('A')).toThrow(expect.objectContaining({ code: 'TOO_MANY_CONCURRENT' }) as Error);
    const heldByB = enter('B');
    for (let i = 0; i < 10; i++) heldByA[i]!();
    expect(() => enter('A')).toThrow(expect.objectContaining({ code: 'TOO_MANY_CONCURRENT' }) as Error);
    heldByA[10]!();
    expect(() => enter('A')()).not.toThrow();
    heldByB();
  });

  it('limits concurrent requests until they leave', () => {
    const limiter = createRateLimiter(true, () => 0);
    const open = Array.from({ length: SPEC.requests.concurrent }, () => limiter.enter('ep', 'requests'));
    expect(() => limiter.enter('ep', 'requests')).toThrow(expect.objectContaining({ code: 'TOO_MANY_CONCURRENT' }) as Error);
    open[0]!();
    open[0]!(); // leaving twice counts once
    expect(() => limiter.enter('ep', 'requests')).not.toThrow();
  });

  it('does nothing when disabled', () => {
    const limiter = createRateLimiter(false, () => 0);
    for (let i = 0; i < 10; i++) limiter.enter('ep', 'purge-queue')();
  });
});

describe('rate limits over HTTP', () => {
  let t: TestGantry;
  beforeAll(async () => {
    t = await startTestGantry({ rateLimits: true });
    await t.createEndpoint('limited');
  });
  afterAll(async () => {
    await t.close();
  });

  it('answers the third purge-queue within 10 s with 429, Retry-After and a JSON body', async () => {
    const call = () => fetch(`${t.url}/v2/limited/purge-queue`, { method: 'POST', headers: { authorization: `Bearer ${t.adminKey}` } });
    expect((await call()).status).toBe(200);
    expect((await call()).status).toBe(200);
    const third = await call();
    expect(third.status).toBe(429);
    expect(Number(third.headers.get('retry-after'))).toBeGreaterThanOrEqual(1);
    expect(await third.json()).toMatchObject({ code: 'RATE_LIMITED', error: expect.stringContaining('purge-queue') as string });
  });
});

describe('rate-limit edges over HTTP (the clock stands still unless moved)', () => {
  const clock = createManualClock();
  let t: TestGantry;
  let key: string;
  beforeAll(async () => {
    t = await startTestGantry({ rateLimits: true, jobTakeWaitMs: 200 }, { clock });
    key = await t.createKey(['run', 'read']);
  });
  afterAll(async () => {
    await t?.close();
  });

  async function endpoint(): Promise<ReturnType<typeof clientFor>> {
    const ep = uniqueId('limits');
    await t.createEndpoint(ep);
    return clientFor(t, ep, key);
  }

  it('a full window still refuses at +9,999 ms and opens at +10,000 ms', async () => {
    const c = await endpoint();
    for (let i = 0; i < SPEC.purgeQueue; i++) expect((await c.purge()).status).toBe(200);
    const refused = await c.purge();
    expect(refused.status).toBe(429);
    expect(refused.json).toMatchObject({ code: 'RATE_LIMITED' });
    expect(refused.headers.get('retry-after')).toBe('10');
    clock.advance(9_999);
    const edge = await c.purge();
    expect(edge.status).toBe(429);
    expect(edge.headers.get('retry-after')).toBe('1');
    clock.advance(1);
    expect((await c.purge()).status).toBe(200);
  });

  it('/status, /status-sync and /stream share one limit of 2000 per 10 s', async () => {
    const c = await endpoint();
    const id = await c.submit();
    expect((await c.cancel(id)).status).toBe(200); // a finished job: status-sync and stream answer at once
    const ops = ['status', 'status-sync', 'stream'];
    let sent = 0;
    const client = async (): Promise<void> => {
      while (sent < SPEC.status) {
        const op = ops[sent++ % ops.length]!;
        const r = await c.call('GET', `${op}/${id}`);
        expect(r.status, `${op} #${sent}`).toBe(200);
      }
    };
    await Promise.all(Array.from({ length: 8 }, client));
    for (const op of ops) {
      const r = await c.call('GET', `${op}/${id}`);
      expect(r.status, op).toBe(429);
      expect(r.json, op).toMatchObject({ code: 'RATE_LIMITED' });
    }
    clock.advance(10_000);
  }, 60_000);

  it('the concurrency slot is released after an error and after a long-poll', async () => {
    const c = await endpoint();
    // /requests: 2 at a time. More errors (400) than that, one after another: each left its slot.
    for (let i = 0; i < SPEC.requests.concurrent + 2; i++) expect((await c.requests('?limit=0')).status).toBe(400);
    expect((await c.requests()).status).toBe(200);
    // /status-sync: 400 at a time. Three rounds of 200 long-polls, each round ended by a cancel:
    // 600 in all, more than 400, so a slot that outlived its long-poll would show as a 429.
    for (let round = 0; round < 3; round++) {
      const id = await c.submit();
      const polls = Array.from({ length: 200 }, () => c.statusSync(id, '?wait=60000'));
      await parkedJobCalls(t.gantry, 200);
      expect((await c.cancel(id)).status).toBe(200);
      for (const r of await Promise.all(polls)) expect(r.status).toBe(200);
    }
    const id = await c.submit();
    expect((await c.cancel(id)).status).toBe(200);
    expect((await c.statusSync(id)).status).toBe(200);
    clock.advance(10_000);
  }, 60_000);
});
