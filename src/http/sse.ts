import type { IncomingMessage, ServerResponse } from 'node:http';
import type { JobService } from '../jobs/job-service.js';
import { renderJob, renderJobRef } from '../jobs/job-view.js';
import { isTerminal, type JobStatus } from '../model/job-states.js';
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
    if (this.res.write(text)) return;
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

/** What a route does with the updates of the job it follows. */
export interface JobFollower {
  /** The job's status changed (and it is still live); called first with the status it has. */
  status?(job: JobRecord): Promise<void>;
  /** Chunks drained from the job's stream, in order. */
  chunks(chunks: string[], job: JobRecord): Promise<void>;
  /** Nothing happened for the heartbeat interval. */
  idle(): Promise<void>;
}

/**
 * Follows a job's stream until it ends or the client leaves: drains chunks, hands them to
 * `follower`, then waits for the next wake-up ('job-updated', published when a worker posts
 * a chunk or the job changes state), calling `idle` after `heartbeatMs` without one. Resolves
 * with the job as last read: terminal, or still live when `signal` aborted; undefined when the
 * job does not exist (or no longer does).
 *
 * @example const job = await followJob(jobs, 'echo', id, signal, { chunks: write, idle: () => sse.comment('keep-alive') });
 */
export async function followJob(
  jobs: Pick<JobService, 'watchStream'>,
  endpointId: string,
  jobId: string,
  signal: AbortSignal,
  follower: JobFollower,
  heartbeatMs: number = SSE_HEARTBEAT_MS,
): Promise<JobRecord | undefined> {
  let last: JobStatus | null = null;
  for (;;) {
    const update = await jobs.watchStream(endpointId, jobId, last, heartbeatMs, signal);
    if (!update) return undefined;
    const { job, chunks } = update;
    if (signal.aborted) return job;
    const changed = job.status !== last;
    if (changed && !isTerminal(job.status)) await follower.status?.(job);
    if (chunks.length > 0) await follower.chunks(chunks, job);
    if (isTerminal(job.status) || signal.aborted) return job;
    if (!changed && chunks.length === 0) await follower.idle();
    last = job.status;
  }
}

/** The id of the last event of a job's stream: a reader that reconnects with it has seen the end. */
const END_EVENT_ID = 'end';

/**
 * `GET /stream/{id}` with `Accept: text/event-stream`: `event: status` with `{id, status}`
 * while the job is live (first its current status, then each change), one default event
 * `{"output": chunk}` per chunk, and `event: done` with the finished job as /status renders it
 * (id `end`). A reader reconnecting after `done` (`Last-Event-ID: end`) gets 204, which tells
 * an EventSource to stop. Resolves false when the job does not exist (nothing was written).
 *
 * @example if (!(await sendJobEvents(jobs, req, res, 'echo', id, signal))) throw jobNotFound(id);
 */
export async function sendJobEvents(
  jobs: Pick<JobService, 'watchStream'>,
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
  const job = await followJob(jobs, endpointId, jobId, signal, {
    status: (current) => sse.event(renderJobRef(current), { event: 'status' }),
    async chunks(chunks) {
      for (const chunk of chunks) await sse.event(`{"output":${chunk}}`);
    },
    idle: () => sse.comment('keep-alive'),
  }, heartbeatMs);
  if (!job && !sse.started) return false;
  if (job && isTerminal(job.status)) await sse.event(renderJob(job), { event: 'done', id: END_EVENT_ID });
  sse.end();
  return true;
}
