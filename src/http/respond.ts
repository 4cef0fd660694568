import type { ServerResponse } from 'node:http';
import type { Logger } from 'pino';
import type { JsonParts } from '../jobs/job-view.js';
import { AppError } from '../model/errors.js';

/**
 * Texts longer than this are encoded to UTF-8 once, then measured and sent as bytes: measuring
 * the text and writing it would encode it twice (a job-take answer with a 19 MB input: ~25 ms
 * of the event loop each time, docs/benchmarks.md "Big bodies").
 */
const ENCODE_ONCE_CHARS = 64 * 1024;

/** Sends JSON text as it is (already serialised). Every success is HTTP 200 unless said otherwise. */
export function sendJsonText(res: ServerResponse, status: number, text: string, headers?: Record<string, string>): void {
  if (res.headersSent || res.destroyed) return;
  const body = text.length > ENCODE_ONCE_CHARS ? Buffer.from(text, 'utf8') : text;
  writeJsonHead(res, status, typeof body === 'string' ? Buffer.byteLength(body) : body.length, headers);
  res.end(body);
}

/** The head of a JSON answer of `length` bytes. */
function writeJsonHead(res: ServerResponse, status: number, length: number, headers?: Record<string, string>): void {
  // setHeader, not an object spread: this runs for every response.
  res.setHeader('content-type', 'application/json; charset=utf-8');
  res.setHeader('content-length', length);
  if (headers) for (const name in headers) res.setHeader(name, headers[name]!);
  res.writeHead(status);
}

/**
 * Sends JSON text given whole or in parts (job-view.ts, JsonParts): the parts are written one
 * after the other, the bytes among them as they are.
 */
export function sendJsonParts(res: ServerResponse, status: number, parts: JsonParts): void {
  if (typeof parts === 'string') return sendJsonText(res, status, parts);
  if (res.headersSent || res.destroyed) return;
  const chunks = parts.map((part) => (typeof part === 'string' ? Buffer.from(part, 'utf8') : part));
  let length = 0;
  for (const chunk of chunks) length += chunk.length;
  writeJsonHead(res, status, length);
  for (let i = 0; i < chunks.length - 1; i++) res.write(chunks[i]);
  res.end(chunks.at(-1));
}

/**
 * Joins JSON texts into one JSON array, whole when every one is a whole text.
 *
 * @example jsonArrayParts(['{"a":1}', '{"b":2}']) === '[{"a":1},{"b":2}]'
 */
export function jsonArrayParts(items: readonly JsonParts[]): JsonParts {
  if (items.every((item) => typeof item === 'string')) return `[${items.join(',')}]`;
  const parts: (string | Buffer)[] = ['['];
  items.forEach((item, i) => {
    if (i > 0) parts.push(',');
    if (typeof item === 'string') parts.push(item);
    else parts.push(...item);
  });
  parts.push(']');
  return parts;
}

/**
 * Resolves true once the whole response was handed to the operating system, false when the
 * connection failed first: what a route waits for before it deletes what it sent. Call it right
 * after the response was ended. Node emits 'finish' even when the peer reset the connection
 * under the last write, so the socket's error is what tells the two apart.
 */
export function responseWritten(res: ServerResponse): Promise<boolean> {
  const socket = res.socket;
  const ok = (): boolean => res.writableFinished && !socket?.errored;
  if (res.writableFinished || res.destroyed) return Promise.resolve(ok());
  return new Promise((resolve) => {
    const done = (): void => {
      res.off('finish', done);
      res.off('close', done);
      resolve(ok());
    };
    res.once('finish', done);
    res.once('close', done);
  });
}

/** Sends `body` as JSON with `status` (serialised here). */
export function sendJson(res: ServerResponse, status: number, body: unknown, headers?: Record<string, string>): void {
  sendJsonText(res, status, JSON.stringify(body), headers);
}

/** 204: no job for a worker's long-poll. */
export function sendNoContent(res: ServerResponse): void {
  if (res.headersSent || res.destroyed) return;
  res.writeHead(204);
  res.end();
}

/**
 * The one place errors become HTTP: AppError → its status and `{"error", "code", ...extra}`;
 * anything else is a fault → 500, logged with its stack (the client sees no internals).
 */
export function sendError(res: ServerResponse, err: unknown, logger: Logger, context?: Record<string, unknown>): void {
  if (err instanceof AppError) {
    sendJson(res, err.status, { error: err.message, code: err.code, ...err.extra }, err.headers);
    return;
  }
  logger.error({ err, ...context }, 'request failed');
  sendJson(res, 500, { error: 'Internal server error', code: 'INTERNAL' });
}
