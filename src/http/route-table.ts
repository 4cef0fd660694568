import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Logger } from 'pino';
import type { EndpointRecord, Scope } from '../model/records.js';
import type { Principal } from '../security/keys.js';

/** The methods a route may answer. */
export type HttpMethod = 'GET' | 'HEAD' | 'POST' | 'PUT' | 'PATCH' | 'DELETE';

/**
 * Who may call a route: anyone (`public`); a key with this scope (on the path's `{endpoint}`
 * when it has one), checked before the route runs; or `own`: the route checks by itself
 * (the console's session, /metrics's token).
 */
export type RouteAuth = 'public' | 'own' | Scope;

/**
 * The parameters a path pattern may name, each checked against ID_RULES (route-ids.ts) before
 * any key, cache or store is consulted: `{endpoint}`, `{job}`, `{worker}`, `{key}`, `{credential}`, and
 * `{*rest}`, the remaining segments (one or more), last in a pattern.
 */
export interface RouteParams {
  endpoint?: string;
  job?: string;
  worker?: string;
  key?: string;
  /** A registry credential's id (`rc_…`). */
  credential?: string;
  rest?: string[];
}

/** A name a pattern may give a parameter. */
export type ParamName = keyof RouteParams;

/** A request as a route's handler receives it, after the checks its declaration asks for. */
export interface RouteCall {
  req: IncomingMessage;
  res: ServerResponse;
  params: RouteParams;
  query: URLSearchParams;
  /** Fires when the client goes away before the answer or the gateway shuts down; for routes that `wait`, else never. */
  signal: AbortSignal;
  /** The caller's key, for routes whose auth is a scope; null otherwise. */
  principal: Principal | null;
  /** The parsed JSON body, for routes with a bodyLimit; undefined otherwise. */
  body: unknown;
  /**
   * Runs this request as `segments` of the table (the console's API runs admin and client routes
   * with the session's key): only routes of `family` match; the rest is a 404.
   */
  dispatchAs(segments: string[], family: RouteFamily): Promise<void>;
}

/** A call of a route under `/v2/{endpoint}/…` whose endpoint exists: the endpoint and the key. */
export interface EndpointCall extends RouteCall {
  endpointId: string;
  endpoint: EndpointRecord;
  principal: Principal;
}

/** Answers an error of a route in that route's own shape (the OpenAI routes answer OpenAI's). */
export type RouteErrorSender = (res: ServerResponse, err: unknown, logger: Logger, context: Record<string, unknown>) => void;

/** Which part of the API a route belongs to: for metrics, for the console's re-dispatch, for docs. */
export type RouteFamily = 'client' | 'worker' | 'admin' | 'probe' | 'openai' | 'files' | 'console' | 'metrics' | 'test';

/** What every route declares. */
interface RouteBase {
  family: RouteFamily;
  method: HttpMethod | readonly HttpMethod[];
  /** `/v2/{endpoint}/status/{job}`: literal segments and parameters (RouteParams); also the route's label in metrics. */
  path: string;
  auth: RouteAuth;
  /** The JSON body is read (at most this many bytes) before the route runs, and before a rate-limit slot is taken. */
  bodyLimit?: number;
  /**
   * Top-level fields of the body the route stores as JSON text (a job's `input`, a result's
   * `output`): in a body large enough to be parsed off the event loop they arrive as RawJson
   * (model/json.ts), serialised on that thread; read them with `jsonText`.
   */
  rawFields?: readonly string[];
  /** The route may wait (a long-poll, a stream): it gets a signal for the client going away and the gateway closing. */
  waits?: boolean;
  /** A worker route that hands out jobs or stop lists: a closing gateway answers it 204 at once. */
  handsOutWork?: boolean;
  /**
   * A worker's poll (job-take, job-stop): runpod-python waits 5 s after a 429 but asks again at
   * once after a 400 or a 5xx, so what it should wait out is answered 429 with Retry-After: an
   * unusable worker id (INVALID_WORKER_ID), a store fault (WORKER_BACK_OFF).
   */
  backOff?: boolean;
  /** The route answers errors in its own shape. */
  sendError?: RouteErrorSender;
}

/** A route under `/v2/{endpoint}/…` that needs the endpoint: a key with `auth` on it, then the endpoint's settings. */
export interface EndpointRoute extends RouteBase {
  auth: Scope;
  needsEndpoint: true;
  /** The endpoint's rate-limit bucket (rate-limit.ts), entered after the body is read and left when the route ends. */
  bucket?: string;
  /** Counted in its bucket's 10 s window only: a long-poll, counted under `long-poll` while it holds. */
  windowOnly?: boolean;
  /** A body refused for good (too large, not JSON): told before the refusal is answered (job-done fails the job). */
  bodyRefused?(call: EndpointCall, err: unknown): Promise<void>;
  handle(call: EndpointCall): Promise<void>;
}

/** Any other route. */
export interface PlainRoute extends RouteBase {
  needsEndpoint?: false;
  handle(call: RouteCall): Promise<void>;
}

