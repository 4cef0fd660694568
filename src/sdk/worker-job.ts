/**
 * Runs one job: calls the handler, streams what it yields, posts progress and the final
 * result. Result shaping follows runpod-python 1.12 (rp_job.py) so the server sees the same
 * bodies from either SDK; the differences are noted where they are.
 */
import { jobUrl, withQuery, type WorkerConfig } from './worker-config.js';
import { describeError, type WorkerHttp } from './worker-http.js';
import type { Handler, JobContext, WorkerJob, WorkerLogger } from './worker-types.js';

/** What a running job needs from its worker. */
export interface JobRunDeps {
  config: WorkerConfig;
  http: WorkerHttp;
  handler: Handler;
  log: WorkerLogger;
  returnAggregateStream: boolean;
}

/** The body of the final job-done post. */
export interface JobResult {
  output?: unknown;
  error?: unknown;
  stopPod?: true;
}

/** How a job ended, for the worker's bookkeeping. */
export type JobOutcome = 'posted' | 'post-failed' | 'stopped';

const STOPPED = Symbol('stopped');

/** A job's execution timeout when its policy names none (RunPod's default). */
const DEFAULT_EXECUTION_TIMEOUT_MS = 600_000;

/**
 * Until when a job's result is worth posting: the server accepts it while the job is still
 * running under this worker, which ends at the latest when its execution timeout (from the
 * job's policy) has passed since it was taken. A result is retried until then, so it survives
 * a gateway restart.
 *
 * @example
 * ```ts
 * resultDeadline({ id: 'J', input: {}, policy: { executionTimeout: 60_000 } }, Date.now()); // now + 60 s
 * ```
 */
export function resultDeadline(job: WorkerJob, takenAt: number): number {
  const timeout = job.policy?.executionTimeout;
  return takenAt + (typeof timeout === 'number' && timeout > 0 ? timeout : DEFAULT_EXECUTION_TIMEOUT_MS);
}

/**
 * Runs `job` to the end and posts its result unless `signal` aborts first (the server
 * stopped the job: then nothing is posted). Never rejects. `refresh` is true when the
 * handler asked for the worker to be recycled.
 *
 * @example
 * ```ts
 * // inside the worker: one call per taken job
 * const { outcome, refresh } = await runJob(job, controller.signal, deps);
 * ```
 */
export async function runJob(
  job: WorkerJob,
  signal: AbortSignal,
  deps: JobRunDeps,
): Promise<{ outcome: JobOutcome; refresh: boolean }> {
  const { config, log } = deps;
  const fields = { jobId: job.id, workerId: config.workerId };
  const doneUrl = jobUrl(config.jobDoneTemplate, job.id);
  const progress = createProgressPoster(doneUrl, signal, fields, deps);
  let refresh = false;
  const ctx: JobContext = {
    workerId: config.workerId,
    traceparent: typeof job.traceparent === 'string' ? job.traceparent : undefined,
    signal,
    refresh() {
      refresh = true;
    },
    progress: progress.post,
  };

  log.info(fields, 'job started');
  const deadline = resultDeadline(job, Date.now());
  const startedAt = performance.now();
  const result = await produceResult(job, ctx, deps);
  // Progress posts go out before the result, so a late one cannot follow the final job-done.
  await progress.finish();
  if (result.kind === 'stopped' || signal.aborted) {
    log.info(fields, 'job stopped by the server; no result posted');
    return { outcome: 'stopped', refresh };
  }
  const body = result.body;
  if (refresh) body.stopPod = true;
  if (body.stopPod) refresh = true;
  const url = withQuery(doneUrl, { isStream: result.kind === 'stream' ? 'true' : 'false' });
  const outcome = await postResult(url, body, fields, deadline, deps);
  if (outcome === 'posted') log.info({ ...fields, ms: Math.round(performance.now() - startedAt), failed: body.error !== undefined }, 'job finished');
  return { outcome, refresh };
}

