// Issue 9, item 3: a new GANTRY_ADMIN_KEY replaces the old one. Restarting the gateway with a
// rotated value revokes the old bootstrap key (and a key a first start generated); admin keys
// made through the API stay.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pino } from 'pino';
import { afterAll, describe, expect, it } from 'vitest';
import { IMAGE_DEFAULTS } from '../../src/config/image-config.js';
import { startGantry, type Gantry } from '../../src/server.js';
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
