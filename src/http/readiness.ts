import type { Logger } from 'pino';
import type { DiskSpace } from '../store/disk-space.js';
import type { StoreHealth } from '../store/store-faults.js';
import type { EndpointStore } from '../store/store.js';
import { codeSchemaVersion } from '../store/migrations.js';
import { packageVersion } from '../util/package-version.js';
import { sendJson } from './respond.js';
import type { Route } from './route-table.js';

/** What /readyz reports: whether this gateway should get traffic, and the check that says no. */
export interface Readiness {
  check(): Promise<{ ready: boolean; checks: Record<string, string> }>;
}

/** What the readiness check reads: the store (one indexed read), its fault episodes, and whether the gateway is closing. */
export interface ReadinessDeps {
  store: Pick<EndpointStore, 'getEndpoint'>;
  /** Whether store calls are failing now (a full disk fails writes while reads still answer). */
  health?: Pick<StoreHealth, 'state'>;
  /** The data directory's free space: not ready while it is under its reserve (new jobs are refused then). */
  disk?: Pick<DiskSpace, 'state' | 'minFreeBytes'>;
  logger: Logger;
  /** A store read slower than this counts as unreachable (default 2 s). */
  timeoutMs?: number;
}

/** The readiness of one gateway; `closing()` turns it not-ready for good (shutdown). */
export interface GatewayReadiness extends Readiness {
  closing(): void;
}

/**
 * /readyz for a gateway whose store is migrated (startGantry listens only after `migrate()`):
 * ready while no store fault episode is open (writes commit: a full disk fails writes while
 * reads still answer), a store read answers within the time limit, the data directory's free
 * space is over its reserve (GANTRY_DISK_MIN_FREE_BYTES: new jobs are refused under it), and the
 * gateway is not shutting down. The reason for "not ready" names the check, never the driver's error (that is
 * logged), since /readyz needs no key.
 *
 * @example const readiness = createReadiness({ store, logger }); createRequestListener(services, routes, { readiness });
 */
export function createReadiness(deps: ReadinessDeps): GatewayReadiness {
  const timeoutMs = deps.timeoutMs ?? 2_000;
  let closing = false;
  return {
    closing: () => void (closing = true),
    async check() {
      const disk = diskCheck(deps.disk);
      if (closing) return { ready: false, checks: { migrations: 'applied', store: 'not checked', ...disk, shutdown: 'in progress' } };
      const state = deps.health?.state();
      if (state?.failing) return { ready: false, checks: { migrations: 'applied', store: `failing (${state.kind})`, ...disk, shutdown: 'no' } };
      const store = await probe(deps, timeoutMs);
      const diskLow = disk.disk?.startsWith('low') === true;
      return { ready: store === 'reachable' && !diskLow, checks: { migrations: 'applied', store, ...disk, shutdown: 'no' } };
    },
  };
}

/** The disk check of /readyz: none without a disk watch, 'ok', or 'low (… free, … kept)'. */
function diskCheck(disk: ReadinessDeps['disk']): { disk?: string } {
  if (!disk || disk.minFreeBytes === 0) return {};
  const state = disk.state();
  if (!state.low) return { disk: 'ok' };
  return { disk: `low (${Math.round(state.freeBytes / 1_000_000)} MB free, ${Math.round(disk.minFreeBytes / 1_000_000)} MB kept)` };
}

/** One read of the endpoints table by an id no endpoint can have: 'reachable', 'unreachable' or 'timed out'. */
async function probe(deps: ReadinessDeps, timeoutMs: number): Promise<string> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<string>((resolve) => {
    timer = setTimeout(() => resolve('timed out'), timeoutMs);
    timer.unref();
  });
  const read = deps.store.getEndpoint('').then(
    () => 'reachable',
    (err: unknown) => {
      deps.logger.warn({ err }, 'readiness: the store read failed');
      return 'unreachable';
    },
  );
  try {
    return await Promise.race([read, timeout]);
  } finally {
    clearTimeout(timer);
  }
}

/**
 * `/healthz` (liveness: the process answers; with the package version and the schema version) and `/readyz` (200 `{"ready":true,...}` when
 * `readiness` says this gateway can serve, else 503 naming the failed check); no key needed.
 *
 * @example routes.add(...probeRoutes(createReadiness({ store, logger })));
 */
export function probeRoutes(readiness: Readiness): Route[] {
  return [
    { family: 'probe', method: ['GET', 'HEAD'], path: '/healthz', auth: 'public', handle: async ({ res }) => sendJson(res, 200, { ok: true, version: packageVersion(), schemaVersion: codeSchemaVersion() }) },
    {
      family: 'probe',
      method: ['GET', 'HEAD'],
      path: '/readyz',
      auth: 'public',
      async handle({ res }) {
        const result = await readiness.check();
        sendJson(res, result.ready ? 200 : 503, result, { 'cache-control': 'no-store' });
      },
    },
  ];
}
