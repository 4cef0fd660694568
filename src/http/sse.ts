import type { IncomingMessage, ServerResponse } from 'node:http';
import type { JobService, SeenJob, StreamRead } from '../jobs/job-service.js';
import { renderJob, renderJobRef } from '../jobs/job-view.js';
import { runOf } from '../jobs/stream-reads.js';
import { isTerminal } from '../model/job-states.js';
import type { JobRecord } from '../model/records.js';

/**
 * Server-sent events (docs/api.md, "/stream as server-sent events"): a writer usable by any
 * route, the loop that follows one job's stream, and the `/stream` event format.
 */

/** A comment line after this long without an event keeps idle connections (and proxies between) open. */
export const SSE_HEARTBEAT_MS = 15_000;
/** A client that reads nothing for this long while the gateway has an event to write is cut off. */
export const SSE_STALL_MS = 60_000;

/** One server-sent events response. Writes resolve once the socket takes the bytes (backpressure). */
export interface SseWriter {
  /** True once the status line and headers are out (the first write sends them). */
  readonly started: boolean;
  /** False once the client has gone or the stream has ended. */
  readonly open: boolean;
  /** One event; `data` may hold line breaks (each line becomes a `data:` field). */
  event(data: string, fields?: { event?: string; id?: string }): Promise<void>;
  /** Text that is already SSE (`data: ...\n\n` lines made by someone else), written as it is. */
  raw(text: string): Promise<void>;
  /** A comment line, ignored by readers: the heartbeat. */
  comment(text: string): Promise<void>;
  /** Ends the response (sending the headers first if nothing was written). */
  end(): void;
  /**
   * Resolves true once every byte written so far was handed to the operating system, false when
   * the connection ended first: what a reader waits for before it deletes what it sent.
   */
  flushed(): Promise<boolean>;
}

/** How an SSE response starts. */
export interface SseOptions {
  /** Extra response headers. */
  headers?: Record<string, string>;
  /** Cut off a client that does not read for this long (default SSE_STALL_MS). */
  stallMs?: number;
}

/**
 * Starts a `text/event-stream` answer on `res`. Headers go out with the first write, so a
 * route can still answer an ordinary error until then.
 *
 * @example const sse = openSse(res); await sse.event('{"n":1}'); sse.end();
 */
export function openSse(res: ServerResponse, options: SseOptions = {}): SseWriter {
  return new EventStream(res, options);
}

/** True when the request asks for server-sent events (`Accept: text/event-stream`). */
export function acceptsEventStream(req: IncomingMessage): boolean {
  return req.headers.accept?.includes('text/event-stream') ?? false;
}

class EventStream implements SseWriter {
  started = false;
  /** Settles with the outcome of the last write handed to the socket. */
  private lastWrite: Promise<boolean> = Promise.resolve(true);

  constructor(private readonly res: ServerResponse, private readonly options: SseOptions) {}

  get open(): boolean {
    return !this.res.destroyed && !this.res.writableEnded;
  }

  event(data: string, fields?: { event?: string; id?: string }): Promise<void> {
    let text = '';
    if (fields?.event !== undefined) text += `event: ${oneLine(fields.event)}\n`;
    if (fields?.id !== undefined) text += `id: ${oneLine(fields.id)}\n`;
    for (const line of data.split(/\r\n|\r|\n/)) text += `data: ${line}\n`;
    return this.write(text + '\n');
  }

  raw(text: string): Promise<void> {
    return this.write(text);
  }

  comment(text: string): Promise<void> {
    return this.write(`: ${oneLine(text)}\n\n`);
  }

  end(): void {
    if (!this.open) return;
    this.start();
    this.res.end();
  }

  flushed(): Promise<boolean> {
    if (!this.open) return Promise.resolve(false);
    const res = this.res;
    return new Promise((resolve) => {
      const closed = (): void => resolve(false);
      res.once('close', closed);
      void this.lastWrite.then((ok) => {
        res.off('close', closed);
        resolve(ok && !res.destroyed && !res.socket?.errored);
      });
    });
  }

  private start(): void {
    if (this.started || this.res.headersSent) return;
    this.started = true;
    this.res.writeHead(200, {
      'content-type': 'text/event-stream; charset=utf-8',
      // no-transform: proxies must not compress or buffer the stream; x-accel-buffering: nginx.
      'cache-control': 'no-cache, no-transform',
      'x-accel-buffering': 'no',
      ...this.options.headers,
    });
  }

  private async write(text: string): Promise<void> {
    if (!this.open) return;
    this.start();
    let taken!: (ok: boolean) => void;
    this.lastWrite = new Promise((resolve) => (taken = resolve));
    if (this.res.write(text, (err) => taken(!err))) return;
    await this.drained();
  }

  /** Waits until the socket takes more; a client that reads nothing for stallMs is cut off. */
  private drained(): Promise<void> {
    const res = this.res;
    return new Promise((resolve) => {
      const done = (): void => {
        clearTimeout(timer);
        res.off('drain', done);
        res.off('close', done);
        resolve();
      };
      const timer = setTimeout(() => {
        res.destroy();
        done();
      }, this.options.stallMs ?? SSE_STALL_MS);
      res.once('drain', done);
      res.once('close', done);
    });
  }
}

/** Field values in SSE are single lines. */
function oneLine(value: string): string {
  return value.replace(/[\r\n]+/g, ' ');
}

/** What a follower is told of the job besides its record (docs/api.md, "A job that runs again"). */
export interface FollowedRun {
  /** The run the reader is at: the job's (runOf), or that of the chunks just read when that is later. */
  attempt: number;
  /**
   * The run whose chunks this reader was handed has been abandoned (its worker was lost): the
   * job went back to the queue, or a later run has begun. What follows is that later run, from
   * its start. Told once per abandoned run.
   */
  restarted: boolean;
}

