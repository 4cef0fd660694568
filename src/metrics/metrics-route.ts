import { createHash, timingSafeEqual } from 'node:crypto';
import type { IncomingMessage } from 'node:http';
import type { Registry } from 'prom-client';
import { authorize } from '../http/auth.js';
import type { Route } from '../http/route-table.js';
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
 * @example routes.add(createMetricsRoute({ config, keys, registry, refresh }));
 */
export function createMetricsRoute(deps: MetricsRouteDeps): Route {
  const tokenDigest = deps.config.token === null ? null : sha256(deps.config.token);
  let rendering: Promise<string> | undefined;
  const render = (): Promise<string> =>
    (rendering ??= deps
      .refresh()
      .then(() => deps.registry.metrics())
      .finally(() => (rendering = undefined)));

  // `own` auth: the token or an admin key, or nothing at all with access `public`.
  return {
    family: 'metrics',
    method: ['GET', 'HEAD'],
    path: '/metrics',
    auth: 'own',
    async handle({ req, res }) {
      if (deps.config.access === 'on' && !matchesToken(req, tokenDigest)) await authorize(deps.keys, req, 'admin');
      const text = await render();
      res.writeHead(200, { 'content-type': deps.registry.contentType, 'content-length': Buffer.byteLength(text), 'cache-control': 'no-store' });
      res.end(req.method === 'HEAD' ? undefined : text);
    },
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