/** `ctx.progress` of one job, and a way to wait for the posts in flight once the handler is done. */
function createProgressPoster(doneUrl: string, signal: AbortSignal, fields: Record<string, string>, deps: JobRunDeps) {
  const { http, log } = deps;
  const pending = new Set<Promise<void>>();
  let finished = false;
  return {
    post(update: unknown): Promise<void> {
      // A progress post after the end would be ignored by the server at best; don't send it.
      if (finished || signal.aborted) return Promise.resolve();
      const json = toJson({ status: 'IN_PROGRESS', output: update });
      if (json instanceof Error) {
        log.warn({ ...fields, err: json.message }, 'progress update is not JSON; dropped');
        return Promise.resolve();
      }
      const post = http.postJson(withQuery(doneUrl, { isStream: 'false' }), json).then(
        (res) => {
          if (res.status >= 300) log.warn({ ...fields, status: res.status, body: res.body.slice(0, 200) }, 'progress update rejected');
        },
        (err: unknown) => log.warn({ ...fields, err: describeError(err) }, 'progress update not delivered'),
      );
      pending.add(post);
      void post.finally(() => pending.delete(post));
      return post;
    },
    async finish(): Promise<void> {
      finished = true;
      await Promise.all(pending);
    },
  };
}

/**
 * Posts a job's result, retrying network errors, 5xx and 429 until `deadline` (the gateway may
 * be restarting); an output the server cannot take still ends the job (as FAILED), or it would
 * hang until its timeout.
 */
async function postResult(url: string, body: JobResult, fields: Record<string, string>, deadline: number, deps: JobRunDeps): Promise<'posted' | 'post-failed'> {
  const { http, log } = deps;
  let json = toJson(body);
  if (json instanceof Error) json = failureJson(`job output cannot be sent as JSON: ${json.message}`, body);
  let retries = 0;
  const options = {
    retryUntil: deadline,
    onRetry: (failure: { status: number | null; error: string | null; waitMs: number }) => {
      // The first failure is worth a line; the rest of an outage is at debug.
      if (retries++ === 0) log.warn({ ...fields, ...failure, until: new Date(deadline).toISOString() }, 'job result not delivered yet; retrying while the job can still be accepted');
      else log.debug({ ...fields, ...failure }, 'job result not delivered yet; retrying');
    },
  };
  try {
    let res = await http.postJson(url, json, options);
    if (res.status === 413) {
      log.error({ ...fields, bytes: Buffer.byteLength(json) }, 'job output too large for the server; failing the job');
      res = await http.postJson(url, failureJson(`job output of ${Buffer.byteLength(json)} bytes is over the server's limit`, body), options);
    }
    if (retries > 0 && res.status < 300) log.info({ ...fields, retries }, 'job result delivered after retries');
    if (res.status >= 300) {
      log.error({ ...fields, status: res.status, body: res.body.slice(0, 200) }, 'job result rejected');
      return 'post-failed';
    }
    return 'posted';
  } catch (err) {
    log.error({ ...fields, err: describeError(err) }, 'job result not delivered');
    return 'post-failed';
  }
}

type Produced = { kind: 'plain' | 'stream'; body: JobResult } | { kind: 'stopped' };

async function produceResult(job: WorkerJob, ctx: JobContext, deps: JobRunDeps): Promise<Produced> {
  let value: unknown;
  try {
    value = await untilStopped(Promise.resolve(deps.handler(job, ctx)), ctx.signal);
  } catch (err) {
    if (ctx.signal.aborted) return { kind: 'stopped' };
    return { kind: 'plain', body: { error: errorMessage(err) } };
  }
  if (value === STOPPED) return { kind: 'stopped' };
  const iterator = streamIterator(value);
  if (iterator) return streamResult(iterator, job, ctx, deps);
  return { kind: 'plain', body: shapeOutput(value) };
}

/**
 * Reads a returned value as runpod-python's run_job does: an object's `error` fails the job
 * and its `refresh_worker` asks for a recycle; both are taken out of the output, and an
 * output left empty by that is dropped. `undefined` becomes `null` (JSON has no undefined).
 *
 * @example
 * ```ts
 * shapeOutput({ error: 'bad input' });        // { error: 'bad input' }
 * shapeOutput({ text: 'hi', refresh_worker: true }); // { output: { text: 'hi' }, stopPod: true }
 * ```
 */
export function shapeOutput(value: unknown): JobResult {
  if (!isPlainObject(value) || (!('error' in value) && !('refresh_worker' in value))) {
    return { output: value === undefined ? null : value };
  }
  const { error, refresh_worker: refreshWorker, ...rest } = value;
  const result: JobResult = {};
  if (Object.keys(rest).length > 0) result.output = rest;
  if (error) result.error = error;
  if (refreshWorker) result.stopPod = true;
  if (result.output === undefined && result.error === undefined) result.output = null;
  return result;
}

