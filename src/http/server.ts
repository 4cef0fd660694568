import { randomBytes } from 'node:crypto';
import type { IncomingMessage, RequestListener, ServerResponse } from 'node:http';
import type { Logger } from 'pino';
import { AppError } from '../model/errors.js';
import { runAsRequest } from '../util/request-context.js';
import { handleAdminRoute, type AdminRouteDeps } from './admin-routes.js';
import { governBody, type BodyBudget } from './body.js';
import { handleClientRoute, isClientOperation, type ClientRouteDeps } from './client-routes.js';
import { sendError, sendJson, sendNoContent } from './respond.js';
import { handleWorkerRoute, isWorkerOperation, type WorkerRouteDeps } from './worker-routes.js';

/** Everything the HTTP layer calls: the services of one gateway, each as narrow as its routes need. */
export interface HttpServices extends Omit<ClientRouteDeps, 'keys' | 'endpoints'>, Omit<WorkerRouteDeps, 'keys' | 'endpoints'>, AdminRouteDeps {
  logger: Logger;
}

/** A route a feature adds under its own first path segment (e.g. `/files/...`). */
export type RouteHandler = (req: IncomingMessage, res: ServerResponse, target: { segments: string[]; query: URLSearchParams }) => Promise<void>;

/** An operation a feature adds under an endpoint: `/v2/{endpointId}/{operation}/...` (e.g. `openai`). */
export type EndpointOperationHandler = (
  req: IncomingMessage,
  res: ServerResponse,
  target: { endpointId: string; rest: string[]; query: URLSearchParams; signal: AbortSignal },
) => Promise<void>;

/**
 * Routes added by features: under their own first path segment, or as an operation under
 * `/v2/{endpointId}/`. The core routes (/v2 client and worker operations, /admin/v1, /healthz, /readyz)
 * cannot be replaced.
 */
export interface RouteTable {
  /** Serves `/<segment>/...` with `handler`; throws when the segment is taken. */
  add(segment: string, handler: RouteHandler): void;
  get(segment: string): RouteHandler | undefined;
  /** Serves `/v2/{endpointId}/<operation>/...` with `handler`; throws when the operation is taken. */
  addEndpointOperation(operation: string, handler: EndpointOperationHandler): void;
  getEndpointOperation(operation: string): EndpointOperationHandler | undefined;
}

const CORE_SEGMENTS = new Set(['v2', 'admin', 'healthz', 'readyz']);

/**
 * Told of every request once it is answered, for counting (the metrics feature implements it).
 * `route` is the route's pattern (`/v2/{endpoint}/run`), never a raw id, so the set of values
 * is bounded whatever clients send.
 */
export interface RequestObserver {
  /** A request answered with `status` (499: the client went away before an answer). */
  answered(route: string, status: number): void;
  /** A request refused with 429: `code` is RATE_LIMITED, TOO_MANY_CONCURRENT or QUEUE_FULL. */
  throttled(route: string, code: string): void;
}

/** What /readyz reports: whether this gateway should get traffic, and the check that says no. */
export interface Readiness {
  check(): Promise<{ ready: boolean; checks: Record<string, string> }>;
}

/** What the request listener needs beyond the services: readiness and who counts requests. */
export interface ListenerOptions {
  /** /readyz answers 200 only when this says ready (default: always ready). */
  readiness?: Readiness;
  observer?: RequestObserver;
  /** The read deadline and the cap on bytes in flight that every request body is read under (default: none). */
  bodies?: BodyBudget;
}

/** @example const routes = createRouteTable(); routes.add('files', handleFiles); */
export function createRouteTable(): RouteTable {
  const handlers = new Map<string, RouteHandler>();
  const operations = new Map<string, EndpointOperationHandler>();
  return {
    add(segment, handler) {
      if (CORE_SEGMENTS.has(segment) || handlers.has(segment)) throw new Error(`the route /${segment} is taken`);
      handlers.set(segment, handler);
    },
    get: (segment) => handlers.get(segment),
    addEndpointOperation(operation, handler) {
      if (isClientOperation(operation) || isWorkerOperation(operation) || operations.has(operation)) {
        throw new Error(`the operation /v2/{endpoint}/${operation} is taken`);
      }
      operations.set(operation, handler);
    },
    getEndpointOperation: (operation) => operations.get(operation),
  };
}

