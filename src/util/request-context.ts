import { AsyncLocalStorage } from 'node:async_hooks';

/**
 * The id of the request whose work is running, carried across awaits, so every log line written
 * on its behalf can name it. Used only while the log level is debug or finer: while any request
 * runs inside it, Node tracks every promise of the process, a cost the hot path does not pay at
 * info level (docs/metrics.md, "Request ids and logs").
 */
const requests = new AsyncLocalStorage<string>();

/**
 * Runs `work` as the work of request `id`.
 *
 * @example runAsRequest('3f9a1c2e7b4d-1k2', () => handle(req, res));
 */
export function runAsRequest<T>(id: string, work: () => T): T {
  return requests.run(id, work);
}

/**
 * The id of the request being handled, if any (a pino `mixin` adds it to log lines).
 *
 * @example const fields = currentRequestId() === undefined ? {} : { requestId: currentRequestId() };
 */
export function currentRequestId(): string | undefined {
  return requests.getStore();
}
