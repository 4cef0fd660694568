/**
 * Refusals that end a worker at its start (`gantry worker` exits 2): the server answered the
 * worker's first calls with a 4xx that no retry can change. Network errors, 5xx, 408 and 429
 * are passing faults, retried for as long as the worker runs.
 */
import type { WorkerResponse } from './worker-http.js';

/**
 * A refusal must last this long before the worker gives up: longer than a gateway caches a key
 * (5 s) or an endpoint (2 s), so a key or endpoint created a moment ago on another gateway of
 * the same store is not taken for a wrong one.
 */
export const START_REFUSAL_CONFIRM_MS = 6_000;

/**
 * The server refused the worker at its start, and a retry cannot change that. `status` and
 * `code` are the server's (code '' when its answer had none); the message names what to check,
 * never the key.
 *
 * @example
 * ```ts
 * import { startWorker, WorkerRefusedError } from 'gantry/worker';
 * const worker = startWorker({ handler: (job) => job.input });
 * await worker.done.catch((err) => { if (err instanceof WorkerRefusedError) process.exit(2); throw err; });
 * ```
 */
export class WorkerRefusedError extends Error {
  override readonly name = 'WorkerRefusedError';
  constructor(
    message: string,
    readonly status: number,
    readonly code: string,
  ) {
    super(message);
  }
}

/**
 * True for an answer no retry can change: a 4xx other than 408 (the server timed out reading)
 * and 429 (slow down).
 *
 * @example isPermanentRefusal(401) // true; isPermanentRefusal(429) // false; isPermanentRefusal(503) // false
 */
export function isPermanentRefusal(status: number): boolean {
  return status >= 400 && status < 500 && status !== 408 && status !== 429;
}

/**
 * The error for a refused answer of `server`: its status and Gantry's `{error, code}` when the
 * body has them (another server's body is left out), and what to check.
 *
 * @example refusalError({ status: 404, body: '{"error":"Endpoint nope not found","code":"ENDPOINT_NOT_FOUND"}', retryAfterMs: null }, 'http://g:8080').message
 * // 'http://g:8080 refused this worker: 404 ENDPOINT_NOT_FOUND: Endpoint nope not found; check the endpoint id ...'
 */
export function refusalError(res: WorkerResponse, server: string): WorkerRefusedError {
  const { error, code } = parseGantryError(res.body);
  const head = code === '' ? String(res.status) : `${res.status} ${code}`;
  const what = error === '' ? head : `${head}: ${error}`;
  return new WorkerRefusedError(`${server} refused this worker: ${what}; ${hintFor(res.status, code)}`, res.status, code);
}

function hintFor(status: number, code: string): string {
  if (status === 401 || status === 403) {
    return 'check the key (--key or RUNPOD_AI_API_KEY): it must be an API key with the `worker` scope, allowed on this endpoint';
  }
  if (code === 'ENDPOINT_NOT_FOUND') return 'check the endpoint id (--endpoint, or the RUNPOD_WEBHOOK_GET_JOB URL): no endpoint of the gateway has it';
  if (status === 404) return 'check the URL (--url, or RUNPOD_WEBHOOK_GET_JOB): it is not a worker route of this server';
  if (code === 'WORKER_OF_OTHER_ENDPOINT') return 'this worker id serves another endpoint: give another one (--worker-id or RUNPOD_POD_ID)';
  return 'check the worker settings (--url, --endpoint, --worker-id)';
}

/** Gantry's error body `{"error": message, "code": CODE}`; empty strings for anything else. */
function parseGantryError(body: string): { error: string; code: string } {
  try {
    const parsed = JSON.parse(body) as { error?: unknown; code?: unknown };
    const error = typeof parsed.error === 'string' ? parsed.error.slice(0, 300) : '';
    const code = typeof parsed.code === 'string' && /^[A-Z_]{1,64}$/.test(parsed.code) ? parsed.code : '';
    return { error, code };
  } catch {
    return { error: '', code: '' };
  }
}
