import type { IncomingMessage, ServerResponse } from 'node:http';
import { MB, readJsonBody } from '../http/body.js';
import type { HttpMethod, Route, RouteCall } from '../http/route-table.js';
import type { HttpServices } from '../http/server.js';
import { sendJson } from '../http/respond.js';
import { AppError, routeNotFound } from '../model/errors.js';
import { sendCharts } from './charts-route.js';
import { sendJobPage } from './job-page-route.js';
import type { MinuteRecorder } from './minute-recorder.js';
import { markConsoleSession } from '../http/audit-routes.js';
import type { AuditActor } from '../store/audit-store.js';
import { csrfMatches, sessionRef, SESSION_DEFAULTS, type ConsoleSession, type SessionTable } from './sessions.js';
import { SIGN_IN_LIMITS, type SignedIn, type SignInGuard } from './sign-in.js';
import { isObject } from '../model/json.js';

/** The session cookie's name; its path is /console, so no other route ever receives it. */
export const SESSION_COOKIE = 'gantry_console';
/** The known-browser cookie (sign-in.ts): sent only to the sign-in route, so a browser that signed in before is spared the waits others' guesses cause. */
export const KNOWN_BROWSER_COOKIE = 'gantry_console_browser';

/** What the console API uses: the services of the admin and client routes, and the sessions. */
export interface ConsoleApiDeps {
  http: HttpServices;
  sessions: SessionTable;
  /** Checks sign-ins (admin key or console password) and counts failures per address. */
  signIns: SignInGuard;
  /** Whether the cookie gets `Secure` (TLS in front of the gateway: GANTRY_PUBLIC_URL is https). */
  secureCookie: boolean;
  /** The per-minute aggregates behind the charts. */
  minutes: Pick<MinuteRecorder, 'read'>;
  now(): number;
}

/** The value of cookie `name` in the request, if any. */
export function cookieOf(req: IncomingMessage, name: string): string | undefined {
  const header = req.headers.cookie;
  if (!header) return undefined;
  for (const part of header.split(';')) {
    const eq = part.indexOf('=');
    if (eq > 0 && part.slice(0, eq).trim() === name) return part.slice(eq + 1).trim();
  }
  return undefined;
}

function sessionCookie(deps: ConsoleApiDeps, value: string, maxAgeS: number): string {
  return `${SESSION_COOKIE}=${value}; Path=/console; HttpOnly; SameSite=Strict; Max-Age=${maxAgeS}${deps.secureCookie ? '; Secure' : ''}`;
}

function knownBrowserCookie(deps: ConsoleApiDeps, token: string): string {
  return `${KNOWN_BROWSER_COOKIE}=${token}; Path=/console/api/session; HttpOnly; SameSite=Strict; Max-Age=${Math.floor(SIGN_IN_LIMITS.knownBrowserMs / 1000)}${deps.secureCookie ? '; Secure' : ''}`;
}

const unauthorized = (): AppError => new AppError('UNAUTHORIZED', 'Not signed in to the console (POST /console/api/session with an admin key or the console password)');

/** A state-changing call must carry the session's CSRF token in `X-CSRF-Token`. */
function checkCsrf(req: IncomingMessage, session: ConsoleSession): void {
  const method = req.method ?? 'GET';
  if (method === 'GET' || method === 'HEAD') return;
  if (!csrfMatches(session, req.headers['x-csrf-token'])) throw new AppError('CSRF_TOKEN_INVALID', 'Missing or wrong X-CSRF-Token header');
}

/** Every method a route may answer: the console's API passes the admin and client routes' own. */
const ANY_METHOD: HttpMethod[] = ['GET', 'HEAD', 'POST', 'PUT', 'PATCH', 'DELETE'];

/**
 * `/console/api/...` (docs/console.md) as entries of the route table:
 * - `session`: POST `{key}` or `{password}` signs in with an admin key or the console password
 *   (sets the HttpOnly session cookie, answers the CSRF token), GET answers the CSRF token of
 *   the current session (401 with `passwordSignIn` without one), DELETE signs out;
 * - `admin/...`: the admin API (/admin/v1/...) with the session's key;
 * - `v2/{endpoint}/{operation}/{job?}`: the client API with the session's key (the test editor;
 *   `stream/{job}` with `Accept: text/event-stream` is how it follows a job live);
 * - `jobs/{endpoint}/{job}`: the job page's buffered chunks (not drained) and webhook attempts;
 * - `charts/{endpoint}`: the per-minute aggregates.
 * Every call but sign-in needs the session; every call but GET also its CSRF token.
 *
 * @example routes.add(...consoleApiRoutes(api));
 */
export function consoleApiRoutes(deps: ConsoleApiDeps): Route[] {
  const api = (method: HttpMethod | HttpMethod[], path: string, handle: (call: RouteCall) => Promise<void>): Route => ({
    family: 'console',
    method,
    path: `/console/api${path}`,
    auth: 'own',
    handle: (call) => withSession(deps, call, handle),
  });
  return [
    { family: 'console', method: ['GET', 'POST', 'DELETE'], path: '/console/api/session', auth: 'own', handle: (call) => sessionRoute(deps, call) },
    api(ANY_METHOD, '/admin/{*rest}', (call) => call.dispatchAs(['admin', 'v1', ...call.params.rest!], 'admin')),
    api(ANY_METHOD, '/v2/{*rest}', (call) => call.dispatchAs(['v2', ...call.params.rest!], 'client')),
    api('GET', '/jobs/{endpoint}/{job}', ({ req, res, params, query }) => sendJobPage(deps.http, req, res, params.endpoint!, params.job!, query)),
    api('GET', '/charts/{endpoint}', ({ res, params, query }) => sendCharts({ minutes: deps.minutes, endpoints: deps.http.endpoints, now: deps.now }, res, params.endpoint!, query)),
    api(ANY_METHOD, '/{*rest}', async () => {
      throw routeNotFound('Unknown console API route');
    }),
  ];
}

