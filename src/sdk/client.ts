/**
 * The typed client of Gantry's job API (`gantry/client`, docs/api.md): run, runSync, status,
 * wait, stream (an async iterator), cancel, retry, purgeQueue, health. It needs only the
 * global `fetch` (Node 20+, browsers, Deno) and imports nothing else from Gantry.
 *
 * Every call that the server refuses with 429 (rate limit, queue full) is sent again after
 * the server's `Retry-After` (or an exponential backoff when it gives none), up to
 * `maxRetries` times: a 429 means the request was not accepted, so sending it again never
 * makes a second job. Other errors throw a {@link GantryApiError} at once.
 */

/** A job's state: live (IN_QUEUE, IN_PROGRESS) or terminal. */
export type JobStatus = 'IN_QUEUE' | 'IN_PROGRESS' | 'COMPLETED' | 'FAILED' | 'CANCELLED' | 'TIMED_OUT';

/** The terminal states: nothing changes a job in one of these but a retry. */
export const TERMINAL_STATUSES: readonly JobStatus[] = ['COMPLETED', 'FAILED', 'CANCELLED', 'TIMED_OUT'];

/** The job object of /status, /runsync and webhooks. */
export interface Job<Output = unknown> {
  id: string;
  status: JobStatus;
  /** ms from entering the queue (submit or /retry) to the start of the current or last run, once taken; requeues do not restart it. */
  delayTime?: number;
  /** ms from taken to its end, once ended. */
  executionTime?: number;
  workerId?: string;
  /** How many times a client retried the job (/retry). */
  retries?: number;
  /** Hand-outs to workers since the submit or the last /retry (more than 1: a worker lost it and it ran again). */
  attempts?: number;
  /** While queued or running. */
  input?: unknown;
  /** When completed (the latest progress update while running). */
  output?: Output;
  /** When failed or timed out. */
  error?: string;
}

/** What /run, /cancel and /retry answer. */
export interface JobRef {
  id: string;
  status: JobStatus;
}

/** A job's `policy`: execution timeout and ttl in ms, low priority (never scales workers up). */
export interface JobPolicy {
  executionTimeout?: number;
  lowPriority?: boolean;
  ttl?: number;
}

/** A job's own S3 bucket for its outputs; handed only to the worker, encrypted at rest. */
export interface S3Config {
  accessId: string;
  accessSecret: string;
  bucketName: string;
  endpointUrl: string;
}

/** The body of /run and /runsync. */
export interface RunRequest<Input = unknown> {
  input: Input;
  webhook?: string;
  policy?: JobPolicy;
  s3Config?: S3Config;
}

/** /health of an endpoint: retained jobs and workers by state. */
export interface EndpointHealth {
  /** `retried`: jobs a client retried (/retry); `reattempted`: jobs handed to a worker more than once (a worker lost them). */
  jobs: { inQueue: number; inProgress: number; completed: number; failed: number; cancelled: number; timedOut: number; retried: number; reattempted: number };
  workers: { idle: number; initializing: number; ready: number; running: number; throttled: number; unhealthy: number };
}

/** How to reach a gateway and how patient to be with it. */
export interface ClientOptions {
  /** Base URL of the gateway, e.g. `http://localhost:8080` (without `/v2`). */
  url: string;
  /** A key with the `run` scope (or `read` for status, stream and health). Never part of an error. */
  apiKey: string;
  /** How often a 429 is sent again (default 5; 0: never). */
  maxRetries?: number;
  /** Longest wait before sending a 429 again, whatever Retry-After says (default 30 000 ms). */
  maxRetryDelayMs?: number;
  /** Time limit of one plain request (default 30 000 ms); long-polls get their wait on top. */
  timeoutMs?: number;
  /**
   * The most one runsync / status-sync call asks the server to hold it (default 60 000 ms,
   * within the server's 1 000–300 000): lower it behind a proxy that cuts idle requests sooner.
   * Longer waits are made of several such calls.
   */
  longPollMs?: number;
  /** Defaults to the global fetch. */
  fetch?: typeof fetch;
  /**
   * The W3C `traceparent` to send with each submit (run, runSync) that gives none of its own:
   * called once per submit, so it can read the caller's current span. The job's trace then
   * continues the caller's (docs/observability.md); undefined sends none. With OpenTelemetry:
   * `() => { const c = {}; propagation.inject(context.active(), c); return c.traceparent; }`.
   * A hook that throws sends none.
   */
  traceparent?: () => string | undefined;
}

/** Options of one call: an AbortSignal that cancels it (and its retries). */
export interface CallOptions {
  signal?: AbortSignal;
}

