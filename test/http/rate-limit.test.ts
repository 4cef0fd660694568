import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createRateLimiter, RATE_LIMITS } from '../../src/http/rate-limit.js';
import { startTestGantry, type TestGantry } from '../helpers/gantry.js';

describe('rate limiter', () => {
  it('allows the spec table per 10 s window, then 429 with Retry-After, and opens a new window', () => {
    let now = 1_000_000;
    const limiter = createRateLimiter(true, () => now);
    const limit = RATE_LIMITS.cancel!.per10s;
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
    now += 10_000;
    expect(() => limiter.enter('ep', 'cancel')()).not.toThrow();
  });

  it('limits concurrent requests until they leave', () => {
    const limiter = createRateLimiter(true, () => 0);
    const open = Array.from({ length: RATE_LIMITS.requests!.concurrent }, () => limiter.enter('ep', 'requests'));
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
