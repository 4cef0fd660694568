// Issue 9, item 3: a new GANTRY_ADMIN_KEY replaces the old one. Restarting the gateway with a
// rotated value revokes the old bootstrap key (and a key a first start generated); admin keys
// made through the API stay.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pino } from 'pino';
import { afterAll, describe, expect, it } from 'vitest';
import { IMAGE_DEFAULTS } from '../../src/config/image-config.js';
import { createKeyService } from '../../src/security/keys.js';
import { startGantry, type Gantry } from '../../src/server.js';
import { openPostgresStore } from '../../src/store/postgres/postgres-store.js';
import { createTestSchema, type TestSchema } from '../helpers/postgres.js';
import type { TestBackend } from '../helpers/gantry.js';
import { call } from '../http/http-helpers.js';

describe.each<TestBackend>(['sqlite', 'postgres'])('rotating GANTRY_ADMIN_KEY (%s)', (backend) => {
  const dataDir = mkdtempSync(join(tmpdir(), 'gantry-rotate-'));
  let schema: TestSchema | undefined;
  afterAll(async () => {
    rmSync(dataDir, { recursive: true, force: true });
    await schema?.drop();
  });

  async function start(adminKey: string | null): Promise<Gantry> {
    if (backend === 'postgres') schema ??= await createTestSchema('rotate');
    return startGantry({
      env: schema ? { DATABASE_URL: schema.url } : {},
      config: { port: 0, host: '127.0.0.1', dataDir, adminKey, logLevel: 'silent', rateLimits: false, images: { ...IMAGE_DEFAULTS, workers: false } },
      logger: pino({ level: 'silent' }),
    });
  }
  const listKeys = (g: Gantry, key: string) => call(g.url, 'GET', '/admin/v1/keys', { key });

  it('the old value stops working once the gateway starts with a new one', async () => {
    let g = await start(null);
    const generated = g.adminKey as string;
    expect((await listKeys(g, generated)).status).toBe(200);
    await g.close();

    const first = `first-admin-key-${Math.random().toString(36).slice(2)}`;
    g = await start(first);
    expect((await listKeys(g, first)).status).toBe(200);
    const made = await call(g.url, 'POST', '/admin/v1/keys', { key: first, body: { name: 'ops admin', scopes: ['admin'] } });
    expect(made.status).toBe(200);
    expect((await listKeys(g, generated)).status).toBe(401);
    await g.close();

    const second = `second-admin-key-${Math.random().toString(36).slice(2)}`;
    g = await start(second);
    try {
      expect((await listKeys(g, first)).status).toBe(401);
      expect((await call(g.url, 'POST', '/v2/anything/run', { key: first, body: { input: {} } })).status).toBe(401);
      const keys = await listKeys(g, second);
      expect(keys.status).toBe(200);
      const names = (keys.json.keys as { name: string }[]).map((k) => k.name);
      expect(names.filter((n) => n === 'admin (GANTRY_ADMIN_KEY)')).toHaveLength(1);
      expect(names).not.toContain('admin (first start)');
      // A key made through the admin API is not a bootstrap key and stays.
      expect((await listKeys(g, made.json.key as string)).status).toBe(200);
    } finally {
      await g.close();
    }
    // Starting again with the same value changes nothing.
    g = await start(second);
    try {
      expect((await listKeys(g, second)).status).toBe(200);
    } finally {
      await g.close();
    }
  });
});

describe('gateways of one PostgreSQL database starting together', () => {
  let schema: TestSchema | undefined;
  const closers: (() => Promise<void>)[] = [];
  afterAll(async () => {
    for (const close of closers) await close();
    await schema?.drop();
  });

  it('both install the same GANTRY_ADMIN_KEY: the one that loses the race finds it stored', async () => {
    schema = await createTestSchema('rotate_race');
    const logger = pino({ level: 'silent' });
    // Two gateways' key services, each on its own connection pool, as two processes would be.
    const services = [0, 1].map(() => {
      const opened = openPostgresStore({ connectionString: schema!.url, poolSize: 2 }, logger);
      closers.push(() => opened.store.close());
      return { opened, keys: createKeyService({ store: opened.store, now: Date.now }) };
    });
    await services[0]!.opened.store.migrate();
    await Promise.all(services.map(({ keys }) => keys.list())); // both pools connected, so the installs run side by side
    const spec = { name: 'admin (GANTRY_ADMIN_KEY)', scopes: ['admin' as const], endpoints: null };
    // A few rotations, each installed by both at once (one race is enough to fail without the fix; timing decides which).
    for (let round = 0; round < 5; round++) {
      const key = `shared-admin-key-${round}-${Math.random().toString(36).slice(2)}`;
      const installed = await Promise.allSettled(services.map(({ keys }) => keys.install(spec, key, ['admin (GANTRY_ADMIN_KEY)'])));
      expect(installed.map((s) => (s.status === 'rejected' ? String(s.reason) : 'installed'))).toEqual(['installed', 'installed']);
      const stored = await services[1]!.keys.list();
      expect(stored.filter((k) => k.name === 'admin (GANTRY_ADMIN_KEY)')).toHaveLength(1);
      expect(await services[0]!.keys.exists(key)).toBe(true);
    }
  });
});