/** Options of a submit (run, runSync). */
export interface SubmitOptions {
  /** A W3C `traceparent` (`00-<trace id>-<span id>-<flags>`) the job's trace continues; overrides ClientOptions.traceparent. */
  traceparent?: string;
}

/** Options of stream(). */
export interface StreamOptions extends CallOptions {
  /**
   * Called when the job runs again from its start after its worker was lost while streaming
   * (docs/api.md, "A job that runs again"), with the new run's attempt, before its first
   * chunk: the chunks yielded so far belong to an abandoned run, so drop what was built from
   * them. Without it, the iterator throws a GantryApiError with code STREAM_RESTARTED instead.
   */
  onRestart?: (attempt: number) => void;
}

/** How long a waiting call may wait in all. */
export interface WaitOptions extends CallOptions {
  /** Total time to wait for the job to end (default 90 000 ms); the job is returned as it is then. */
  timeoutMs?: number;
}

/**
 * A refused or failed call: `status` and the server's `code`, message and `field` (for a
 * 400 naming the bad field); status 0 and code UNREACHABLE when no answer came.
 */
export class GantryApiError extends Error {
  override readonly name = 'GantryApiError';
  constructor(
    message: string,
    readonly status: number,
    readonly code: string,
    readonly field?: string,
    /** Seconds the server asked to wait (429). */
    readonly retryAfter?: number,
  ) {
    super(message);
  }
}

/** The job API of one gateway. */
export interface GantryClient {
  /** Queues a job; answers at once with its id. */
  run<I = unknown>(endpointId: string, request: RunRequest<I>, options?: CallOptions & SubmitOptions): Promise<JobRef>;
  /** Submits and waits for the end (server-side up to 300 s a call, then status-sync) until `timeoutMs`. */
  runSync<O = unknown, I = unknown>(endpointId: string, request: RunRequest<I>, options?: WaitOptions & SubmitOptions): Promise<Job<O>>;
  status<O = unknown>(endpointId: string, jobId: string, options?: CallOptions): Promise<Job<O>>;
  /** Waits (status-sync long-polls) until the job ends or `timeoutMs` passes. */
  wait<O = unknown>(endpointId: string, jobId: string, options?: WaitOptions): Promise<Job<O>>;
  /**
   * The job's streamed outputs as they come, until it ends: `for await (const chunk of client.stream(ep, id))`.
   * Never two runs spliced: a job that runs again after its worker was lost mid-stream calls
   * `options.onRestart`, or without it throws a GantryApiError with code STREAM_RESTARTED.
   */
  stream<C = unknown>(endpointId: string, jobId: string, options?: StreamOptions): AsyncIterable<C>;
  cancel(endpointId: string, jobId: string, options?: CallOptions): Promise<JobRef>;
  retry(endpointId: string, jobId: string, options?: CallOptions): Promise<JobRef>;
  /** Cancels every queued job of the endpoint; running jobs go on. */
  purgeQueue(endpointId: string, options?: CallOptions): Promise<{ removed: number }>;
  health(endpointId: string, options?: CallOptions): Promise<EndpointHealth>;
}

/** The server's range for one runsync / status-sync wait (docs/api.md). */
const MAX_SERVER_WAIT_MS = 300_000;
const MIN_SERVER_WAIT_MS = 1_000;
const DEFAULT_LONG_POLL_MS = 60_000;
const DEFAULT_WAIT_MS = 90_000;
/** One stream poll is held by the server up to this long when nothing is buffered. */
const STREAM_WAIT_MS = 10_000;

/** True for COMPLETED, FAILED, CANCELLED and TIMED_OUT. */
export function isTerminal(status: JobStatus): boolean {
  return status !== 'IN_QUEUE' && status !== 'IN_PROGRESS';
}

/**
 * Creates a client of one gateway.
 *
 * @example
 * ```ts
 * import { createClient } from 'gantry/client';
 *
 * const gantry = createClient({ url: 'http://localhost:8080', apiKey: process.env.GANTRY_API_KEY ?? '' });
 * const job = await gantry.runSync('echo', { input: { hello: 'world' } });
 * console.log(job.status, job.output);
 * for await (const token of gantry.stream('llm', (await gantry.run('llm', { input: { prompt: 'hi' } })).id)) process.stdout.write(String(token));
 * ```
 */
