/**
 * The worker's HTTP calls: long-poll GETs with a deadline, and POSTs retried on network errors
 * and 5xx (never on 4xx but 429: the server has judged the request and a repeat would be judged
 * the same). A job's result is retried until a deadline rather than a number of times, so it
 * survives a gateway restart. Node's global fetch keeps connections alive.
 */
import { setTimeout as delay } from 'node:timers/promises';

/** A response with its body already read (so the connection goes back to the pool). */
export interface WorkerResponse {
  status: number;
  body: string;
  retryAfterMs: number | null;
}

/** Sends worker requests with the worker key and a user agent. */
export interface WorkerHttp {
  /** GET; rejects on network errors, after `timeoutMs`, and when `signal` aborts before the server answers. */
  get(url: string, timeoutMs: number, signal?: AbortSignal): Promise<WorkerResponse>;
  /**
   * POSTs JSON text, up to `attempts` times on network errors and 5xx (or, with `retryUntil`,
   * on those and 429 until that time); resolves with the last response, or rejects with the
   * last network error.
   */
  postJson(url: string, json: string, options?: PostOptions): Promise<WorkerResponse>;
}

/** How one POST is retried. */
export interface PostOptions {
  attempts?: number;
  /** Waits between attempts; the last one repeats. */
  backoffMs?: number[];
  timeoutMs?: number;
  /**
   * Instead of `attempts`: keep trying (network errors, 5xx, 429) until this time (epoch ms),
   * waiting 0.5 s doubling to RETRY_UNTIL_MAX_WAIT_MS with jitter, or what a Retry-After says.
   */
  retryUntil?: number;
  /** Called before each wait of a `retryUntil` post, with what failed. */
  onRetry?: (failure: { status: number | null; error: string | null; waitMs: number }) => void;
}

const DEFAULT_POST = { attempts: 3, backoffMs: [1000, 2000], timeoutMs: 60_000 };
/** The longest wait between two tries of a `retryUntil` post: a gateway that is back gets the result within this. */
export const RETRY_UNTIL_MAX_WAIT_MS = 5_000;

/**
 * Creates the worker's HTTP client.
 *
 * @example
 * ```ts
 * import { createWorkerHttp } from './worker-http.js';
 * const http = createWorkerHttp('worker-key', '0.1.0');
 * const res = await http.get('http://127.0.0.1:8080/v2/ep/ping/w1', 5000);
 * ```
 */
export function createWorkerHttp(apiKey: string, version: string): WorkerHttp {
  const headers: Record<string, string> = {
    // Raw key, as runpod-python sends RUNPOD_AI_API_KEY; Gantry accepts raw and Bearer.
    authorization: apiKey,
    'user-agent': `gantry-worker/${version} (node ${process.version})`,
  };

  async function request(url: string, init: RequestInit, timeoutMs: number, signal?: AbortSignal): Promise<WorkerResponse> {
    // `signal` cancels only until the server answers: once a job-take response has started,
    // it may carry a job the server now counts as ours, so it is read to the end.
    const controller = new AbortController();
    const timer = setTimeout(() => controller.abort(new Error(`no answer in ${timeoutMs} ms`)), timeoutMs);
    const onAbort = (): void => controller.abort(signal?.reason);
    if (signal?.aborted) onAbort();
    signal?.addEventListener('abort', onAbort, { once: true });
    try {
      const res = await fetch(url, { ...init, signal: controller.signal });
      signal?.removeEventListener('abort', onAbort);
      const body = await res.text();
      return { status: res.status, body, retryAfterMs: parseRetryAfter(res.headers.get('retry-after')) };
    } finally {
      clearTimeout(timer);
      signal?.removeEventListener('abort', onAbort);
    }
  }

  return {
    get(url, timeoutMs, signal) {
      return request(url, { method: 'GET', headers }, timeoutMs, signal);
    },
    async postJson(url, json, options = {}) {
      const { attempts, backoffMs, timeoutMs } = { ...DEFAULT_POST, ...options };
      const init: RequestInit = { method: 'POST', headers: { ...headers, 'content-type': 'application/json' }, body: json };
      if (options.retryUntil !== undefined) return postUntil(() => request(url, init, timeoutMs), options.retryUntil, options.onRetry);
      let lastError: unknown;
      for (let attempt = 1; attempt <= attempts; attempt++) {
        try {
          const res = await request(url, init, timeoutMs);
          if (res.status < 500 || attempt === attempts) return res;
          lastError = undefined;
        } catch (err) {
          lastError = err;
          if (attempt === attempts) break;
        }
        await delay(backoffMs[Math.min(attempt - 1, backoffMs.length - 1)] ?? 1000);
      }
      throw lastError instanceof Error ? lastError : new Error(String(lastError));
    },
  };
}

