// Issue 9, item 1: an admin key limited to endpoints must not be a full admin. The rule: admin
// keys cannot be limited to endpoints (refused with 400 naming `endpoints`), and an admin key
// stored with a limit (made before the rule) is refused by every admin route.
import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { sha256Hex } from '../../src/security/keys.js';
import type { KeyStore } from '../../src/store/store.js';
import { startTestGantry, type TestBackend, type TestGantry } from '../helpers/gantry.js';
import { call, uniqueId } from '../http/http-helpers.js';

describe.each<TestBackend>(['sqlite', 'postgres'])('admin keys and endpoint limits (%s)', (backend) => {
  let t: TestGantry;
  let echo: string;

  beforeAll(async () => {
    t = await startTestGantry({}, { backend });
    echo = uniqueId('echo');
    await t.createEndpoint(echo);
  });
  afterAll(() => t?.close());

  it('refuses to create an admin key limited to endpoints (400 naming endpoints)', async () => {
    const r = await call(t.url, 'POST', '/admin/v1/keys', { key: t.adminKey, body: { name: 'half admin', scopes: ['admin'], endpoints: [echo] } });
    expect(r.status).toBe(400);
    expect(r.json).toMatchObject({ code: 'INVALID_PARAMETER', field: 'endpoints' });
    const list = await call(t.url, 'GET', '/admin/v1/keys', { key: t.adminKey });
    expect((list.json.keys as { name: string }[]).some((k) => k.name === 'half admin')).toBe(false);
  });

  it('still limits run and read keys to endpoints', async () => {
    const r = await call(t.url, 'POST', '/admin/v1/keys', { key: t.adminKey, body: { name: 'runner', scopes: ['run'], endpoints: [echo] } });
    expect(r.status).toBe(200);
    expect(r.json.endpoints).toEqual([echo]);
  });

  it('an admin key stored with an endpoint limit reaches no admin route and changes nothing', async () => {
    const raw = `legacy-${randomUUID()}`;
    const store = t.gantry.gateway.http.usage as unknown as KeyStore;
    await store.createKey({ id: randomUUID(), name: 'legacy half admin', hash: sha256Hex(raw), scopes: ['admin'], endpoints: [echo], createdAt: Date.now(), budgetUnits: null, budgetPeriod: null, maxConcurrentJobs: null, prefix: null, lastUsedAt: null, managed: false });
    const attempts: [string, string, unknown?][] = [
      ['POST', '/admin/v1/keys', { name: 'escalated', scopes: ['admin'] }],
      ['GET', '/admin/v1/keys'],
      ['PATCH', `/admin/v1/endpoints/${echo}`, { worker: { command: ['sh', '-c', 'id'] } }],
      ['GET', '/admin/v1/endpoints'],
      ['GET', '/admin/v1/usage'],
      ['GET', `/admin/v1/endpoints/${echo}/workers`],
    ];
    for (const [method, path, body] of attempts) {
      const r = await call(t.url, method, path, { key: raw, ...(body === undefined ? {} : { body }) });
      expect(r.status, `${method} ${path}`).toBe(401);
      expect(r.json.code).toBe('INSUFFICIENT_SCOPE');
    }
    const keys = await call(t.url, 'GET', '/admin/v1/keys', { key: t.adminKey });
    expect((keys.json.keys as { name: string }[]).some((k) => k.name === 'escalated')).toBe(false);
    const endpoint = await call(t.url, 'GET', `/admin/v1/endpoints/${echo}`, { key: t.adminKey });
    expect(endpoint.json.worker ?? null).toBeNull();
    // It keeps what run and read grant on its own endpoint.
    expect((await call(t.url, 'POST', `/v2/${echo}/run`, { key: raw, body: { input: {} } })).status).toBe(200);
  });
});
