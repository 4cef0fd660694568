import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Route, RouteTable } from '../http/route-table.js';
import type { HttpServices } from '../http/server.js';
import { AppError } from '../model/errors.js';
import { packageVersion } from '../util/package-version.js';
import { consoleApiRoutes } from './console-api.js';
import { defaultAssetsDir, loadAssets, type ConsoleAsset } from './console-assets.js';
import { setSecurityHeaders } from './console-headers.js';
import { openApiDocument } from './openapi.js';
import { sendJsonText } from '../http/respond.js';
import type { MinuteRecorder } from './minute-recorder.js';
import { createSessionTable, SESSION_DEFAULTS, type SessionLimits } from './sessions.js';
import { createSignInGuard } from './sign-in.js';

/** What the console plugs into: the route table and the services the admin and client routes use. */
export interface ConsoleFeatureDeps {
  routes: RouteTable;
  http: HttpServices;
  /** The gateway's public URL (GANTRY_PUBLIC_URL): an https one makes the session cookie `Secure`. */
  publicUrl: string | null;
  now(): number;
  /** The per-minute aggregates behind the endpoint charts. */
  minutes: Pick<MinuteRecorder, 'read'>;
  /** Where the built bundle is (default: dist/console of this package). */
  assetsDir?: string;
  sessions?: SessionLimits;
  /** The console password (GANTRY_CONSOLE_PASSWORD); null or absent: sign-in with admin keys only. */
  consolePassword?: string | null;
  /** The gateway's secret key, from which the password sessions' admin key is derived (needed with a password). */
  secretKey?: Buffer;
  /** The package version, for /openapi.json's info. */
  version?: string;
}

/**
 * The management console as a feature of the gateway (docs/console.md): the page and its
 * bundle at /console (built by `npm run build` into dist/console, served from memory), its API
 * at /console/api (session cookie + CSRF token, then the admin and client routes), and `GET /`
 * redirecting to /console/; and the API's OpenAPI description at /openapi.json.
 *
 * @example await setUpConsole({ routes: gateway.routes, http: gateway.http, publicUrl: null, now: Date.now, minutes, consolePassword: null });
 */
export async function setUpConsole(deps: ConsoleFeatureDeps): Promise<void> {
  const assets = loadAssets(deps.assetsDir ?? defaultAssetsDir());
  const sessions = createSessionTable(deps.sessions ?? SESSION_DEFAULTS);
  const signIns = createSignInGuard({
    keys: deps.http.keys,
    password: deps.consolePassword ?? null,
    secretKey: deps.secretKey ?? null,
    logger: deps.http.logger,
  });
  // The password's admin key is installed, or an earlier password's revoked, before the gateway serves.
  await signIns.prepare();
  const api = { http: deps.http, sessions, signIns, secureCookie: (deps.publicUrl ?? '').startsWith('https://'), minutes: deps.minutes, now: deps.now };
  const openApi = JSON.stringify(openApiDocument(deps.version ?? packageVersion()));
  const page = (path: string): Route => ({ family: 'console', method: ['GET', 'HEAD'], path, auth: 'public', handle: ({ req, res, params }) => serveAsset(assets, req, res, params.rest ?? []) });
  deps.routes.addHeaders('console', setSecurityHeaders);
  deps.routes.add(
    {
      family: 'console',
      method: ['GET', 'HEAD'],
      path: '/',
      auth: 'public',
      handle: async ({ res }) => {
        res.writeHead(302, { location: '/console/' });
        res.end();
      },
    },
    {
      family: 'console',
      method: ['GET', 'HEAD'],
      path: '/openapi.json',
      auth: 'public',
      handle: async ({ res }) => sendJsonText(res, 200, openApi, { 'cache-control': 'public, max-age=300', 'access-control-allow-origin': '*' }),
    },
    page('/console'),
    page('/console/{*rest}'),
    ...consoleApiRoutes(api),
  );
}

/** `/console/` → index.html, `/console/assets/<name>` → a bundle file; nothing else. */
async function serveAsset(assets: Map<string, ConsoleAsset>, req: IncomingMessage, res: ServerResponse, segments: string[]): Promise<void> {
  const method = req.method ?? 'GET';
  if (segments.length === 0 && !(req.url ?? '').split('?')[0]!.endsWith('/')) {
    res.writeHead(301, { location: '/console/' });
    res.end();
    return;
  }
  const name = segments.length === 0 ? 'index.html' : segments.length === 2 && segments[0] === 'assets' ? segments[1]! : undefined;
  const asset = name === undefined ? undefined : assets.get(name);
  if (!asset) {
    if (assets.size === 0) throw new AppError('CONSOLE_NOT_BUILT', 'The console bundle is missing: run npm run build');
    throw new AppError('NOT_FOUND', 'No such console file');
  }
  res.writeHead(200, {
    'content-type': asset.type,
    'content-length': asset.body.length,
    'cache-control': name === 'index.html' ? 'no-cache' : 'public, max-age=300',
  });
  res.end(method === 'HEAD' ? undefined : asset.body);
}