/** Tries `send` until it gets an answer other than 5xx or 429, or until `until` (epoch ms) leaves no time for another wait. */
async function postUntil(send: () => Promise<WorkerResponse>, until: number, onRetry: PostOptions['onRetry']): Promise<WorkerResponse> {
  const backoff = createBackoff(500, RETRY_UNTIL_MAX_WAIT_MS);
  for (;;) {
    let res: WorkerResponse | undefined;
    let error: unknown;
    try {
      res = await send();
      if (res.status < 500 && res.status !== 429) return res;
    } catch (err) {
      error = err;
    }
    const waitMs = Math.min(res?.retryAfterMs ?? backoff.next(), RETRY_UNTIL_MAX_WAIT_MS * 6);
    if (Date.now() + waitMs > until) {
      if (res) return res;
      throw error instanceof Error ? error : new Error(String(error));
    }
    onRetry?.({ status: res?.status ?? null, error: error === undefined ? null : describeError(error), waitMs });
    await delay(waitMs);
  }
}

/**
 * Sleeps `ms`, or less when `signal` aborts; never rejects.
 *
 * @example
 * ```ts
 * import { sleep } from './worker-http.js';
 * await sleep(1000);
 * ```
 */
export async function sleep(ms: number, signal?: AbortSignal): Promise<void> {
  if (signal?.aborted || ms <= 0) return;
  try {
    await delay(ms, undefined, { signal });
  } catch {
    // aborted: waking early is the point
  }
}

/**
 * Exponential backoff for a loop talking to an unavailable server: 0.5 s doubling to 15 s,
 * with ±25% jitter so a fleet of workers does not reconnect in step.
 *
 * @example
 * ```ts
 * import { createBackoff } from './worker-http.js';
 * const backoff = createBackoff();
 * backoff.next(); // ~500
 * backoff.reset();
 * ```
 */
export function createBackoff(initialMs = 500, maxMs = 15_000): { next(): number; reset(): void } {
  let current = initialMs;
  return {
    next() {
      const ms = current;
      current = Math.min(current * 2, maxMs);
      return Math.round(ms * (0.75 + Math.random() * 0.5));
    },
    reset() {
      current = initialMs;
    },
  };
}

function parseRetryAfter(value: string | null): number | null {
  if (value === null) return null;
  const seconds = Number(value);
  if (Number.isFinite(seconds) && seconds >= 0) return seconds * 1000;
  const date = Date.parse(value);
  return Number.isNaN(date) ? null : Math.max(0, date - Date.now());
}

/**
 * A short description of a failed request for logs (no URLs with keys, no bodies).
 *
 * @example
 * ```ts
 * import { describeError } from './worker-http.js';
 * describeError(new TypeError('fetch failed')); // 'TypeError: fetch failed'
 * ```
 */
export function describeError(err: unknown): string {
  if (err instanceof Error) {
    const cause = (err as { cause?: unknown }).cause;
    const detail = cause instanceof Error ? `: ${cause.message}` : '';
    return `${err.name}: ${err.message}${detail}`;
  }
  return String(err);
}