/** The query of requests that have none; never written to. */
const NO_QUERY = new URLSearchParams();

/** Splits `/a/b/c?q` into decoded segments and the query. */
function parseTarget(url: string): { segments: string[]; query: URLSearchParams } {
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
  return { segments, query: q < 0 || q === url.length - 1 ? NO_QUERY : new URLSearchParams(url.slice(q + 1)) };
}

/** An incoming X-Request-ID is kept only when it is this short and made of these characters (it goes into logs). */
const SAFE_REQUEST_ID = /^[A-Za-z0-9._:-]{1,64}$/;

/** Per request: its id (logs, X-Request-ID) and the pattern of the route it took (metrics). */
interface RequestInfo {
  id: string;
  route: string;
}

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

/**
 * Route patterns by operation, one table per route family, each pattern made once: a request
 * costs one map lookup by a string it already has (operations are a fixed set once matched).
 */
const PATTERNS = { client: new Map<string, string>(), clientJob: new Map<string, string>(), worker: new Map<string, string>(), feature: new Map<string, string>() };
const clientPattern = (op: string): string => `/v2/{endpoint}/${op}`;
const clientJobPattern = (op: string): string => `/v2/{endpoint}/${op}/{job}`;
const workerPattern = (op: string): string => `/v2/{endpoint}/${op}/{worker}`;
const featurePattern = (segment: string): string => `/${segment}`;
function routePattern(table: Map<string, string>, name: string, make: (name: string) => string): string {
  let pattern = table.get(name);
  if (pattern === undefined) table.set(name, (pattern = make(name)));
  return pattern;
}

/** Operations that may wait: only they need to notice a client that goes away. */
const LONG_POLLS = new Set(['runsync', 'status-sync', 'stream', 'job-take', 'job-take-batch', 'job-stop']);
/** Worker long-polls that a shutting-down gateway answers 204 at once: it hands out no more jobs. */
const NO_HANDOUT = new Set(['job-take', 'job-take-batch', 'job-stop']);
/** The signal of requests that answer at once: never aborted, shared. */
const NEVER = new AbortController().signal;

/** Shutdown state of one listener: whether it is closing, its requests in flight, its open long-polls. */
interface ListenerState {
  closing: boolean;
  inFlight: number;
  polls: Set<AbortController>;
}

/**
 * An AbortSignal that fires when the client goes away before the response is complete, or
 * when the gateway shuts down (the wait then answers as one that ran out).
 */
function clientGone(req: IncomingMessage, res: ServerResponse, state: ListenerState): AbortSignal {
  const controller = new AbortController();
  if (state.closing) {
    controller.abort();
    return controller.signal;
  }
  state.polls.add(controller);
  res.once('close', () => {
    state.polls.delete(controller);
    if (!res.writableFinished) controller.abort();
  });
  req.once('aborted', () => controller.abort());
  return controller.signal;
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
};

/**
 * The gateway's request listener: routing only. /v2/{endpoint}/{operation}/... goes to the
 * client or worker routes, /admin/v1/... to the admin API, /healthz answers liveness, /readyz
 * readiness, and a feature's segment to its handler. Every error, unknown routes included, is a
 * JSON body `{"error", "code"}`. Every response carries the request's `X-Request-ID`, and the
 * request's log lines its `requestId`.
 *
 * @example createServer(createRequestListener(services, routes)).listen(8080);
 */
