import { AppError } from '../model/errors.js';

/** The spec's table: requests per 10 s window and concurrent requests, per endpoint and operation. */
export const RATE_LIMITS: Record<string, { per10s: number; concurrent: number }> = {
  run: { per10s: 1000, concurrent: 200 },
  runsync: { per10s: 2000, concurrent: 400 },
  status: { per10s: 2000, concurrent: 400 },
  cancel: { per10s: 100, concurrent: 20 },
  'purge-queue': { per10s: 2, concurrent: Infinity },
  openai: { per10s: 2000, concurrent: 400 },
  /** Held status-sync and stream calls: their own concurrency (they are counted in `status` per 10 s). */
  'long-poll': { per10s: Infinity, concurrent: 400 },
  requests: { per10s: 10, concurrent: 2 },
};

const WINDOW_MS = 10_000;
/** Past this many (endpoint, operation) windows, idle expired ones are dropped (endpoints come and go). */
const MAX_WINDOWS = 10_000;

/**
 * Fixed 10-second windows per (endpoint, operation) plus a concurrency count, in memory (each
 * gateway enforces its own share). `enter` throws 429 with Retry-After; call the returned
 * function when the request ends.
 */
/** How one request is counted. */
export interface EnterOptions {
  /** false: counted in the 10 s window only (a long-poll, whose concurrency counts under `long-poll` while it holds). */
  concurrent?: boolean;
  /** The endpoint's own `rateLimits` (JSON text, EndpointRecord.rateLimitsJson): "off", or limits per operation over the defaults. */
  overrides?: string | null;
}

type Limit = { per10s: number; concurrent: number };

/** Parsed `rateLimits` texts; endpoints share few distinct texts, and the map is emptied past its bound. */
const parsedOverrides = new Map<string, Record<string, Limit | 'off'> | 'off'>();
const MAX_PARSED = 1_000;

/** The limit of `operation` for an endpoint with `overrides`, or undefined when it is not limited. */
function limitOf(operation: string, overrides: string | null | undefined): Limit | undefined {
  const base = RATE_LIMITS[operation];
  if (overrides === null || overrides === undefined || !base) return base;
  let parsed = parsedOverrides.get(overrides);
  if (parsed === undefined) {
    if (parsedOverrides.size >= MAX_PARSED) parsedOverrides.clear();
    parsedOverrides.set(overrides, (parsed = JSON.parse(overrides) as Record<string, Limit | 'off'> | 'off'));
  }
  if (parsed === 'off') return undefined;
  const own = parsed[operation];
  if (own === undefined) return base;
  return own === 'off' ? undefined : { per10s: own.per10s ?? base.per10s, concurrent: own.concurrent ?? base.concurrent };
}

/** Admits or refuses a request of one operation on one endpoint. */
export interface RateLimiter {
  /**
   * Counts the request in, or throws 429 with Retry-After; call the returned function when it
   * ends. `concurrent: false` counts it in the 10 s window only (a long-poll, whose concurrency
   * is counted under `long-poll` while it holds).
   */
  enter(endpointId: string, operation: string, options?: EnterOptions): () => void;
}

/** @example const limiter = createRateLimiter(true); const leave = limiter.enter('echo', 'run'); try { ... } finally { leave(); } */
export function createRateLimiter(enabled: boolean, now: () => number = Date.now): RateLimiter {
  const windows = new Map<string, { start: number; count: number; active: number }>();
  const noop = (): void => {};

  return {
    enter(endpointId: string, operation: string, options?: EnterOptions): () => void {
      if (!enabled) return noop;
      const limit = limitOf(operation, options?.overrides);
      if (!limit) return noop;
      const key = `${endpointId}\u0000${operation}`;
      const t = now();
      let w = windows.get(key);
      if (!w) {
        if (windows.size >= MAX_WINDOWS) {
          for (const [k, old] of windows) if (old.active === 0 && t - old.start >= WINDOW_MS) windows.delete(k);
        }
        windows.set(key, (w = { start: t, count: 0, active: 0 }));
      }
      if (t - w.start >= WINDOW_MS) {
        w.start = t;
        w.count = 0;
      }
      if (w.count >= limit.per10s) {
        const retry = Math.max(1, Math.ceil((w.start + WINDOW_MS - t) / 1000));
        throw new AppError('RATE_LIMITED', `Rate limit exceeded: ${limit.per10s} ${operation} requests per 10 s on endpoint ${endpointId}`, undefined, { 'retry-after': String(retry) });
      }
      const concurrent = options?.concurrent !== false;
      if (concurrent && w.active >= limit.concurrent) {
        throw new AppError('TOO_MANY_CONCURRENT', `Too many concurrent ${operation} requests (limit ${limit.concurrent}) on endpoint ${endpointId}`, undefined, { 'retry-after': '1' });
      }
      w.count++;
      if (!concurrent) return noop;
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