export function createClient(options: ClientOptions): GantryClient {
  const send = createSender(options);
  const longPollMs = Math.min(MAX_SERVER_WAIT_MS, Math.max(MIN_SERVER_WAIT_MS, options.longPollMs ?? DEFAULT_LONG_POLL_MS));
  /** A server wait for one long-poll: what is left until `deadline`, within the server's range and longPollMs. */
  const serverWait = (deadline: number): number => Math.min(longPollMs, Math.max(MIN_SERVER_WAIT_MS, deadline - Date.now()));
  const path = (endpointId: string, operation: string, jobId?: string) =>
    `/v2/${encodeURIComponent(endpointId)}/${operation}${jobId === undefined ? '' : `/${encodeURIComponent(jobId)}`}`;
  const traceHeader = (o: SubmitOptions | undefined): Record<string, string> | undefined => traceHeaderOf(options, o);
  const client: GantryClient = {
    run: (endpointId, request, o) => send<JobRef>('POST', path(endpointId, 'run'), { body: request, signal: o?.signal, headers: traceHeader(o) }),
    async runSync<O, I>(endpointId: string, request: RunRequest<I>, o?: WaitOptions & SubmitOptions): Promise<Job<O>> {
      const deadline = Date.now() + (o?.timeoutMs ?? DEFAULT_WAIT_MS);
      const wait = serverWait(deadline);
      const first = await send<Job<O>>('POST', `${path(endpointId, 'runsync')}?wait=${wait}`, { body: request, signal: o?.signal, waitMs: wait, headers: traceHeader(o) });
      return isTerminal(first.status) ? first : waitUntil<O>(endpointId, first.id, deadline, o?.signal);
    },
    status: (endpointId, jobId, o) => send('GET', path(endpointId, 'status', jobId), { signal: o?.signal }),
    wait: (endpointId, jobId, o) => waitUntil(endpointId, jobId, Date.now() + (o?.timeoutMs ?? DEFAULT_WAIT_MS), o?.signal),
    stream: (endpointId, jobId, o) => streamChunks(endpointId, jobId, o),
    cancel: (endpointId, jobId, o) => send('POST', path(endpointId, 'cancel', jobId), { signal: o?.signal }),
    retry: (endpointId, jobId, o) => send('POST', path(endpointId, 'retry', jobId), { signal: o?.signal }),
    purgeQueue: async (endpointId, o) => ({ removed: (await send<{ removed: number }>('POST', path(endpointId, 'purge-queue'), { signal: o?.signal })).removed }),
    health: (endpointId, o) => send('GET', path(endpointId, 'health'), { signal: o?.signal }),
  };

  async function waitUntil<O>(endpointId: string, jobId: string, deadline: number, signal?: AbortSignal): Promise<Job<O>> {
    for (;;) {
      const wait = serverWait(deadline);
      const job = await send<Job<O>>('GET', `${path(endpointId, 'status-sync', jobId)}?wait=${wait}`, { signal, waitMs: wait });
      if (isTerminal(job.status) || Date.now() >= deadline) return job;
    }
  }

  async function* streamChunks<C>(endpointId: string, jobId: string, o?: StreamOptions): AsyncGenerator<C> {
    const signal = o?.signal;
    /** The run of the chunks yielded since the job last started again; 0 before any. */
    let run = 0;
    for (;;) {
      const page = await send<{ status: JobStatus; attempt?: number; stream: { output: C }[] }>('GET', `${path(endpointId, 'stream', jobId)}?wait=${STREAM_WAIT_MS}`, { signal, waitMs: STREAM_WAIT_MS });
      // Chunks come only while a run is on: back in the queue, or chunks of a later run, means
      // the run yielded so far was abandoned.
      const later = page.attempt !== undefined && page.attempt > run;
      if (run > 0 && (page.status === 'IN_QUEUE' || later)) {
        const attempt = later ? page.attempt! : run + 1;
        if (!o?.onRestart) {
          throw new GantryApiError(`job ${jobId} started again from the beginning (attempt ${attempt}) after its worker was lost mid-stream: the chunks read so far belong to an abandoned run`, 0, 'STREAM_RESTARTED');
        }
        o.onRestart(attempt);
        run = 0;
      }
      for (const chunk of page.stream) yield chunk.output;
      if (page.attempt !== undefined && page.stream.length > 0) run = page.attempt;
      if (isTerminal(page.status)) return;
    }
  }

  return client;
}

/** The trace header of one submit: the call's own, else the client's hook's, else none (a hook that throws sends none: tracing never fails a submit). */
function traceHeaderOf(options: ClientOptions, o: SubmitOptions | undefined): Record<string, string> | undefined {
  let traceparent = o?.traceparent;
  if (traceparent === undefined) {
    try {
      traceparent = options.traceparent?.();
    } catch {
      traceparent = undefined;
    }
  }
  return traceparent === undefined ? undefined : { traceparent };
}

