import type { ClientAddress } from './client-address.js';
import { randomBytes } from 'node:crypto';
import type { IncomingMessage, RequestListener, ServerResponse } from 'node:http';
import type { Logger } from 'pino';
import { AppError } from '../model/errors.js';
import { runAsRequest } from '../util/request-context.js';
import type { AdminRouteDeps } from './admin-routes.js';
import { governBody, type BodyBudget } from './body.js';
import type { ClientRouteDeps } from './client-routes.js';
import { createKeyConnections, type KeyConnections } from './connection-guard.js';
import { backOffOf, dispatch, type DispatchDeps, type Dispatching, type ListenerState, type RequestInfo } from './dispatch.js';
import { sendError } from './respond.js';
import type { RouteTable } from './route-table.js';
import type { WorkerRouteDeps } from './worker-routes.js';

/** Everything the HTTP layer calls: the services of one gateway, each as narrow as its routes need. */
export interface HttpServices extends ClientRouteDeps, WorkerRouteDeps, AdminRouteDeps {
  logger: Logger;
  /** The client's address (X-Forwarded-For from GANTRY_TRUSTED_PROXIES only): the console's sign-in limit, the access log. */
  clientAddress: ClientAddress;
}

/**
 * Told of every request once it is answered, for counting (the metrics feature implements it).
 * `route` is the route's pattern (`/v2/{endpoint}/run`), never a raw id, so the set of values
 * is bounded whatever clients send.
 */
export interface RequestObserver {
  /** A request answered with `status` (499: the client went away before an answer). */
  answered(route: string, status: number): void;
  /** A request refused with 429: `code` is RATE_LIMITED, TOO_MANY_CONCURRENT, QUEUE_FULL, TOO_MANY_CONNECTIONS, … */
  throttled(route: string, code: string): void;
}

/** What the request listener needs beyond the services and the routes: who counts requests, the body budget. */
export interface ListenerOptions {
  observer?: RequestObserver;
  /** The read deadline and the cap on bytes in flight that every request body is read under (default: none). */
  bodies?: BodyBudget;
}

/** The query of requests that have none; never written to. */
const NO_QUERY = new URLSearchParams();

/** Splits `/a/b/c?q` into decoded segments, the path and the query. */
function parseTarget(url: string): { segments: string[]; path: string; query: URLSearchParams } {
  // No id, name or query value may hold NUL (the stores cannot compare or keep it).
  if (url.includes('%00')) throw new AppError('INVALID_PATH', 'The request path or query contains a NUL byte (%00)');
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
      throw new AppError('INVALID_PATH', 'Malformed percent-encoding in the request path');
    }
  }
  return { segments, path, query: q < 0 || q === url.length - 1 ? NO_QUERY : new URLSearchParams(url.slice(q + 1)) };
}

/** An incoming X-Request-ID is kept only when it is this short and made of these characters (it goes into logs). */
const SAFE_REQUEST_ID = /^[A-Za-z0-9._:-]{1,64}$/;

/**
 * Request ids this process makes: a random prefix per process (48 bits, so gateways do not
 * collide) and a counter — unique without a random draw per request (a third of randomUUID's cost).
 */
const REQUEST_ID_PREFIX = randomBytes(6).toString('hex');
let requestCounter = 0;

/** The caller's X-Request-ID when it is short and safe, else a new one; echoed in the response. */
function requestIdOf(req: IncomingMessage, res: ServerResponse): string {
  const given = req.headers['x-request-id'];
  const id = typeof given === 'string' && SAFE_REQUEST_ID.test(given) ? given : `${REQUEST_ID_PREFIX}-${(++requestCounter).toString(36)}`;
  res.setHeader('x-request-id', id);
  return id;
}

/** The path of a request without its query, which may carry a secret (a signature, a token): what logs name. */
export function pathOf(req: IncomingMessage): string {
  const url = req.url ?? '/';
  const q = url.indexOf('?');
  return q < 0 ? url : url.slice(0, q);
}

/** The request listener, with the switch that starts its shutdown. */
export type GatewayListener = RequestListener & {
  /**
   * From now on: held long-polls answer at once (runsync and status-sync as a wait that ran
   * out, `{id, status}`), job-take and job-stop answer 204 without handing out a job, and every
   * response closes its connection. Requests in flight finish.
   */
  beginShutdown(): void;
  /** Requests being served now. */
  inFlight(): number;
  /** The connections each key holds with a request in progress: nothing is refused until its cap is set (connection-guard.ts). */
  connections: KeyConnections;
};

/**
 * The gateway's request listener: every request goes through the one route table (route-table.ts)
 * and its one pipeline (dispatch.ts). Every error, unknown routes included, is a JSON body
 * `{"error", "code"}` (or the route's own shape). Every response carries the request's
 * `X-Request-ID`, and the request's log lines its `requestId`. A fault is logged with the route
 * and the path, never the query (it may carry a signature or a token).
 *
 * @example createServer(createRequestListener(services, routes)).listen(8080);
 */
export function createRequestListener(services: DispatchDeps & { logger: Logger; clientAddress?: ClientAddress }, routes: RouteTable, options: ListenerOptions = {}): GatewayListener {
  const { observer, bodies } = options;
  const logger = services.logger;
  const connections = createKeyConnections();
  const state: ListenerState = { closing: false, inFlight: 0, polls: new Set(), connections };
  // At debug level only: one line per request, and the request's id on every line written for
  // it (carried across awaits, a cost on every promise); at info the hot path logs nothing.
  const accessLog = logger.isLevelEnabled('debug');
  const listener: RequestListener = (req, res) => {
    const info: RequestInfo = { id: requestIdOf(req, res), route: 'unmatched', sendError: undefined, backOff: false };
    if (bodies) governBody(req, bodies);
    state.inFlight++;
    res.once('close', () => {
      state.inFlight--;
      if (info.heldBy !== undefined) connections.release(info.heldBy);
    });
    if (state.closing) res.setHeader('connection', 'close');
    const started = accessLog ? performance.now() : 0;
    const run = (): Promise<void> => route(services, routes, req, res, info, state);
    const handled = accessLog ? runAsRequest(info.id, run) : run();
    const done = handled.catch((thrown: unknown) => {
      const err = info.backOff ? backOffOf(thrown) : thrown;
      if (observer && err instanceof AppError && err.status === 429) observer.throttled(info.route, err.code);
      (info.sendError ?? sendError)(res, err, logger, { requestId: info.id, method: req.method, route: info.route, path: pathOf(req) });
    });
    if (!observer && !accessLog) return;
    void done.then(() => {
      const status = res.headersSent ? res.statusCode : 499;
      observer?.answered(info.route, status);
      if (accessLog) logger.debug({ requestId: info.id, method: req.method, route: info.route, client: services.clientAddress?.(req) ?? req.socket.remoteAddress, status, ms: Math.round(performance.now() - started) }, 'request');
    });
  };
  return Object.assign(listener, {
    beginShutdown() {
      state.closing = true;
      for (const poll of [...state.polls]) poll.abort();
      state.polls.clear();
    },
    inFlight: () => state.inFlight,
    connections,
  });
}

async function route(deps: DispatchDeps, table: RouteTable, req: IncomingMessage, res: ServerResponse, info: RequestInfo, state: ListenerState): Promise<void> {
  const { segments, query } = parseTarget(req.url ?? '/');
  table.headersFor(segments[0])?.(res);
  const d: Dispatching = { table, deps, req, res, query, info, state };
  return dispatch(d, segments);
}