/**
 * Runs a console API call with its session: 401 without one, 403 without the CSRF token on a
 * call that changes something; the routes it runs authenticate by header, so the session's key
 * stands in for the caller's.
 */
async function withSession(deps: ConsoleApiDeps, call: RouteCall, handle: (call: RouteCall) => Promise<void>): Promise<void> {
  const { req, res } = call;
  res.setHeader('cache-control', 'no-store');
  const id = cookieOf(req, SESSION_COOKIE);
  const session = deps.sessions.get(id, deps.now());
  if (!session || id === undefined) throw unauthorized();
  checkCsrf(req, session);
  req.headers.authorization = `Bearer ${session.key}`;
  // Changes made through the console are the session's in the audit log.
  markConsoleSession(req, sessionRef(id));
  return handle(call);
}

async function sessionRoute(deps: ConsoleApiDeps, { req, res }: RouteCall): Promise<void> {
  res.setHeader('cache-control', 'no-store');
  const method = req.method ?? 'GET';
  const id = cookieOf(req, SESSION_COOKIE);
  if (method === 'POST') return signIn(deps, req, res);
  const session = deps.sessions.get(id, deps.now());
  // The sign-in page learns here whether to offer the console password.
  if (!session) throw new AppError('UNAUTHORIZED', unauthorized().message, { passwordSignIn: deps.signIns.passwordSignIn });
  if (method === 'GET') return sendJson(res, 200, { signedIn: true, csrfToken: session.csrf });
  if (method === 'DELETE') {
    checkCsrf(req, session);
    deps.sessions.close(id);
    const outcome = await deps.http.keys.authorize(session.key, 'admin');
    const actor: AuditActor = { kind: 'console', keyId: outcome.ok ? outcome.principal.keyId : null, keyName: outcome.ok ? outcome.principal.keyName : null, session: sessionRef(id!) };
    await deps.http.audit.record({ action: 'console.sign-out', actor, address: deps.http.clientAddress(req) });
    return sendJson(res, 200, { signedIn: false }, { 'set-cookie': sessionCookie(deps, '', 0) });
  }
  throw new AppError('METHOD_NOT_ALLOWED', `${method} is not allowed on /console/api/session`, undefined, { allow: 'GET, POST, DELETE' });
}

/**
 * Sign-in: the body must be JSON (`Content-Type: application/json`, which a cross-site form
 * cannot send without a CORS preflight this gateway never grants) holding an admin key or the
 * console password (sign-in.ts checks it and limits wrong guesses). Every sign-in, right or
 * wrong, is written to the audit log (refusals at a bounded rate).
 */
async function signIn(deps: ConsoleApiDeps, req: IncomingMessage, res: ServerResponse): Promise<void> {
  if (!(req.headers['content-type'] ?? '').startsWith('application/json')) {
    throw new AppError('UNSUPPORTED_MEDIA_TYPE', 'Sign in with a JSON body: Content-Type: application/json');
  }
  const body = await readJsonBody(req, MB / 100);
  const address = deps.http.clientAddress(req);
  const method = isObject(body) && body.password !== undefined ? 'password' : 'key';
  let signed: SignedIn;
  try {
    signed = await deps.signIns.verify({ address, body, knownBrowser: cookieOf(req, KNOWN_BROWSER_COOKIE) }, deps.now());
  } catch (err) {
    if (err instanceof AppError && (err.status === 401 || err.status === 429)) {
      const detail = { method, ...(err.status === 429 ? { retryAfterS: err.extra?.retryAfterS } : {}) };
      await deps.http.audit.record({ action: 'console.sign-in', outcome: err.status === 429 ? 'limited' : 'failed', actor: NOBODY, address, detail });
    }
    throw err;
  }
  // A new sign-in from this browser ends its previous session (no session outlives its cookie).
  deps.sessions.close(cookieOf(req, SESSION_COOKIE));
  const { id, session } = deps.sessions.open(signed.key, deps.now());
  const actor: AuditActor = { kind: 'console', keyId: signed.principal.keyId, keyName: signed.principal.keyName, session: sessionRef(id) };
  await deps.http.audit.record({ action: 'console.sign-in', actor, address, detail: { method, knownBrowser: signed.knownBrowser } });
  const cookies = [sessionCookie(deps, id, Math.floor(SESSION_DEFAULTS.maxAgeMs / 1000))];
  if (signed.knownBrowserToken !== null) cookies.push(knownBrowserCookie(deps, signed.knownBrowserToken));
  res.setHeader('set-cookie', cookies);
  sendJson(res, 200, { signedIn: true, csrfToken: session.csrf });
}

/** The actor of a refused sign-in: nobody known. */
const NOBODY: AuditActor = { kind: 'anonymous', keyId: null, keyName: null, session: null };
