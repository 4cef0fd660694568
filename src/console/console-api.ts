import type { IncomingMessage, ServerResponse } from 'node:http';
import { handleAdminRoute } from '../http/admin-routes.js';
import { MB, readJsonBody } from '../http/body.js';
import { handleClientRoute, isClientOperation } from '../http/client-routes.js';
import type { HttpServices } from '../http/server.js';
import { sendJson } from '../http/respond.js';
import { AppError } from '../model/errors.js';
import { sendCharts } from './charts-route.js';
import { sendJobPage } from './job-page-route.js';
import type { MinuteRecorder } from './minute-recorder.js';
import { csrfMatches, SESSION_DEFAULTS, type ConsoleSession, type SessionTable } from './sessions.js';
import type { SignInGuard } from './sign-in.js';

/** The session cookie's name; its path is /console, so no other route ever receives it. */
export const SESSION_COOKIE = 'gantry_console';

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

const unauthorized = (): AppError => new AppError('UNAUTHORIZED', 'Not signed in to the console (POST /console/api/session with an admin key or the console password)');

/** A state-changing call must carry the session's CSRF token in `X-CSRF-Token`. */
function checkCsrf(req: IncomingMessage, session: ConsoleSession): void {
  const method = req.method ?? 'GET';
  if (method === 'GET' || method === 'HEAD') return;
  if (!csrfMatches(session, req.headers['x-csrf-token'])) throw new AppError('CSRF_TOKEN_INVALID', 'Missing or wrong X-CSRF-Token header');
}

/**
 * `/console/api/...` (docs/console.md):
 * - `session`: POST `{key}` or `{password}` signs in with an admin key or the console password
 *   (sets the HttpOnly session cookie, answers the CSRF token), GET answers the CSRF token of
 *   the current session (401 with `passwordSignIn` without one), DELETE signs out;
 * - `admin/...`: the admin API (/admin/v1/...) with the session's key;
 * - `v2/{endpoint}/{operation}/{job?}`: the client API with the session's key (the test editor;
 *   `stream/{job}` with `Accept: text/event-stream` is how it follows a job live);
 * - `jobs/{endpoint}/{job}`: the job page's buffered chunks (not drained) and webhook attempts;
 * - `charts/{endpoint}`: the per-minute aggregates.
 * Every call but sign-in needs the session; every call but GET also its CSRF token.
 */
export async function handleConsoleApi(deps: ConsoleApiDeps, req: IncomingMessage, res: ServerResponse, segments: string[], query: URLSearchParams): Promise<void> {
  res.setHeader('cache-control', 'no-store');
  const [first, ...rest] = segments;
  if (first === 'session' && rest.length === 0) return sessionRoute(deps, req, res);
  const session = deps.sessions.get(cookieOf(req, SESSION_COOKIE), deps.now());
  if (!session) throw unauthorized();
  checkCsrf(req, session);
  // The routes below authenticate by header: the session's key stands in for the caller's.
  req.headers.authorization = `Bearer ${session.key}`;
  if (first === 'admin') return handleAdminRoute(deps.http, req, res, rest);
  const [endpointId, operation, jobId, extra] = rest;
  if (first === 'charts' && endpointId !== undefined && operation === undefined && (req.method ?? 'GET') === 'GET') {
    return sendCharts({ minutes: deps.minutes, endpoints: deps.http.endpoints, now: deps.now }, res, endpointId, query);
  }
  if (first === 'jobs' && endpointId !== undefined && operation !== undefined && jobId === undefined) {
    return sendJobPage(deps.http, req, res, endpointId, operation, query);
  }
  if (first === 'v2' && endpointId !== undefined && operation !== undefined && isClientOperation(operation) && extra === undefined) {
    return handleClientRoute(deps.http, { req, res, endpointId, operation, jobId, query, signal: clientGone(req, res) });
  }
  throw new AppError('NOT_FOUND', 'Unknown console API route');
}

async function sessionRoute(deps: ConsoleApiDeps, req: IncomingMessage, res: ServerResponse): Promise<void> {
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
    return sendJson(res, 200, { signedIn: false }, { 'set-cookie': sessionCookie(deps, '', 0) });
  }
  throw new AppError('METHOD_NOT_ALLOWED', `${method} is not allowed on /console/api/session`, undefined, { allow: 'GET, POST, DELETE' });
}

/**
 * Sign-in: the body must be JSON (`Content-Type: application/json`, which a cross-site form
 * cannot send without a CORS preflight this gateway never grants) holding an admin key or the
 * console password (sign-in.ts checks it and counts failures per client address).
 */
async function signIn(deps: ConsoleApiDeps, req: IncomingMessage, res: ServerResponse): Promise<void> {
  if (!(req.headers['content-type'] ?? '').startsWith('application/json')) {
    throw new AppError('UNSUPPORTED_MEDIA_TYPE', 'Sign in with a JSON body: Content-Type: application/json');
  }
  const body = await readJsonBody(req, MB / 100);
  const key = await deps.signIns.verify(req.socket.remoteAddress ?? 'unknown', body, deps.now());
  // A new sign-in from this browser ends its previous session (no session outlives its cookie).
  deps.sessions.close(cookieOf(req, SESSION_COOKIE));
  const { id, session } = deps.sessions.open(key, deps.now());
  sendJson(res, 200, { signedIn: true, csrfToken: session.csrf }, { 'set-cookie': sessionCookie(deps, id, Math.floor(SESSION_DEFAULTS.maxAgeMs / 1000)) });
}

/** Aborted when the client goes away before the answer (runsync from the test editor). */
function clientGone(req: IncomingMessage, res: ServerResponse): AbortSignal {
  const controller = new AbortController();
  res.once('close', () => {
    if (!res.writableFinished) controller.abort();
  });
  req.once('aborted', () => controller.abort());
  return controller.signal;
}