/** One request as the client methods describe it. */
interface SendOptions {
  body?: unknown;
  signal?: AbortSignal | undefined;
  /** How long the server may hold it (long-polls): added to the time limit. */
  waitMs?: number;
  /** Sent besides the key and content headers (a submit's traceparent). */
  headers?: Record<string, string> | undefined;
}

type Send = <T>(method: string, path: string, options?: SendOptions) => Promise<T>;

/** Sends requests with the key, retrying 429s; returns the parsed JSON answer. */
function createSender(options: ClientOptions): Send {
  const base = options.url.replace(/\/+$/, '');
  const doFetch = options.fetch ?? globalThis.fetch;
  const maxRetries = options.maxRetries ?? 5;
  const maxDelay = options.maxRetryDelayMs ?? 30_000;
  const timeoutMs = options.timeoutMs ?? 30_000;
  const headers: Record<string, string> = { authorization: `Bearer ${options.apiKey}`, accept: 'application/json' };
  return async <T>(method: string, path: string, o: SendOptions = {}): Promise<T> => {
    const body = o.body === undefined ? undefined : JSON.stringify(o.body);
    for (let attempt = 0; ; attempt++) {
      const signal = o.signal ? AbortSignal.any([o.signal, AbortSignal.timeout(timeoutMs + (o.waitMs ?? 0))]) : AbortSignal.timeout(timeoutMs + (o.waitMs ?? 0));
      let response: Response;
      try {
        const sent = body === undefined ? headers : { ...headers, 'content-type': 'application/json' };
        response = await doFetch(`${base}${path}`, { method, headers: o.headers ? { ...sent, ...o.headers } : sent, body, signal });
      } catch (err) {
        if (o.signal?.aborted) throw o.signal.reason;
        throw new GantryApiError(`cannot reach gantry at ${base}: ${describeFetchError(err)}`, 0, 'UNREACHABLE');
      }
      const text = await response.text();
      if (response.ok) return parseAnswer<T>(text, method, path, response.status);
      const error = toApiError(response, text);
      if (response.status !== 429 || attempt >= maxRetries) throw error;
      await pause(retryDelay(error.retryAfter, attempt, maxDelay), o.signal);
    }
  };
}

function parseAnswer<T>(text: string, method: string, path: string, status: number): T {
  try {
    return JSON.parse(text) as T;
  } catch {
    throw new GantryApiError(`unexpected answer from ${method} ${path.split('?')[0] ?? ''}: not JSON`, status, 'BAD_RESPONSE');
  }
}

function toApiError(response: Response, text: string): GantryApiError {
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch {
    parsed = undefined;
  }
  const error = typeof parsed === 'object' && parsed !== null ? (parsed as Record<string, unknown>) : {};
  const message = typeof error.error === 'string' ? error.error : `HTTP ${response.status} ${response.statusText}`.trim();
  const code = typeof error.code === 'string' ? error.code : `HTTP_${response.status}`;
  const field = typeof error.field === 'string' ? error.field : undefined;
  const header = Number(response.headers.get('retry-after'));
  return new GantryApiError(message, response.status, code, field, Number.isFinite(header) && header >= 0 ? header : undefined);
}

/** Retry-After when the server gave one; otherwise 0.5 s doubling per attempt, with jitter. */
function retryDelay(retryAfterSeconds: number | undefined, attempt: number, maxDelayMs: number): number {
  const ms = retryAfterSeconds !== undefined ? retryAfterSeconds * 1000 : 500 * 2 ** attempt * (0.5 + Math.random() / 2);
  return Math.min(maxDelayMs, ms);
}

function pause(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal?.aborted) return reject(signal.reason as Error);
    const timer = setTimeout(() => {
      signal?.removeEventListener('abort', onAbort);
      resolve();
    }, ms);
    const onAbort = (): void => {
      clearTimeout(timer);
      reject(signal?.reason as Error);
    };
    signal?.addEventListener('abort', onAbort, { once: true });
  });
}

/** fetch wraps the interesting part (ECONNREFUSED, a timeout) in `cause`. */
function describeFetchError(err: unknown): string {
  if (!(err instanceof Error)) return String(err);
  if (err.name === 'TimeoutError') return 'request timed out';
  const cause = err.cause;
  if (cause instanceof Error) {
    const code = (cause as { code?: unknown }).code;
    return typeof code === 'string' ? code : cause.message;
  }
  return err.message;
}