async function streamResult(
  iterator: AsyncIterator<unknown> | Iterator<unknown>,
  job: WorkerJob,
  ctx: JobContext,
  deps: JobRunDeps,
): Promise<Produced> {
  const { config, http, log } = deps;
  const streamUrl = withQuery(jobUrl(config.jobStreamTemplate, job.id), { isStream: 'false' });
  const chunks: unknown[] = [];
  let body: JobResult | undefined;
  // A 413 (the job's stream buffer is full: its readers fell behind, or there are none) cuts this
  // run's stream for good: later chunks are not sent, the aggregate result still is.
  let cut = false;
  try {
    for (;;) {
      const step = await untilStopped(Promise.resolve(iterator.next()), ctx.signal);
      if (step === STOPPED) {
        closeQuietly(iterator);
        return { kind: 'stopped' };
      }
      if (step.done) break;
      const chunk: unknown = step.value;
      // A yielded {error} ends the stream as a failure, as in runpod-python.
      if (isPlainObject(chunk) && chunk.error) {
        body = { error: typeof chunk.error === 'string' ? chunk.error : JSON.stringify(chunk.error) };
        closeQuietly(iterator);
        break;
      }
      const json = toJson({ output: chunk });
      if (json instanceof Error) {
        body = { error: `stream chunk cannot be sent as JSON: ${json.message}` };
        closeQuietly(iterator);
        break;
      }
      if (deps.returnAggregateStream) chunks.push(chunk);
      if (!cut) {
        try {
          const res = await http.postJson(streamUrl, json);
          cut = res.status === 413;
          if (cut) log.warn({ jobId: job.id, workerId: config.workerId, status: res.status }, 'stream buffer full: no more chunks are sent for this job; its result still is');
          else if (res.status >= 300) log.warn({ jobId: job.id, workerId: config.workerId, status: res.status }, 'stream chunk rejected');
        } catch (err) {
          log.warn({ jobId: job.id, workerId: config.workerId, err: describeError(err) }, 'stream chunk not delivered');
        }
      }
      if (ctx.signal.aborted) {
        closeQuietly(iterator);
        return { kind: 'stopped' };
      }
    }
  } catch (err) {
    if (ctx.signal.aborted) return { kind: 'stopped' };
    body = { error: errorMessage(err) };
  }
  // runpod-python sends `{"output": []}` when it does not aggregate; keep that shape.
  return { kind: 'stream', body: body ?? { output: chunks } };
}

/** Resolves with the promise's value, or with STOPPED as soon as the signal aborts. */
function untilStopped<T>(promise: Promise<T>, signal: AbortSignal): Promise<T | typeof STOPPED> {
  if (signal.aborted) {
    promise.catch(() => undefined);
    return Promise.resolve(STOPPED);
  }
  return new Promise((resolve, reject) => {
    const onAbort = (): void => resolve(STOPPED);
    signal.addEventListener('abort', onAbort, { once: true });
    promise.then(
      (value) => {
        signal.removeEventListener('abort', onAbort);
        resolve(value);
      },
      (err: unknown) => {
        signal.removeEventListener('abort', onAbort);
        reject(err);
      },
    );
  });
}

function streamIterator(value: unknown): AsyncIterator<unknown> | Iterator<unknown> | null {
  if (value === null || typeof value !== 'object') return null;
  const asyncIterable = (value as Partial<AsyncIterable<unknown>>)[Symbol.asyncIterator];
  if (typeof asyncIterable === 'function') return asyncIterable.call(value);
  // Sync generators stream too (runpod-python accepts both); arrays and other iterables are output.
  if (Object.prototype.toString.call(value) === '[object Generator]') return value as Iterator<unknown>;
  return null;
}

function closeQuietly(iterator: AsyncIterator<unknown> | Iterator<unknown>): void {
  try {
    const closing: unknown = iterator.return?.();
    if (closing instanceof Promise) closing.catch(() => undefined);
  } catch {
    // the generator's own cleanup failed; the job is over either way
  }
}

function toJson(value: unknown): string | Error {
  try {
    return JSON.stringify(value);
  } catch (err) {
    return err instanceof Error ? err : new Error(String(err));
  }
}

function failureJson(error: string, result: JobResult): string {
  return JSON.stringify(result.stopPod ? { error, stopPod: true } : { error });
}

function errorMessage(err: unknown): string {
  if (err instanceof Error) return err.message || err.name || 'handler failed';
  if (typeof err === 'string' && err) return err;
  try {
    return JSON.stringify(err) ?? 'handler failed';
  } catch {
    return String(err);
  }
}

function isPlainObject(value: unknown): value is Record<string, unknown> {
  if (value === null || typeof value !== 'object' || Array.isArray(value)) return false;
  const proto: unknown = Object.getPrototypeOf(value);
  return proto === Object.prototype || proto === null;
}