export function createRequestListener(services: HttpServices, routes: RouteTable, options: ListenerOptions = {}): GatewayListener {
  const { observer, readiness, bodies } = options;
  const logger = services.logger;
  const state: ListenerState = { closing: false, inFlight: 0, polls: new Set() };
  // At debug level only: one line per request, and the request's id on every line written for
  // it (carried across awaits, a cost on every promise); at info the hot path logs nothing.
  const accessLog = logger.isLevelEnabled('debug');
  const listener: RequestListener = (req, res) => {
    const info: RequestInfo = { id: requestIdOf(req, res), route: 'unmatched' };
    if (bodies) governBody(req, bodies);
    state.inFlight++;
    res.once('close', () => state.inFlight--);
    if (state.closing) res.setHeader('connection', 'close');
    const started = accessLog ? performance.now() : 0;
    const at = { info, readiness, state };
    const handled = accessLog ? runAsRequest(info.id, () => route(services, routes, req, res, at)) : route(services, routes, req, res, at);
    const done = handled.catch((err: unknown) => {
      if (observer && err instanceof AppError && err.status === 429) observer.throttled(info.route, err.code);
      sendError(res, err, logger, { requestId: info.id, method: req.method, url: req.url });
    });
    if (!observer && !accessLog) return;
    void done.then(() => {
      const status = res.headersSent ? res.statusCode : 499;
      observer?.answered(info.route, status);
      if (accessLog) logger.debug({ requestId: info.id, method: req.method, route: info.route, status, ms: Math.round(performance.now() - started) }, 'request');
    });
  };
  return Object.assign(listener, {
    beginShutdown() {
      state.closing = true;
      for (const poll of [...state.polls]) poll.abort();
      state.polls.clear();
    },
    inFlight: () => state.inFlight,
  });
}

async function route(services: HttpServices, routes: RouteTable, req: IncomingMessage, res: ServerResponse, at: { info: RequestInfo; readiness: Readiness | undefined; state: ListenerState }): Promise<void> {
  const { info, readiness, state } = at;
  const { segments, query } = parseTarget(req.url ?? '/');
  const [first, endpointId, operation, a, b, ...rest] = segments;
  if (first === 'v2' && endpointId !== undefined && operation !== undefined) {
    const extra = routes.getEndpointOperation(operation);
    if (extra) {
      info.route = routePattern(PATTERNS.client, operation, clientPattern);
      return extra(req, res, { endpointId, rest: segments.slice(3), query, signal: clientGone(req, res, state) });
    }
  }
  if (first === 'v2' && endpointId !== undefined && operation !== undefined && rest.length === 0) {
    const signal = LONG_POLLS.has(operation) ? clientGone(req, res, state) : NEVER;
    if (isClientOperation(operation) && b === undefined) {
      info.route = a === undefined ? routePattern(PATTERNS.client, operation, clientPattern) : routePattern(PATTERNS.clientJob, operation, clientJobPattern);
      return handleClientRoute(services, { req, res, endpointId, operation, jobId: a, query, signal });
    }
    if (isWorkerOperation(operation)) {
      info.route = routePattern(PATTERNS.worker, operation, workerPattern);
      if (state.closing && NO_HANDOUT.has(operation)) return sendNoContent(res);
      return handleWorkerRoute(services, { req, res, endpointId, operation, workerId: a, jobId: b, query, signal });
    }
  }
  if (first === 'admin' && endpointId === 'v1') {
    info.route = '/admin/v1';
    return handleAdminRoute(services, req, res, segments.slice(2));
  }
  if (first === 'healthz' && segments.length === 1) {
    info.route = '/healthz';
    return sendJson(res, 200, { ok: true });
  }
  if (first === 'readyz' && segments.length === 1) {
    info.route = '/readyz';
    return ready(res, readiness);
  }
  const feature = routes.get(first ?? '');
  if (feature) {
    info.route = routePattern(PATTERNS.feature, first ?? '', featurePattern);
    return feature(req, res, { segments: segments.slice(1), query });
  }
  throw new AppError('NOT_FOUND', `No route for ${req.method ?? 'GET'} ${(req.url ?? '/').split('?')[0]}`);
}

/** /readyz: 200 `{"ready":true,...}` when this gateway can serve, else 503 naming the failed check. */
async function ready(res: ServerResponse, readiness: Readiness | undefined): Promise<void> {
  const result = readiness ? await readiness.check() : { ready: true, checks: {} };
  sendJson(res, result.ready ? 200 : 503, result, { 'cache-control': 'no-store' });
}
