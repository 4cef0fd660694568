import { AppError } from '../model/errors.js';
import { admitsKey, keyShare } from '../util/key-share.js';

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
/** Keys counted apart in one window; past it a new key is counted in the totals only (no share of its own). */
const MAX_KEYS_A_WINDOW = 1_000;

// The rule of a key's share (keyShare, admitsKey) is the queue's too: one definition in util/.
export { admitsKey, keyShare } from '../util/key-share.js';

/** One key's use of a window: requests counted in it, requests holding a slot now. */
type KeyUse = { count: number; active: number };

/**
 * Fixed 10-second windows per (endpoint, operation) plus a concurrency count, in memory (each
 * gateway enforces its own share), each divided between the keys that use it (keyShare).
 * `enter` throws 429 with Retry-After; call the returned function when the request ends.
 */
/** How one request is counted. */
export interface EnterOptions {
  /** false: counted in the 10 s window only (a long-poll, whose concurrency counts under `long-poll` while it holds). */
  concurrent?: boolean;
  /** The endpoint's own `rateLimits` (JSON text, EndpointRecord.rateLimitsJson): "off", or limits per operation over the defaults. */
  overrides?: string | null;
  /** The API key the request authenticated with (its id): the limit is shared between keys (keyShare). */
  keyId?: string;
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
  const windows = new Map<string, { start: number; count: number; active: number; keys: Map<string, KeyUse> }>();
  const noop = (): void => {};
  /** Whether a key other than `own` uses the window: counted in it or holding a slot. */
  const othersUse = (keys: Map<string, KeyUse>, own: KeyUse | undefined): boolean => keys.size > (own === undefined ? 0 : 1);

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
        windows.set(key, (w = { start: t, count: 0, active: 0, keys: new Map() }));
      }
      if (t - w.start >= WINDOW_MS) {
        w.start = t;
        w.count = 0;
        // A new window: keys holding no slot are forgotten, the others' counts start over.
        for (const [k, use] of w.keys) {
          if (use.active === 0) w.keys.delete(k);
          else use.count = 0;
        }
      }
      const keyId = options?.keyId ?? '';
      let use = w.keys.get(keyId);
      const shared = othersUse(w.keys, use);
      // A key not counted apart (past MAX_KEYS_A_WINDOW) has no share: the totals alone decide.
      const tracked = use !== undefined || w.keys.size < MAX_KEYS_A_WINDOW;
      const own = use ?? { count: 0, active: 0 };
      if (tracked ? !admitsKey(own.count, w.count, limit.per10s, shared) : w.count >= limit.per10s) {
        const retry = Math.max(1, Math.ceil((w.start + WINDOW_MS - t) / 1000));
        throw new AppError('RATE_LIMITED', `Rate limit exceeded: ${limit.per10s} ${operation} requests per 10 s on endpoint ${endpointId}${shared ? `, ${keyShare(limit.per10s)} for one key while other keys use it` : ''}`, undefined, { 'retry-after': String(retry) });
      }
      const concurrent = options?.concurrent !== false;
      if (concurrent && (tracked ? !admitsKey(own.active, w.active, limit.concurrent, shared) : w.active >= limit.concurrent)) {
        throw new AppError('TOO_MANY_CONCURRENT', `Too many concurrent ${operation} requests (limit ${limit.concurrent}${shared ? `, ${keyShare(limit.concurrent)} for one key while other keys use it` : ''}) on endpoint ${endpointId}`, undefined, { 'retry-after': '1' });
      }
      if (use === undefined && tracked) w.keys.set(keyId, (use = own));
      w.count++;
      if (use) use.count++;
      if (!concurrent) return noop;
      w.active++;
      if (use) use.active++;
      const entry = w;
      const held = use;
      let left = false;
      return () => {
        if (!left) {
          left = true;
          entry.active--;
          if (held) held.active--;
        }
      };
    },
  };
}

