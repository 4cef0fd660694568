/**
 * Streaming worker: yields the words of `input.text` one at a time; clients read them
 * through `/stream/{id}` while the job runs, and `/status` ends with all of them as output
 * (returnAggregateStream). `input.delayMs` waits between words.
 *
 *   npm run build
 *   node dist/src/cli/main.js worker dist/examples/stream-worker.js \
 *     --url http://127.0.0.1:8080 --endpoint words --key "$WORKER_KEY"
 */
import type { JobContext, WorkerJob } from '../src/sdk/worker.js';

/** Final job-done carries every chunk as the job's output. */
export const returnAggregateStream = true;

/**
 * Yields each word of `input.text`; stops early when the job is cancelled.
 *
 * @example
 * ```ts
 * import { startWorker } from 'gantry/worker';
 * import { handler } from './stream-worker.js';
 * startWorker({ handler, returnAggregateStream: true });
 * ```
 */
export async function* handler(
  job: WorkerJob<{ text?: string; delayMs?: number } | undefined>,
  ctx: JobContext,
): AsyncGenerator<string> {
  const words = String(job.input?.text ?? '').split(/\s+/).filter(Boolean);
  for (const [i, word] of words.entries()) {
    if (ctx.signal.aborted) return;
    if (i > 0 && job.input?.delayMs) await new Promise((resolve) => setTimeout(resolve, job.input?.delayMs));
    yield word;
  }
}

export default handler;
