import { invalidParameter } from '../model/errors.js';
import { parseLogLine } from '../pool/log-line.js';
import type { LogStore, StoredLogLine } from '../store/log-store.js';
import type { LogFeed, LogFilter } from './log-feed.js';
import { queryInteger } from './query.js';
import { sendJson } from './respond.js';
import type { Route, RouteCall } from './route-table.js';
import { acceptsEventStream, openSse, SSE_HEARTBEAT_MS, type SseWriter } from './sse.js';

/** What the logs routes read: the store's worker_logs, and this gateway's follow poller. */
export interface LogRouteDeps {
  logs: Pick<LogStore, 'readLogs' | 'lastLogId'>;
  logFeed: LogFeed;
}

/** Lines a page holds unless `limit` says, and the most it may say. */
export const DEFAULT_LOG_PAGE = 100;
export const MAX_LOG_PAGE = 1_000;
/** The longest id or text a filter may name. */
const MAX_FILTER_CHARS = 200;
/** Lines waiting for a follower that does not read; past it the follow ends (the client reconnects with Last-Event-ID). */
const MAX_FOLLOW_BACKLOG = 5_000;

/**
 * A stored line as the API shows it: its time, level and message first (the message of a JSON
 * line is its `msg` or `message`), then where it came from and the line as printed.
 *
 * @example renderLogLine(line) // { id: '42', at: '2026-…Z', level: 'info', message: 'job started', stream: 'stdout', …, line: '{"level":30,…}' }
 */
export function renderLogLine(l: StoredLogLine) {
  const message = l.stream === 'gantry' ? l.line : parseLogLine(l.line).message;
  return { id: String(l.id), at: new Date(l.at).toISOString(), level: l.level, message, stream: l.stream, endpointId: l.endpointId, workerId: l.workerId, jobId: l.jobId, line: l.line };
}

/**
 * `GET /admin/v1/logs` (docs/logs.md): the pool workers' lines from the store, filtered by
 * `endpoint`, `worker`, `job`, `since`, `until` (ISO time or epoch ms) and `q` (text, any case),
 * the newest `limit` in the order printed, with a `cursor` to the page before; with `follow=1`
 * or `Accept: text/event-stream`, those lines and then each new one as a server-sent event.
 *
 * @example routes.add(...logRoutes(deps));
 */
export function logRoutes(deps: LogRouteDeps): Route[] {
  return [{ family: 'admin', method: 'GET', path: '/admin/v1/logs', auth: 'admin', waits: true, handle: (call) => sendLogs(deps, call) }];
}

async function sendLogs(deps: LogRouteDeps, call: RouteCall): Promise<void> {
  const { query, req } = call;
  const filter = logFilterOf(query);
  const limit = queryInteger('limit', query.get('limit'), DEFAULT_LOG_PAGE, 1, MAX_LOG_PAGE);
  const follow = query.get('follow') === '1' || query.get('follow') === 'true' || acceptsEventStream(req);
  if (follow) return followLogs(deps, call, filter, limit);
  const cursor = query.get('cursor');
  const before = cursor === null || cursor === '' ? undefined : lineId('cursor', cursor);
  const newest = await deps.logs.readLogs({ ...filter, ...(before === undefined ? {} : { before }), limit });
  const lines = newest.reverse().map(renderLogLine);
  sendJson(call.res, 200, { lines, cursor: newest.length === limit ? lines[0]!.id : null });
}

/** The filters of a logs query; a bad one is a 400 naming it. */
export function logFilterOf(query: URLSearchParams): LogFilter {
  const filter: LogFilter = {};
  const text = (field: string): string | undefined => {
    const v = query.get(field);
    if (v === null || v === '') return undefined;
    if (v.length > MAX_FILTER_CHARS) throw invalidParameter(field, `must be at most ${MAX_FILTER_CHARS} characters`);
    return v;
  };
  const endpointId = text('endpoint');
  const workerId = text('worker');
  const jobId = text('job');
  const q = text('q');
  const since = time(query, 'since');
  const until = time(query, 'until');
  if (endpointId !== undefined) filter.endpointId = endpointId;
  if (workerId !== undefined) filter.workerId = workerId;
  if (jobId !== undefined) filter.jobId = jobId;
  if (q !== undefined) filter.text = q;
  if (since !== undefined) filter.since = since;
  if (until !== undefined) filter.until = until;
  return filter;
}

