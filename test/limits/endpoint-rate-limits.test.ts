// Issue 9, "Also": per-endpoint rate limits. An endpoint's `rateLimits` setting (admin API,
// `gantry endpoints ... --rate-limits`) raises, lowers or lifts ("off") the spec's limits for
// that endpoint only; the others keep the defaults. Real gateway over HTTP, both backends; the
// CLI runs from the build (npm run build first).
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runCli } from '../cli/run-cli.js';
import { startTestGantry, type TestBackend, type TestGantry } from '../helpers/gantry.js';

type Json = Record<string, unknown>;

describe.each<TestBackend>(['sqlite', 'postgres'])('per-endpoint rate limits (%s)', (backend) => {
  let gantry: TestGantry;
  let key: string;

  beforeAll(async () => {
    gantry = await startTestGantry({ rateLimits: true }, { backend });
    key = await gantry.createKey(['run', 'read']);
  });
  afterAll(async () => gantry?.close());

  async function call(method: string, path: string, body?: unknown, auth = key): Promise<{ status: number; json: Json }> {
    const res = await fetch(`${gantry.url}${path}`, { method, headers: { authorization: `Bearer ${auth}`, 'content-type': 'application/json' }, body: body === undefined ? undefined : JSON.stringify(body) });
    return { status: res.status, json: (await res.json()) as Json };
  }

  /** How many of `n` GET /requests calls (10 per 10 s by default) are answered 200. */
  async function admitted(endpointId: string, n: number): Promise<number> {
    let ok = 0;
    for (let i = 0; i < n; i++) if ((await call('GET', `/v2/${endpointId}/requests`)).status === 200) ok++;
    return ok;
  }

  it('lowers, lifts and restores one endpoint limit while another endpoint keeps the defaults', async () => {
    const created = await call('POST', '/admin/v1/endpoints', { id: 'rl-low', rateLimits: { run: { per10s: 3 } } }, gantry.adminKey);
    expect(created.status).toBe(200);
    expect(created.json.rateLimits).toEqual({ run: { per10s: 3 } });
    await gantry.createEndpoint('rl-default');
    const runs = [];
    for (let i = 0; i < 4; i++) runs.push((await call('POST', '/v2/rl-low/run', { input: {} })).status);
    expect(runs).toEqual([200, 200, 200, 429]);
    expect((await call('POST', '/v2/rl-default/run', { input: {} })).status).toBe(200);

    await gantry.createEndpoint('rl-off', { rateLimits: 'off' });
    expect(await admitted('rl-off', 12)).toBe(12);
    expect(await admitted('rl-default', 12)).toBe(10);

    const restored = await call('PATCH', '/admin/v1/endpoints/rl-low', { rateLimits: null }, gantry.adminKey);
    expect(restored.json.rateLimits).toBeNull();
    expect((await call('POST', '/v2/rl-low/run', { input: {} })).status).toBe(200);
  });

  it('refuses unknown operations and bad numbers with a 400 naming the field', async () => {
    const cases: [unknown, string][] = [
      [{ runn: { per10s: 5 } }, 'rateLimits.runn'],
      [{ run: { per10s: 0 } }, 'rateLimits.run.per10s'],
      [{ run: { burst: 5 } }, 'rateLimits.run.burst'],
      ['on', 'rateLimits'],
    ];
    for (const [rateLimits, field] of cases) {
      const res = await call('POST', '/admin/v1/endpoints', { id: 'rl-bad', rateLimits }, gantry.adminKey);
      expect(res.status, JSON.stringify(rateLimits)).toBe(400);
      expect(res.json.field).toBe(field);
    }
  });

  it('gantry endpoints update --rate-limits sets and clears the setting', async () => {
    await gantry.createEndpoint('rl-cli');
    const env = { GANTRY_URL: gantry.url, GANTRY_ADMIN_KEY: gantry.adminKey };
    const off = await runCli(['endpoints', 'update', 'rl-cli', '--rate-limits', 'off'], env);
    expect(off.code, off.stderr).toBe(0);
    expect((await call('GET', '/admin/v1/endpoints/rl-cli', undefined, gantry.adminKey)).json.rateLimits).toBe('off');
    expect(await admitted('rl-cli', 12)).toBe(12);
    const set = await runCli(['endpoints', 'update', 'rl-cli', '--rate-limits', '{"requests":{"per10s":2}}'], env);
    expect(set.code, set.stderr).toBe(0);
    expect((await call('GET', '/admin/v1/endpoints/rl-cli', undefined, gantry.adminKey)).json.rateLimits).toEqual({ requests: { per10s: 2 } });
    const bad = await runCli(['endpoints', 'update', 'rl-cli', '--rate-limits', 'fast'], env);
    expect(bad.code).not.toBe(0);
    expect(bad.stderr).toContain('--rate-limits');
  });
});
