import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pino } from 'pino';
import type { GantryConfig } from '../../src/config.js';
import { IMAGE_DEFAULTS } from '../../src/images/image-config.js';
import { startGantry, type Gantry } from '../../src/server.js';
import type { Scope } from '../../src/store/store.js';
import { createTestSchema } from './postgres.js';
import { runpodWorkerEnv } from '../../src/jobs/worker-env.js';

export type TestBackend = 'sqlite' | 'postgres';

export interface TestGantryOptions {
  /** Store backend; default GANTRY_TEST_BACKEND or sqlite. postgres: a schema of its own, dropped on close. */
  backend?: TestBackend;
}

export interface TestGantry {
  url: string;
  adminKey: string;
  gantry: Gantry;
  dataDir: string;
  createEndpoint(id: string, settings?: Record<string, unknown>): Promise<void>;
  createKey(scopes: Scope[], endpoints?: string[]): Promise<string>;
  /** The RUNPOD_* environment a worker process of this endpoint gets (DESIGN.md §1). */
  workerEnv(endpointId: string, workerId?: string): Record<string, string>;
  close(): Promise<void>;
}

/**
 * A real gateway on a free port with its own SQLite file in a temp folder (or its own
 * PostgreSQL schema), for tests. Workers are real processes speaking HTTP to `url`.
 */
export async function startTestGantry(config: Partial<GantryConfig> = {}, options: TestGantryOptions = {}): Promise<TestGantry> {
  const backend = options.backend ?? (process.env.GANTRY_TEST_BACKEND as TestBackend | undefined) ?? 'sqlite';
  const dataDir = mkdtempSync(join(tmpdir(), 'gantry-test-'));
  const adminKey = `test-admin-${Math.random().toString(36).slice(2)}-key`;
  const schema = backend === 'postgres' ? await createTestSchema('gw') : undefined;
  const gantry = await startGantry({
    env: schema ? { DATABASE_URL: schema.url } : {},
    // Image workers are off unless a test passes `images` with workers: true.
    config: { port: 0, host: '127.0.0.1', dataDir, adminKey, logLevel: 'silent', rateLimits: false, images: { ...IMAGE_DEFAULTS, workers: false }, ...config },
    logger: pino({ level: process.env.GANTRY_TEST_LOG ?? 'silent' }),
  });
  const url = gantry.url;
  let counter = 0;

  async function admin(path: string, body: unknown): Promise<Record<string, unknown>> {
    const res = await fetch(`${url}/admin/v1/${path}`, {
      method: 'POST',
      headers: { authorization: `Bearer ${adminKey}`, 'content-type': 'application/json' },
      body: JSON.stringify(body),
    });
    const json = (await res.json()) as Record<string, unknown>;
    if (res.status !== 200) throw new Error(`admin ${path} failed: ${res.status} ${JSON.stringify(json)}`);
    return json;
  }

  const workerKey = (await admin('keys', { name: 'test workers', scopes: ['worker'] })).key as string;

  const t: TestGantry = {
    url,
    adminKey,
    gantry,
    dataDir,
    async createEndpoint(id, settings = {}) {
      await admin('endpoints', { id, ...settings });
    },
    async createKey(scopes, endpoints) {
      return (await admin('keys', { name: `test ${scopes.join('+')}`, scopes, ...(endpoints ? { endpoints } : {}) })).key as string;
    },
    workerEnv(endpointId, workerId = `worker-${process.pid}-${++counter}`) {
      return buildWorkerEnv(url, endpointId, workerId, workerKey);
    },
    async close() {
      await gantry.close();
      rmSync(dataDir, { recursive: true, force: true });
      await schema?.drop();
    },
  };
  return t;
}

/** The RUNPOD_* variables of DESIGN.md §1, with a 1 s ping for quick tests. */
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
