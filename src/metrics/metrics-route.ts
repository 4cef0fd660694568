import { createHash, timingSafeEqual } from 'node:crypto';
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Registry } from 'prom-client';
import { authorize } from '../http/auth.js';
import type { RouteHandler } from '../http/server.js';
import { AppError } from '../model/errors.js';
import type { KeyService } from '../security/keys.js';
import type { MetricsConfig } from './metrics-config.js';

/** What the /metrics route uses: who may read it, the admin-key check, and the registry to render. */
export interface MetricsRouteDeps {
  config: MetricsConfig;
  keys: Pick<KeyService, 'authorize'>;
  registry: Registry;
  /** Refreshes the scrape-time gauges before rendering. */
  refresh(): Promise<void>;
}

/**
 * GET /metrics in the Prometheus text format. With access `on` the caller sends
 * `Authorization: Bearer <GANTRY_METRICS_TOKEN>` or an admin key (401 otherwise); concurrent
 * scrapes share one rendering, so a flood of them costs one.
 *
 * @example routes.add('metrics', createMetricsRoute({ config, keys, registry, refresh }));
 */
export function createMetricsRoute(deps: MetricsRouteDeps): RouteHandler {
  const tokenDigest = deps.config.token === null ? null : sha256(deps.config.token);
  let rendering: Promise<string> | undefined;
  const render = (): Promise<string> =>
    (rendering ??= deps
      .refresh()
      .then(() => deps.registry.metrics())
      .finally(() => (rendering = undefined)));

  return async (req: IncomingMessage, res: ServerResponse, target) => {
    if (target.segments.length > 0) throw new AppError('NOT_FOUND', 'No route: /metrics has no sub-paths');
    if (req.method !== 'GET' && req.method !== 'HEAD') {
      throw new AppError('METHOD_NOT_ALLOWED', `${req.method ?? ''} is not allowed on /metrics (use GET)`, undefined, { allow: 'GET, HEAD' });
    }
    if (deps.config.access === 'on' && !matchesToken(req, tokenDigest)) await authorize(deps.keys, req, 'admin');
    const text = await render();
    res.writeHead(200, { 'content-type': deps.registry.contentType, 'content-length': Buffer.byteLength(text), 'cache-control': 'no-store' });
    res.end(req.method === 'HEAD' ? undefined : text);
  };
}

function matchesToken(req: IncomingMessage, digest: Buffer | null): boolean {
  const header = req.headers.authorization;
  if (digest === null || header === undefined) return false;
  const given = header.startsWith('Bearer ') || header.startsWith('bearer ') ? header.slice(7).trim() : header.trim();
  // Digests of equal length, compared in constant time: the token's length leaks nothing either.
  return timingSafeEqual(sha256(given), digest);
}

function sha256(text: string): Buffer {
  return createHash('sha256').update(text).digest();
}
