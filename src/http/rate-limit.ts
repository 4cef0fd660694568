import { AppError } from '../errors.js';

/** The spec's table: requests per 10 s window and concurrent requests, per endpoint and operation. */
export const RATE_LIMITS: Record<string, { per10s: number; concurrent: number }> = {
  run: { per10s: 1000, concurrent: 200 },
  runsync: { per10s: 2000, concurrent: 400 },
  status: { per10s: 2000, concurrent: 400 },
  cancel: { per10s: 100, concurrent: 20 },
  'purge-queue': { per10s: 2, concurrent: Infinity },
  openai: { per10s: 2000, concurrent: 400 },
  requests: { per10s: 10, concurrent: 2 },
};

const WINDOW_MS = 10_000;

/**
 * Fixed 10-second windows per (endpoint, operation) plus a concurrency count, in memory (each
 * gateway enforces its own share). `enter` throws 429 with Retry-After; call the returned
 * function when the request ends.
 */
export function createRateLimiter(enabled: boolean, now: () => number = Date.now) {
  const windows = new Map<string, { start: number; count: number; active: number }>();
  const noop = (): void => {};

  return {
    enter(endpointId: string, operation: string): () => void {
      const limit = RATE_LIMITS[operation];
      if (!enabled || !limit) return noop;
      const key = `${endpointId}\u0000${operation}`;
      const t = now();
      let w = windows.get(key);
      if (!w) windows.set(key, (w = { start: t, count: 0, active: 0 }));
      if (t - w.start >= WINDOW_MS) {
        w.start = t;
        w.count = 0;
      }
      if (w.count >= limit.per10s) {
        const retry = Math.max(1, Math.ceil((w.start + WINDOW_MS - t) / 1000));
        throw new AppError(429, 'RATE_LIMITED', `Rate limit exceeded: ${limit.per10s} ${operation} requests per 10 s on endpoint ${endpointId}`, undefined, { 'retry-after': String(retry) });
      }
      if (w.active >= limit.concurrent) {
        throw new AppError(429, 'TOO_MANY_CONCURRENT', `Too many concurrent ${operation} requests (limit ${limit.concurrent}) on endpoint ${endpointId}`, undefined, { 'retry-after': '1' });
      }
      w.count++;
      w.active++;
      const entry = w;
      let left = false;
      return () => {
        if (!left) {
          left = true;
          entry.active--;
        }
      };
    },
  };
}

export type RateLimiter = ReturnType<typeof createRateLimiter>;
