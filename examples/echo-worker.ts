/**
 * Echo worker: answers each job with its own input. A few input fields try out the rest of
 * the platform:
 *   progress: [..]  post these progress updates first (visible in /status while running)
 *   delayMs: n      then work for n ms (ends early when the job is cancelled or times out)
 *   fail: "msg"     then throw Error(msg): the job ends FAILED with error "msg"
 *   refresh: true   ask for this worker to be recycled after the job
 *
 * Run it against a local Gantry:
 *   npm run build
 *   node dist/src/cli/main.js worker dist/examples/echo-worker.js \
 *     --url http://127.0.0.1:8080 --endpoint echo --key "$WORKER_KEY"
 */
import type { Handler } from '../src/sdk/worker.js';

interface EchoInput {
  progress?: unknown[];
  delayMs?: number;
  fail?: string;
  refresh?: boolean;
  [field: string]: unknown;
}

/**
 * Returns `job.input` after the optional progress, delay, failure and refresh above.
 *
 * @example
 * ```ts
 * import { startWorker } from 'gantry/worker';
 * import { handler } from './echo-worker.js';
 * startWorker({ handler });
 * ```
 */
export const handler: Handler<EchoInput | undefined> = async (job, ctx) => {
  const input = job.input ?? {};
  for (const update of input.progress ?? []) await ctx.progress(update);
  if (input.delayMs) await pause(input.delayMs, ctx.signal);
  if (ctx.signal.aborted) return null; // the server stopped the job; this is not posted
  if (input.fail) throw new Error(input.fail);
  if (input.refresh) ctx.refresh();
  return input;
};

export default handler;

/** Waits `ms`, or less when the job is stopped. */
function pause(ms: number, signal: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    const timer = setTimeout(resolve, ms);
    signal.addEventListener('abort', () => {
      clearTimeout(timer);
      resolve();
    }, { once: true });
  });
}