/** What a route does with the updates of the job it follows. */
export interface JobFollower {
  /**
   * The job's status or run changed (and it is still live); called first with the status it
   * has, and before the chunks of a later run.
   */
  status?(job: JobRecord, run: FollowedRun): Promise<void>;
  /** A page of the job's stream, in order (`page.truncated`: the run's stream was cut after it). */
  chunks(chunks: string[], page: StreamRead): Promise<void>;
  /** Nothing happened for the heartbeat interval. */
  idle(): Promise<void>;
}

/**
 * Follows a job's stream until it ends or the client leaves: reads a page, hands it to
 * `follower`, deletes it from the job's buffer once its bytes are out (a reader that fails
 * first leaves them for the next one), then reads on at once while pages remain, or waits for
 * the next wake-up ('job-updated', published when a worker posts a chunk or the job changes
 * state), calling `idle` after `heartbeatMs` without one. A job that runs again after its
 * worker was lost is told to `follower.status` (`restarted`) before anything of the new run.
 * Resolves with the job as last read: terminal, or still live when `signal` aborted;
 * undefined when the job does not exist (or no longer does).
 *
 * @example const job = await followJob(jobs, sse, 'echo', id, signal, { chunks: write, idle: () => sse.comment('keep-alive') });
 */
export async function followJob(
  jobs: Pick<JobService, 'watchStream' | 'delivered'>,
  sse: Pick<SseWriter, 'flushed'>,
  endpointId: string,
  jobId: string,
  signal: AbortSignal,
  follower: JobFollower,
  heartbeatMs: number = SSE_HEARTBEAT_MS,
): Promise<JobRecord | undefined> {
  let last: SeenJob | null = null;
  let lastAttempt = -1;
  /** The run of the chunks handed to the follower since the job last started again; 0 before any. */
  let run = 0;
  let after = 0;
  for (;;) {
    const page = await jobs.watchStream(endpointId, jobId, last, after, heartbeatMs, signal);
    if (!page) return undefined;
    const { job } = page;
    if (signal.aborted) return job;
    const attempt = Math.max(runOf(job), page.through > 0 ? page.attempt : 0);
    // Chunks come only while IN_PROGRESS: once this reader has some, the queue or a later run
    // means their run was abandoned.
    const restarted = run > 0 && !isTerminal(job.status) && (job.status === 'IN_QUEUE' || attempt > run);
    const changed = job.status !== last?.status || attempt !== lastAttempt || restarted;
    if (changed && !isTerminal(job.status)) await follower.status?.(job, { attempt, restarted });
    if (restarted) run = 0;
    if (page.through > 0) {
      if (page.chunks.length > 0 || page.truncated) {
        await follower.chunks(page.chunks, page);
        run = page.attempt;
      }
      after = page.through;
      if (await sse.flushed()) await jobs.delivered(jobId, page.through);
    }
    if ((isTerminal(job.status) && !page.more) || signal.aborted) return job;
    if (!changed && page.through === 0) await follower.idle();
    last = { status: job.status, run: runOf(job) };
    lastAttempt = attempt;
  }
}

/** The data of a `truncated` event: the byte cap cut the run's stream (docs/api.md). */
function renderTruncated(jobId: string): string {
  return `{"id":${JSON.stringify(jobId)},"truncated":true}`;
}

/** The id of the last event of a job's stream: a reader that reconnects with it has seen the end. */
const END_EVENT_ID = 'end';

/** The data of a `status` event: `{id, status, attempt}`, and `restarted: true` when the reader's run was abandoned. */
function renderStatus(job: JobRecord, run: FollowedRun): string {
  const ref = renderJobRef(job);
  return `${ref.slice(0, -1)},"attempt":${run.attempt}${run.restarted ? ',"restarted":true' : ''}}`;
}

/**
 * `GET /stream/{id}` with `Accept: text/event-stream`: `event: status` with `{id, status,
 * attempt}` while the job is live (first its current status, then each change of status or
 * run; `restarted: true` once the run whose chunks were sent was abandoned), one default event
 * `{"output": chunk}` per chunk, and `event: done` with the finished job as /status renders it
 * (id `end`). A reader reconnecting after `done` (`Last-Event-ID: end`) gets 204, which tells
 * an EventSource to stop. Resolves false when the job does not exist (nothing was written).
 *
 * @example if (!(await sendJobEvents(jobs, req, res, 'echo', id, signal))) throw jobNotFound(id);
 */
export async function sendJobEvents(
  jobs: Pick<JobService, 'watchStream' | 'delivered'>,
  req: IncomingMessage,
  res: ServerResponse,
  endpointId: string,
  jobId: string,
  signal: AbortSignal,
  heartbeatMs: number = SSE_HEARTBEAT_MS,
): Promise<boolean> {
  if (req.headers['last-event-id'] === END_EVENT_ID) {
    res.writeHead(204);
    res.end();
    return true;
  }
  const sse = openSse(res);
  const job = await followJob(jobs, sse, endpointId, jobId, signal, {
    status: (current, run) => sse.event(renderStatus(current, run), { event: 'status' }),
    async chunks(chunks, page) {
      for (const chunk of chunks) await sse.event(`{"output":${chunk}}`);
      if (page.truncated) await sse.event(renderTruncated(jobId), { event: 'truncated' });
    },
    idle: () => sse.comment('keep-alive'),
  }, heartbeatMs);
  if (!job && !sse.started) return false;
  if (job && isTerminal(job.status)) await sse.event(renderJob(job), { event: 'done', id: END_EVENT_ID });
  sse.end();
  return true;
}
