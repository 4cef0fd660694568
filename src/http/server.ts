import type { IncomingMessage, RequestListener, ServerResponse } from 'node:http';
import { AppError } from '../errors.js';
import type { App } from '../app.js';
import { handleAdminRoute } from './admin-routes.js';
import { handleClientRoute, isClientOperation } from './client-routes.js';
import { handleFileRoute } from './files.js';
import { sendError, sendJson } from './respond.js';
import { handleWorkerRoute, isWorkerOperation } from './worker-routes.js';

/** The query of requests that have none; never written to. */
const NO_QUERY = new URLSearchParams();

/** Splits `/a/b/c?q` into decoded segments and the query. */
function parseTarget(url: string): { segments: string[]; query: URLSearchParams } {
  const q = url.indexOf('?');
  const path = q < 0 ? url : url.slice(0, q);
  const segments: string[] = [];
  for (const part of path.split('/')) {
    if (part === '') continue;
    if (!part.includes('%')) {
      segments.push(part);
      continue;
    }
    try {
      segments.push(decodeURIComponent(part));
    } catch {
      throw new AppError(400, 'INVALID_PATH', 'Malformed percent-encoding in the request path');
    }
  }
  return { segments, query: q < 0 || q === url.length - 1 ? NO_QUERY : new URLSearchParams(url.slice(q + 1)) };
}

/** Operations that may wait: only they need to notice a client that goes away. */
const LONG_POLLS = new Set(['runsync', 'status-sync', 'stream', 'job-take', 'job-take-batch', 'job-stop']);
/** The signal of requests that answer at once: never aborted, shared. */
const NEVER = new AbortController().signal;

/** An AbortSignal that fires when the client goes away before the response is complete. */
function clientGone(req: IncomingMessage, res: ServerResponse): AbortSignal {
  const controller = new AbortController();
  res.once('close', () => {
    if (!res.writableFinished) controller.abort();
  });
  req.once('aborted', () => controller.abort());
  return controller.signal;
}

/**
 * The gateway's request listener: routing only. /v2/{endpoint}/{operation}/... goes to the
 * client or worker routes, /admin/v1/... to the admin API, /healthz answers liveness.
 * Every error, including unknown routes, is a JSON body `{"error", "code"}`.
 */
export function createRequestListener(app: App): RequestListener {
  return (req, res) => {
    void route(app, req, res).catch((err: unknown) => sendError(res, err, app.logger, { method: req.method, url: req.url }));
  };
}

async function route(app: App, req: IncomingMessage, res: ServerResponse): Promise<void> {
  const { segments, query } = parseTarget(req.url ?? '/');
  const [first, endpointId, operation, a, b, ...rest] = segments;
  if (first === 'v2' && endpointId !== undefined && operation !== undefined && rest.length === 0) {
    const signal = LONG_POLLS.has(operation) ? clientGone(req, res) : NEVER;
    if (isClientOperation(operation) && b === undefined) {
      return handleClientRoute(app, { req, res, endpointId, operation, jobId: a, query, signal });
    }
    if (isWorkerOperation(operation)) {
      return handleWorkerRoute(app, { req, res, endpointId, operation, workerId: a, jobId: b, query, signal });
    }
  }
  if (first === 'admin' && endpointId === 'v1') return handleAdminRoute(app, req, res, segments.slice(2));
  if (first === 'files' && segments.length > 1) return handleFileRoute(app.files, req, res, segments.slice(1), query, app.now());
  if (first === 'healthz' && segments.length === 1) return sendJson(res, 200, { ok: true });
  throw new AppError(404, 'NOT_FOUND', `No route for ${req.method ?? 'GET'} ${(req.url ?? '/').split('?')[0]}`);
}
