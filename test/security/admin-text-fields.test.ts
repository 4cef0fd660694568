// gaps-9 §7: admin text that reaches the store must not carry control characters. PostgreSQL's
// `text` rejects NUL, so a key name or endpoint name with \u0000 was a 500 there; on both stores
// such text is now refused with 400 naming the field, and nothing is stored.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestGantry, type TestBackend, type TestGantry } from '../helpers/gantry.js';
import { call, uniqueId } from '../http/http-helpers.js';

const BAD = ['a\u0000b', 'line\nbreak', 'tab\there', 'esc\u001b[31m', 'del\u007f'];

describe.each<TestBackend>(['sqlite', 'postgres'])('admin text fields refuse control characters (%s)', (backend) => {
  let t: TestGantry;
  let echo: string;

  beforeAll(async () => {
    t = await startTestGantry({}, { backend });
    echo = uniqueId('echo');
    await t.createEndpoint(echo);
  });
  afterAll(() => t?.close());

  it('refuses a key name with a control character (400 naming name) and stores no key', async () => {
    for (const name of BAD) {
      const r = await call(t.url, 'POST', '/admin/v1/keys', { key: t.adminKey, body: { name, scopes: ['run'] } });
      expect(r.status, JSON.stringify(name)).toBe(400);
      expect(r.json).toMatchObject({ code: 'INVALID_PARAMETER', field: 'name' });
      expect(r.text).not.toContain('\u0000');
    }
    const list = await call(t.url, 'GET', '/admin/v1/keys', { key: t.adminKey });
    expect(list.status).toBe(200);
    expect((list.json.keys as { name: string }[]).filter((k) => BAD.includes(k.name))).toEqual([]);
  });

  it('refuses a key endpoint id with a control character (400 naming endpoints)', async () => {
    const r = await call(t.url, 'POST', '/admin/v1/keys', { key: t.adminKey, body: { name: 'nul endpoint', scopes: ['run'], endpoints: ['a\u0000b'] } });
    expect(r.status).toBe(400);
    expect(r.json).toMatchObject({ code: 'INVALID_PARAMETER', field: 'endpoints' });
  });

  it('refuses an endpoint name with a control character on create and update (400 naming name)', async () => {
    const id = uniqueId('nul');
    const created = await call(t.url, 'POST', '/admin/v1/endpoints', { key: t.adminKey, body: { id, name: 'a\u0000b' } });
    expect(created.status).toBe(400);
    expect(created.json).toMatchObject({ code: 'INVALID_PARAMETER', field: 'name' });
    expect((await call(t.url, 'GET', `/admin/v1/endpoints/${id}`, { key: t.adminKey })).status).toBe(404);
    const patched = await call(t.url, 'PATCH', `/admin/v1/endpoints/${echo}`, { key: t.adminKey, body: { name: 'a\u0000b' } });
    expect(patched.status).toBe(400);
    expect(patched.json).toMatchObject({ code: 'INVALID_PARAMETER', field: 'name' });
    expect((await call(t.url, 'GET', `/admin/v1/endpoints/${echo}`, { key: t.adminKey })).json.name).toBe(echo);
  });

  it('still takes printable names, including non-ASCII ones', async () => {
    const r = await call(t.url, 'POST', '/admin/v1/keys', { key: t.adminKey, body: { name: 'CI – déploiement ☃', scopes: ['run'] } });
    expect(r.status).toBe(200);
    expect(r.json.name).toBe('CI – déploiement ☃');
  });
});
