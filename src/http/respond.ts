import type { ServerResponse } from 'node:http';
import type { Logger } from 'pino';
import { AppError } from '../model/errors.js';

/** Sends JSON text as it is (already serialised). Every success is HTTP 200 unless said otherwise. */
export function sendJsonText(res: ServerResponse, status: number, text: string, headers?: Record<string, string>): void {
  if (res.headersSent || res.destroyed) return;
  // setHeader, not an object spread: this runs for every response.
  res.setHeader('content-type', 'application/json; charset=utf-8');
  res.setHeader('content-length', Buffer.byteLength(text));
  if (headers) for (const name in headers) res.setHeader(name, headers[name]!);
  res.writeHead(status);
  res.end(text);
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