/** One entry of the route table. */
export type Route = EndpointRoute | PlainRoute;

/** The routes of one path, by method. */
export type RoutesByMethod = ReadonlyMap<string, Route>;

/** A path found in the table: its routes by method and the parameters read from it. */
export interface RouteMatch {
  methods: RoutesByMethod;
  params: RouteParams;
}

/**
 * The gateway's one route table: every route family (client, worker, admin, probes) and every
 * feature's routes (OpenAI, /files, the console, /metrics) are entries of it, dispatched in one
 * place (dispatch.ts). Literal segments are looked up in Maps, never in plain objects, so no
 * request text can name a prototype member.
 */
export interface RouteTable {
  /** Adds routes; throws when a method of a path is taken or a pattern is malformed. */
  add(...routes: Route[]): void;
  /** Sets headers on every response under `/<segment>`, errors and unknown paths included (the console's security headers). */
  addHeaders(segment: string, set: (res: ServerResponse) => void): void;
  /** The path's routes and parameters, or undefined when no route has this path. */
  match(segments: readonly string[]): RouteMatch | undefined;
  /** Headers for paths under `segment`, if a feature set them. */
  headersFor(segment: string | undefined): ((res: ServerResponse) => void) | undefined;
  /** Every route, in the order added. */
  list(): readonly Route[];
}

interface Node {
  literals: Map<string, Node>;
  param: { name: Exclude<ParamName, 'rest'>; node: Node } | undefined;
  rest: Map<string, Route> | undefined;
  methods: Map<string, Route>;
}

const PARAM = /^\{(endpoint|job|worker|key|credential)\}$/;
const newNode = (): Node => ({ literals: new Map(), param: undefined, rest: undefined, methods: new Map() });

/** @example const routes = createRouteTable(); routes.add({ family: 'probe', method: 'GET', path: '/healthz', auth: 'public', handle: async ({ res }) => sendJson(res, 200, { ok: true }) }); */
export function createRouteTable(): RouteTable {
  const root = newNode();
  const all: Route[] = [];
  const headers = new Map<string, (res: ServerResponse) => void>();
  return {
    add(...routes) {
      for (const route of routes) {
        insert(root, route);
        all.push(route);
      }
    },
    addHeaders(segment, set) {
      if (headers.has(segment)) throw new Error(`headers for /${segment} are set already`);
      headers.set(segment, set);
    },
    match: (segments) => {
      const params: RouteParams = {};
      const methods = find(root, segments, 0, params);
      return methods ? { methods, params } : undefined;
    },
    headersFor: (segment) => (segment === undefined ? undefined : headers.get(segment)),
    list: () => all,
  };
}

/** Puts a route at its pattern's node; throws on a malformed pattern or a taken method. */
function insert(root: Node, route: Route): void {
  const parts = route.path.split('/').filter((p) => p !== '');
  let node = root;
  let methods: Map<string, Route> | undefined;
  parts.forEach((part, i) => {
    if (part === '{*rest}') {
      if (i !== parts.length - 1) throw new Error(`${route.path}: {*rest} must be last`);
      methods = node.rest ??= new Map();
      return;
    }
    const param = PARAM.exec(part);
    if (param) {
      const name = param[1] as Exclude<ParamName, 'rest'>;
      if (node.param && node.param.name !== name) throw new Error(`${route.path}: {${name}} where another route has {${node.param.name}}`);
      node.param ??= { name, node: newNode() };
      node = node.param.node;
    } else {
      if (part.includes('{') || part.includes('}')) throw new Error(`${route.path}: unknown parameter ${part}`);
      let next = node.literals.get(part);
      if (!next) node.literals.set(part, (next = newNode()));
      node = next;
    }
  });
  methods ??= node.methods;
  if (route.needsEndpoint && !parts.includes('{endpoint}')) throw new Error(`${route.path}: needsEndpoint without {endpoint}`);
  for (const method of typeof route.method === 'string' ? [route.method] : route.method) {
    if (methods.has(method)) throw new Error(`the route ${method} ${route.path} is taken`);
    methods.set(method, route);
  }
}

/**
 * The routes of the first path in the table that `segments` fit: literal segments before a
 * parameter, a parameter before `{*rest}`. A node without routes of its own is no match, so the
 * search goes on (`/v2/e/openai/v1` falls to `/v2/{endpoint}/openai/{*rest}`).
 */
function find(node: Node, segments: readonly string[], i: number, params: RouteParams): Map<string, Route> | undefined {
  if (i === segments.length) return node.methods.size > 0 ? node.methods : undefined;
  const segment = segments[i]!;
  const literal = node.literals.get(segment);
  if (literal) {
    const found = find(literal, segments, i + 1, params);
    if (found) return found;
  }
  if (node.param) {
    const found = find(node.param.node, segments, i + 1, params);
    if (found) {
      params[node.param.name] = segment;
      return found;
    }
  }
  if (node.rest) {
    params.rest = segments.slice(i);
    return node.rest;
  }
  return undefined;
}
