import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pino } from 'pino';
import type { GantryConfig } from '../../src/config/config.js';
import { IMAGE_DEFAULTS } from '../../src/config/image-config.js';
import type { Gantry } from '../../src/server.js';
import type { Clock } from '../../src/util/clock.js';
import type { Scope } from '../../src/model/records.js';
import { createAdminClient, type AdminClient } from '../../src/sdk/admin-client.js';
import { createClient, type GantryClient } from '../../src/sdk/client.js';
import { createTestSchema } from './postgres.js';
import { runpodWorkerEnv } from '../../src/pool/worker-env.js';

export type TestBackend = 'sqlite' | 'postgres';

/** One secret key for every PostgreSQL test gateway, so gateways sharing a schema can read each other's sealed values. */
const TEST_SECRET_KEY = Buffer.alloc(32, 7).toString('base64');

export interface TestGantryOptions {
  /** Store backend; default GANTRY_TEST_BACKEND or sqlite. postgres: a schema of its own, dropped on close. */
  backend?: TestBackend;
  /** The gateway's clock (default: the real one). */
  clock?: Clock;
  /** SQLite: use this data folder (another gateway's, for a restart); kept on close. */
  dataDir?: string;
  /** PostgreSQL: join this connection string's schema (another gateway's) instead of a new one; not dropped on close. */
  databaseUrl?: string;
  /** More of the gateway's environment (the OTEL_* variables of the tracing tests). */
  env?: Record<string, string>;
}

export interface TestGantry {
  url: string;
  adminKey: string;
  gantry: Gantry;
  dataDir: string;
  /** The admin API (the SDK's client) with the admin key: for setting up what a test needs. */
  admin: AdminClient;
  /** The job API (the SDK's client) with `apiKey` (default: the admin key). */
  client(apiKey?: string): GantryClient;
  createEndpoint(id: string, settings?: Record<string, unknown>): Promise<void>;
  createKey(scopes: Scope[], endpoints?: string[]): Promise<string>;
  /** PostgreSQL: the connection string of this gateway's schema (for a second gateway on it). */
  databaseUrl?: string;
  /** The RUNPOD_* environment a worker process of this endpoint gets (docs/worker-protocol.md, "Configuration a worker receives"). */
  workerEnv(endpointId: string, workerId?: string): Record<string, string>;
  close(): Promise<void>;
}

/**
 * A real gateway on a free port with its own SQLite file in a temp folder (or its own
 * PostgreSQL schema), for tests. Workers are real processes speaking HTTP to `url`.
 */
export async function startTestGantry(config: Partial<GantryConfig> = {}, options: TestGantryOptions = {}): Promise<TestGantry> {
  const backend = options.backend ?? (process.env.GANTRY_TEST_BACKEND as TestBackend | undefined) ?? 'sqlite';
  const dataDir = options.dataDir ?? mkdtempSync(join(tmpdir(), 'gantry-test-'));
  const adminKey = `test-admin-${Math.random().toString(36).slice(2)}-key`;
  const schema = backend === 'postgres' && !options.databaseUrl ? await createTestSchema('gw') : undefined;
  const databaseUrl = options.databaseUrl ?? schema?.url;
  // With image workers on, the gateway runs from its build: its pool spawns dist/src/images/worker-main.js.
  const built = '../../dist/src/server.js';
  const { startGantry } = (config.images?.workers ? await import(built) : await import('../../src/server.js')) as typeof import('../../src/server.js');
  const gantry = await startGantry({
    env: { ...(databaseUrl ? { DATABASE_URL: databaseUrl, GANTRY_SECRET_KEY: TEST_SECRET_KEY } : {}), ...options.env },
    ...(options.clock ? { clock: options.clock } : {}),
    // Image workers are off unless a test passes `images` with workers: true.
    config: { port: 0, host: '127.0.0.1', dataDir, adminKey, logLevel: 'silent', rateLimits: false, images: { ...IMAGE_DEFAULTS, workers: false }, ...config },
    logger: pino({ level: process.env.GANTRY_TEST_LOG ?? 'silent' }),
  });
  const url = gantry.url;
  let counter = 0;

  const admin = createAdminClient({ url, adminKey });

  const workerKey = (await admin.createKey({ name: 'test workers', scopes: ['worker'] })).key;

  const t: TestGantry = {
    url,
    adminKey,
    gantry,
    dataDir,
    admin,
    client: (apiKey = adminKey) => createClient({ url, apiKey }),
    ...(databaseUrl ? { databaseUrl } : {}),
    async createEndpoint(id, settings = {}) {
      await admin.createEndpoint({ id, ...settings });
    },
    async createKey(scopes, endpoints) {
      return (await admin.createKey({ name: `test ${scopes.join('+')}`, scopes, ...(endpoints ? { endpoints } : {}) })).key;
    },
    workerEnv(endpointId, workerId = `worker-${process.pid}-${++counter}`) {
      return buildWorkerEnv(url, endpointId, workerId, workerKey);
    },
    async close() {
      await gantry.close();
      if (!options.dataDir) rmSync(dataDir, { recursive: true, force: true });
      await schema?.drop();
    },
  };
  return t;
}

/** The RUNPOD_* variables of docs/worker-protocol.md, with a 1 s ping for quick tests. */
export function buildWorkerEnv(url: string, endpointId: string, workerId: string, key: string): Record<string, string> {
  return runpodWorkerEnv({ gatewayUrl: url, endpointId, workerId, apiKey: key, pingIntervalMs: 1_000 });
}

/** Polls `check` until it returns a value other than undefined, or fails after `timeoutMs`. */
export async function eventually<T>(check: () => Promise<T | undefined>, timeoutMs = 10_000, what = 'condition'): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await check();
    if (value !== undefined) return value;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 25));
  }
}

/**
 * How many runsync / status-sync / stream long-polls are parked on this gateway's job waiters
 * (the dispatch layer's count, JobWaiters.size, reached through the job service it was given to).
 */
export function waitingJobCalls(gantry: Gantry): number {
  const jobs = gantry.gateway.jobs as unknown as { deps: { waiters: { size(): number } } };
  return jobs.deps.waiters.size();
}

/** Waits until at least `n` job long-polls are parked on the gateway (see waitingJobCalls). */
export function parkedJobCalls(gantry: Gantry, n = 1): Promise<true> {
  return eventually(async () => (waitingJobCalls(gantry) >= n ? true : undefined), 20_000, `${n} parked job long-poll(s)`);
}

/** Waits until `workerId`'s job-take long-poll is parked in the gateway's take queue. */
export function parkedTake(gantry: Gantry, workerId: string): Promise<true> {
  return eventually(async () => (gantry.gateway.takeQueue.waitingWorkers().some((w) => w.workerId === workerId) ? true : undefined), 20_000, `${workerId}'s take to park`);
}
