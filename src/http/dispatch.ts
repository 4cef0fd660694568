import type { IncomingMessage, ServerResponse } from 'node:http';
import type { EndpointService } from '../jobs/endpoint-service.js';
import { AppError, endpointNotFound, methodNotAllowed, routeNotFound } from '../model/errors.js';
import type { KeyService } from '../security/keys.js';
import { authorize } from './auth.js';
import { readJsonBody } from './body.js';
import type { KeyConnections } from './connection-guard.js';
import type { RateLimiter } from './rate-limit.js';
import { sendNoContent } from './respond.js';
import { checkIds } from './route-ids.js';
import type { EndpointCall, EndpointRoute, RouteCall, RouteErrorSender, RouteFamily, RouteTable } from './route-table.js';

/** What the dispatcher checks requests with: keys, endpoints (cached), the rate limiter. */
export interface DispatchDeps {
  keys: Pick<KeyService, 'authorize'>;
  endpoints: Pick<EndpointService, 'get'>;
  rateLimiter: RateLimiter;
}

/** Per request: its id (logs, X-Request-ID), the pattern of the route it took (metrics), and how that route answers errors. */
export interface RequestInfo {
  id: string;
  route: string;
  sendError: RouteErrorSender | undefined;
  /** The route's refusals a worker should wait out are 429 (RouteBase.backOff). */
  backOff: boolean;
  /** The key whose share of the connections the request holds until answered (connection-guard.ts); undefined before authentication. */
  heldBy?: string;
}

/** Shutdown state of one listener: whether it is closing, its requests in flight, its open long-polls. */
export interface ListenerState {
  closing: boolean;
  inFlight: number;
  polls: Set<AbortController>;
  /** The connections each key holds with a request in progress (connection-guard.ts); none: not counted. */
  connections?: KeyConnections;
}

/** One request being dispatched. */
export interface Dispatching {
  table: RouteTable;
  deps: DispatchDeps;
  req: IncomingMessage;
  res: ServerResponse;
  query: URLSearchParams;
  info: RequestInfo;
  state: ListenerState;
}

/** The signal of requests that answer at once: never aborted, shared. */
const NEVER = new AbortController().signal;
const NO_SLOT = (): void => {};

/**
 * Runs a request through the one pipeline every route shares, in this order: find the path
 * (404) and the method (405 with Allow); check the path's ids (400, route-ids.ts); a closing
 * gateway answers work hand-outs 204; the key for the route's scope (401); the endpoint (404);
 * the body within the route's limit (413/400); the endpoint's rate bucket (429); the handler.
 * `only` limits the match to one family (the console's re-dispatch).
 */
export async function dispatch(d: Dispatching, segments: readonly string[], only?: RouteFamily): Promise<void> {
  const { req, res, info } = d;
  const method = req.method ?? 'GET';
  const match = d.table.match(segments);
  const first = match?.methods.values().next().value;
  if (!match || !first || (only !== undefined && first.family !== only)) throw routeNotFound(`No route for ${method} /${segments.join('/')}`);
  const route = match.methods.get(method);
  if (!route) throw methodNotAllowed(method, [...match.methods.keys()], `on ${first.path}`);
  if (only === undefined) {
    info.route = route.path;
    info.sendError = route.sendError;
    info.backOff = route.backOff === true;
  }
  checkIds(match.params, route.backOff === true);
  if (d.state.closing && route.handsOutWork) return sendNoContent(res);
  const call: RouteCall = {
    req,
    res,
    params: match.params,
    query: d.query,
    signal: route.waits ? clientGone(req, res, d.state) : NEVER,
    principal: null,
    body: undefined,
    dispatchAs: (path, family) => dispatch(d, path, family),
  };
  if (route.needsEndpoint) return runEndpointRoute(d, route, call);
  if (route.auth !== 'public' && route.auth !== 'own') {
    call.principal = await authorize(d.deps.keys, req, route.auth);
    holdConnection(d, call.principal.keyId);
  }
  if (route.bodyLimit !== undefined) call.body = await readJsonBody(req, route.bodyLimit, route.rawFields, call.principal?.keyId);
  return route.handle(call);
}

/** A route under `/v2/{endpoint}`: the key on that endpoint, the endpoint, the body, then its rate bucket while it runs. */
async function runEndpointRoute(d: Dispatching, route: EndpointRoute, base: RouteCall): Promise<void> {
  const { deps } = d;
  const endpointId = base.params.endpoint!;
  const principal = await authorize(deps.keys, base.req, route.auth, endpointId);
  holdConnection(d, principal.keyId);
  const endpoint = await deps.endpoints.get(endpointId);
  if (!endpoint) throw endpointNotFound(endpointId);
  const call: EndpointCall = Object.assign(base, { endpointId, endpoint, principal });
  // The body first: a slow upload must not hold one of the endpoint's concurrency slots.
  if (route.bodyLimit !== undefined) call.body = await readBody(route, call);
  const leave = route.bucket === undefined ? NO_SLOT : deps.rateLimiter.enter(endpointId, route.bucket, { concurrent: route.windowOnly !== true, overrides: endpoint.rateLimitsJson, keyId: principal.keyId });
  try {
    await route.handle(call);
  } finally {
    leave();
  }
}

/**
 * Counts the request's connection under its key until it is answered (the listener releases
 * it), or throws 429 past the key's half of the connections (connection-guard.ts). Once per
 * request: the console's re-dispatch authenticates again.
 */
function holdConnection(d: Dispatching, keyId: string): void {
  const connections = d.state.connections;
  if (connections === undefined || d.info.heldBy !== undefined) return;
  connections.hold(keyId);
  d.info.heldBy = keyId;
}

/** The body of an endpoint route; a refusal is told to the route first when it asks (job-done). */
async function readBody(route: EndpointRoute, call: EndpointCall): Promise<unknown> {
  try {
    return await readJsonBody(call.req, route.bodyLimit!, route.rawFields, call.principal.keyId);
  } catch (err) {
    if (route.bodyRefused) await route.bodyRefused(call, err);
    throw err;
  }
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

/**
 * The answer to a worker's poll that met a store fault: 429 WORKER_BACK_OFF with the fault's
 * Retry-After, which runpod-python waits out (after a 503 it would ask again at once).
 *
 * @example backOffOf(storeUnavailableError).status === 429
 */
export function backOffOf(err: unknown): unknown {
  if (!(err instanceof AppError) || err.code !== 'STORE_UNAVAILABLE') return err;
  return new AppError('WORKER_BACK_OFF', err.message, err.extra, err.headers);
}
