// Who may read /metrics (docs/metrics.md): GANTRY_METRICS on (a token or an admin key),
// public (no key) or off (no route, nothing counted); and the settings refused at start.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pino } from 'pino';
import { afterEach, describe, expect, it } from 'vitest';
import { IMAGE_DEFAULTS } from '../../src/config/image-config.js';
import { loadMetricsConfig, type MetricsConfig } from '../../src/metrics/metrics-config.js';
import { startGantry, type Gantry } from '../../src/server.js';
import { call } from '../http/http-helpers.js';

const ADMIN_KEY = 'metrics-access-admin-key';
const TOKEN = 'prometheus-scrape-token-0123';
const started: { gantry: Gantry; dir: string }[] = [];

afterEach(async () => {
  for (const { gantry, dir } of started.splice(0)) {
    await gantry.close();
    rmSync(dir, { recursive: true, force: true });
  }
});

async function start(metrics: Partial<MetricsConfig>): Promise<Gantry> {
  const dir = mkdtempSync(join(tmpdir(), 'gantry-metrics-'));
  const gantry = await startGantry({
    env: {},
    metrics,
    logger: pino({ level: 'silent' }),
    config: { port: 0, host: '127.0.0.1', dataDir: dir, adminKey: ADMIN_KEY, logLevel: 'silent', images: { ...IMAGE_DEFAULTS, workers: false } },
  });
  started.push({ gantry, dir });
  return gantry;
}

describe('GANTRY_METRICS', () => {
  it('on: the token or an admin key; nothing else', async () => {
    const g = await start({ access: 'on', token: TOKEN });
    const { key: runKey } = await g.gateway.keys.create({ name: 'runner', scopes: ['run', 'read'], endpoints: null });
    expect((await call(g.url, 'GET', '/metrics')).status).toBe(401);
    expect((await call(g.url, 'GET', '/metrics', { key: runKey })).status).toBe(401);
    expect((await call(g.url, 'GET', '/metrics', { key: `${TOKEN}x` })).status).toBe(401);
    const byToken = await call(g.url, 'GET', '/metrics', { key: TOKEN });
    expect(byToken.status).toBe(200);
    expect(byToken.text).toContain('# TYPE gantry_http_requests_total counter');
    expect((await call(g.url, 'GET', '/metrics', { key: ADMIN_KEY })).status).toBe(200);
    expect((await call(g.url, 'POST', '/metrics', { key: TOKEN })).status).toBe(405);
    // Neither secret is ever part of the metrics.
    const text = (await call(g.url, 'GET', '/metrics', { key: TOKEN })).text;
    expect(text).not.toContain(TOKEN);
    expect(text).not.toContain(ADMIN_KEY);
  });

  it('on without a token: admin keys only', async () => {
    const g = await start({ access: 'on', token: null });
    expect((await call(g.url, 'GET', '/metrics', { key: TOKEN })).status).toBe(401);
    expect((await call(g.url, 'GET', '/metrics', { key: ADMIN_KEY })).status).toBe(200);
  });

  it('public: no key needed', async () => {
    const g = await start({ access: 'public' });
    const res = await call(g.url, 'GET', '/metrics');
    expect(res.status).toBe(200);
    expect(res.text).toMatch(/^gantry_build_info\{version="\d+\.\d+\.\d+"\} 1$/m);
  });

  it('off: no /metrics route, and /metrics stays free for nothing else', async () => {
    const g = await start({ access: 'off' });
    const res = await call(g.url, 'GET', '/metrics', { key: ADMIN_KEY });
    expect(res.status).toBe(404);
    expect(res.json).toMatchObject({ code: 'NOT_FOUND' });
    expect((await call(g.url, 'GET', '/readyz')).status).toBe(200);
  });

  it('refuses bad settings at start, naming the variable', () => {
    expect(() => loadMetricsConfig({ GANTRY_METRICS: 'yes' })).toThrow(/GANTRY_METRICS="yes": expected on, public or off/);
    expect(() => loadMetricsConfig({ GANTRY_METRICS_TOKEN: 'short' })).toThrow(/GANTRY_METRICS_TOKEN: use at least 16 characters/);
    expect(loadMetricsConfig({})).toEqual({ access: 'on', token: null });
    expect(loadMetricsConfig({ GANTRY_METRICS: 'public', GANTRY_METRICS_TOKEN: TOKEN })).toEqual({ access: 'public', token: TOKEN });
  });
});