/** A time filter: epoch ms or an ISO 8601 time. */
function time(query: URLSearchParams, field: string): number | undefined {
  const raw = query.get(field);
  if (raw === null || raw === '') return undefined;
  const ms = /^\d+$/.test(raw) ? Number(raw) : /^\d{4}-\d\d-\d\d/.test(raw) ? Date.parse(raw) : NaN;
  if (!Number.isSafeInteger(ms)) throw invalidParameter(field, 'must be an ISO 8601 time (2026-11-27T10:00:00Z) or epoch milliseconds');
  return ms;
}

function lineId(field: string, raw: string): number {
  const id = Number(raw);
  if (!/^\d{1,15}$/.test(raw) || !Number.isSafeInteger(id)) throw invalidParameter(field, 'must be the id of a log line');
  return id;
}

/**
 * The follow mode: the newest `limit` lines (or, after a reconnect, those after Last-Event-ID),
 * then every new matching line as it is stored, one event each with the line's id, until the
 * client leaves or the gateway closes. A comment every SSE_HEARTBEAT_MS keeps proxies open.
 * Ids are given in the order lines are committed (one writer, one batch at a time), so the
 * feed that starts after the first page misses nothing and repeats nothing.
 */
async function followLogs(deps: LogRouteDeps, { req, res, signal }: RouteCall, filter: LogFilter, limit: number): Promise<void> {
  const lastEventId = req.headers['last-event-id'];
  const resumeAfter = typeof lastEventId === 'string' && lastEventId !== '' ? lineId('Last-Event-ID', lastEventId) : undefined;
  let first: StoredLogLine[];
  let start: number;
  if (resumeAfter !== undefined) {
    first = await deps.logs.readLogs({ ...filter, after: resumeAfter, limit: MAX_LOG_PAGE });
    start = Math.max(resumeAfter, first.at(-1)?.id ?? 0);
  } else {
    const top = await deps.logs.lastLogId();
    first = (await deps.logs.readLogs({ ...filter, limit })).reverse();
    start = Math.max(top, first.at(-1)?.id ?? 0);
  }
  const sse = openSse(res);
  const queue: StoredLogLine[] = [];
  let wake: (() => void) | null = null;
  let overflow = false;
  const stop = deps.logFeed.follow(filter, start, (lines) => {
    queue.push(...lines);
    if (queue.length > MAX_FOLLOW_BACKLOG) overflow = true;
    wake?.();
  });
  try {
    let sent = await send(sse, first, resumeAfter ?? 0);
    await sse.comment('following');
    while (sse.open && !signal.aborted && !overflow) {
      if (queue.length === 0) await waitFor(signal, SSE_HEARTBEAT_MS, (w) => (wake = w));
      wake = null;
      if (queue.length === 0) await sse.comment('keep-alive');
      else sent = await send(sse, queue.splice(0), sent);
    }
  } finally {
    stop();
    sse.end();
  }
}

async function send(sse: SseWriter, lines: StoredLogLine[], sent: number): Promise<number> {
  let last = sent;
  for (const line of lines) {
    if (line.id <= last) continue;
    await sse.event(JSON.stringify(renderLogLine(line)), { id: String(line.id) });
    last = line.id;
  }
  return last;
}

/** Resolves after `ms`, when woken, or when the signal aborts. */
function waitFor(signal: AbortSignal, ms: number, setWake: (wake: () => void) => void): Promise<void> {
  return new Promise((resolve) => {
    const done = (): void => {
      clearTimeout(timer);
      signal.removeEventListener('abort', done);
      resolve();
    };
    const timer = setTimeout(done, ms);
    signal.addEventListener('abort', done, { once: true });
    setWake(done);
  });
}
