/**
 * Public types of the worker SDK. Import them from `gantry/worker`, which re-exports this file.
 */

/** A job's retry and lifetime policy, as submitted with `/run` (passed through unchanged). */
export interface JobPolicy {
  executionTimeout?: number;
  lowPriority?: boolean;
  ttl?: number;
  [key: string]: unknown;
}

/** S3-compatible storage credentials a client attached to the job (handed only to workers). */
export interface S3Config {
  accessId?: string;
  accessSecret?: string;
  bucketName?: string;
  endpointUrl?: string;
  [key: string]: unknown;
}

/**
 * One job as the server hands it out in `job-take`.
 *
 * @example
 * ```ts
 * import type { WorkerJob } from 'gantry/worker';
 * const job: WorkerJob<{ prompt: string }> = { id: 'abc', input: { prompt: 'hi' } };
 * ```
 */
export interface WorkerJob<I = unknown> {
  id: string;
  input: I;
  s3Config?: S3Config;
  webhook?: string;
  policy?: JobPolicy;
  /**
   * The W3C trace context of this run when the gateway traces jobs (OTEL_* variables set
   * there): start the handler's own spans as children of it and they join the job's trace,
   * under the run they belong to. Absent when the job is not traced.
   */
  traceparent?: string;
}

/**
 * What a handler gets beside its job.
 *
 * @example
 * ```ts
 * import { startWorker } from 'gantry/worker';
 * startWorker({
 *   handler: async (job, ctx) => {
 *     await ctx.progress({ percent: 50 });        // visible in /status while running
 *     if (ctx.signal.aborted) return null;        // cancelled or timed out: the result is dropped
 *     return { worker: ctx.workerId };
 *   },
 * });
 * ```
 */
export interface JobContext {
  /** This worker's id (RUNPOD_POD_ID or the `workerId` option). */
  readonly workerId: string;
  /**
   * The job's W3C `traceparent` for this run (WorkerJob.traceparent), for the handler's own
   * spans: with OpenTelemetry, `propagation.extract(context.active(), { traceparent })`.
   * undefined when the gateway does not trace the job.
   */
  readonly traceparent: string | undefined;
  /**
   * Aborted when the server stops the job (cancelled or timed out). After that nothing the
   * handler returns or yields is posted; stop work as soon as convenient.
   */
  readonly signal: AbortSignal;
  /**
   * Posts a progress update (`{"status":"IN_PROGRESS","output":update}` to job-done); the job
   * stays IN_PROGRESS and `/status` shows `output: update`. Never rejects: a failed post is
   * logged. The final result is posted only after pending progress posts settle.
   */
  progress(update: unknown): Promise<void>;
  /**
   * Asks for this worker to be recycled: the final job-done carries `stopPod: true`, and the
   * worker takes no more jobs and stops once its in-flight jobs are done.
   */
  refresh(): void;
}

/**
 * A job handler. Return (or resolve to) the job's output; throw to fail the job with the
 * error's message; or return an async iterable / generator to stream chunks.
 *
 * A returned plain object is read as runpod-python reads it: an `error` key fails the job
 * with that error (the rest becomes `output`), and `refresh_worker: true` acts like
 * `ctx.refresh()`. Both keys are removed from the output.
 *
 * @example
 * ```ts
 * import type { Handler } from 'gantry/worker';
 * export const handler: Handler<{ text: string }> = (job) => ({ echo: job.input.text });
 * ```
 */
// eslint-disable-next-line @typescript-eslint/no-explicit-any -- input is worker-defined JSON
export type Handler<I = any> = (
  job: WorkerJob<I>,
  ctx: JobContext,
) => unknown | Promise<unknown> | AsyncIterable<unknown> | Iterable<unknown>;

/** The subset of a pino logger the SDK writes to. */
export interface WorkerLogger {
  debug(obj: object, msg?: string): void;
  info(obj: object, msg?: string): void;
  warn(obj: object, msg?: string): void;
  error(obj: object, msg?: string): void;
}

/**
 * Options of {@link startWorker}. Connection settings default to the RUNPOD_* environment
 * variables a RunPod (or Gantry-started) worker gets; `url` + `endpointId` build the same
 * URLs explicitly.
 *
 * @example
 * ```ts
 * import { startWorker } from 'gantry/worker';
 * startWorker({
 *   handler: (job) => job.input,
 *   url: 'http://127.0.0.1:8080', endpointId: 'my-endpoint', apiKey: process.env.WORKER_KEY,
 *   workerId: 'worker-1', concurrency: 4,
 * });
 * ```
 */
export interface WorkerOptions {
  handler: Handler;
  /** Jobs run at once (default 1). Above 1 the worker takes jobs with `job-take-batch`. */
  concurrency?: number;
  /** Streaming handlers: final job-done carries every chunk as `output` (default false: `[]`). */
  returnAggregateStream?: boolean;
  /** Gantry base URL, e.g. `http://127.0.0.1:8080` (a trailing `/v2` is accepted). Needs `endpointId`. */
  url?: string;
  endpointId?: string;
  /** Worker-scoped API key, sent raw in `Authorization` (default RUNPOD_AI_API_KEY). */
  apiKey?: string;
  /** Default RUNPOD_POD_ID, else a random UUID. */
  workerId?: string;
  /** Heartbeat period in ms (default RUNPOD_PING_INTERVAL, else 10000). */
  pingIntervalMs?: number;
  /** Where settings come from when not given above (default `process.env`). */
  env?: Record<string, string | undefined>;
  /** Default: a pino logger on stdout at LOG_LEVEL (default info). */
  logger?: WorkerLogger;
}

/**
 * A running worker, returned by {@link startWorker}.
 *
 * @example
 * ```ts
 * import { startWorker } from 'gantry/worker';
 * const worker = startWorker({ handler: (job) => job.input });
 * process.once('SIGTERM', () => void worker.stop());
 * await worker.done;
 * ```
 */
export interface WorkerHandle {
  readonly workerId: string;
  /**
   * Graceful stop: take no more jobs, let in-flight jobs finish and post their results, then
   * close the long-polls and the heartbeat. Resolves with `done`; calling it again is harmless.
   */
  stop(): Promise<void>;
  /**
   * Resolves once the worker has stopped (after `stop()`, or after a job asked for a refresh).
   * Rejects with a WorkerRefusedError when the server refuses the worker before ever accepting
   * it (a missing or wrong key, a key without the `worker` scope, an unknown endpoint): that
   * cannot succeed by trying again.
   */
  readonly done: Promise<void>;
}
