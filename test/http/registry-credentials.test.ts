// The registry credentials of the admin API (docs/api.md, "Registry credentials"), on both
// stores: saved once, answered {id, name}, listed without the password, sealed at rest, refused
// deletion while an endpoint names them, and named by worker.registryCredentials.
import Database from 'better-sqlite3';
import { join } from 'node:path';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { AdminApiError } from '../../src/sdk/admin-client.js';
import { startTestGantry, type TestBackend, type TestGantry } from '../helpers/gantry.js';
import { call, uniqueId, type Json } from './http-helpers.js';

const PASSWORD = 'hunter2-registry-token-0123456789';

/** The password column as stored, read beside the gateway. */
async function storedPasswords(t: TestGantry): Promise<string[]> {
  if (t.databaseUrl) {
    const client = new pg.Client({ connectionString: t.databaseUrl });
    await client.connect();
    try {
      return (await client.query<{ password: string }>('SELECT password FROM registry_credentials')).rows.map((r) => r.password);
    } finally {
      await client.end();
    }
  }
  const db = new Database(join(t.dataDir, 'gantry.db'), { readonly: true, fileMustExist: true });
  try {
    return (db.prepare('SELECT password FROM registry_credentials').all() as { password: string }[]).map((r) => r.password);
  } finally {
    db.close();
  }
}

describe.each<TestBackend>(['sqlite', 'postgres'])('registry credentials (%s)', (backend) => {
  let t: TestGantry;
  const admin = (method: string, path: string, body?: unknown) => call(t.url, method, `/admin/v1/${path}`, { key: t.adminKey, ...(body === undefined ? {} : { body }) });

  beforeAll(async () => {
    t = await startTestGantry({}, { backend });
  });
  afterAll(async () => {
    await t?.close();
  });

  it('answers {id, name} only, lists without the password, seals it at rest and opens it for a pull', async () => {
    const created = await admin('POST', 'registry-credentials', { name: 'ghcr bot', username: 'bot', password: PASSWORD });
    expect(created.status).toBe(200);
    expect(Object.keys(created.json).sort()).toEqual(['id', 'name']);
    expect(created.json.id).toMatch(/^rc_[0-9a-f]{16}$/);
    expect(created.json.name).toBe('ghcr bot');
    const id = created.json.id as string;

    const listed = await t.admin.listRegistryCredentials();
    expect(listed.find((c) => c.id === id)).toEqual({ id, name: 'ghcr bot', username: 'bot', createdAt: expect.stringMatching(/^\d{4}-\d\d-\d\dT/) as unknown });
    const raw = await admin('GET', 'registry-credentials');
    expect(raw.text).not.toContain(PASSWORD);
    expect(raw.text).not.toContain('password');

    const stored = await storedPasswords(t);
    expect(stored.length).toBeGreaterThan(0);
    for (const value of stored) expect(value).not.toContain(PASSWORD);
    expect(await t.gantry.gateway.registry.login(id)).toEqual({ username: 'bot', password: PASSWORD });
  });

  it('refuses bad bodies with 400 naming the field', async () => {
    const cases: [unknown, string][] = [
      [{ name: 'x', username: 'u' }, 'password'],
      [{ name: '', username: 'u', password: 'p' }, 'name'],
      [{ name: 'x', username: 'u', password: 'p'.repeat(8_193) }, 'password'],
      [{ name: 'x', username: 'u\n', password: 'p' }, 'username'],
      [{ name: 'x', username: 'u', password: 'p', registry: 'r' }, 'registry'],
    ];
    for (const [body, field] of cases) {
      const r = await admin('POST', 'registry-credentials', body);
      expect(r.status, JSON.stringify(body).slice(0, 80)).toBe(400);
      expect(r.json.field ?? r.json.error).toContain(field);
    }
    const notObject = await admin('POST', 'registry-credentials', [1]);
    expect(notObject.status).toBe(400);
    expect(notObject.json.code).toBe('INVALID_BODY');
    const run = await t.createKey(['run']);
    const denied = await call(t.url, 'GET', '/admin/v1/registry-credentials', { key: run });
    expect(denied.status).toBe(401);
  });

  it('is named by endpoints, and refused deletion while one does (409 listing them); 404 for none', async () => {
    const { id } = await t.admin.createRegistryCredential({ name: 'private', username: 'u', password: PASSWORD });
    const ep = uniqueId('rc');
    const unknown = await admin('POST', 'endpoints', { id: ep, worker: { image: 'registry.example.com/team/app:1', registryCredentials: 'rc_0000000000000000' } });
    expect(unknown.status).toBe(400);
    expect(unknown.json.field).toBe('worker.registryCredentials');
    await t.admin.createEndpoint({ id: ep, worker: { image: 'registry.example.com/team/app:1', registryCredentials: id } });

    const inUse = await admin('DELETE', `registry-credentials/${id}`);
    expect(inUse.status).toBe(409);
    expect(inUse.json).toMatchObject({ code: 'REGISTRY_CREDENTIAL_IN_USE', endpoints: [ep] } as Json);
    expect(inUse.json.error).toContain(ep);

    await t.admin.updateEndpoint(ep, { worker: { image: 'registry.example.com/team/app:1' } });
    expect(await t.admin.deleteRegistryCredential(id)).toEqual({ id, deleted: true });
    expect((await t.admin.listRegistryCredentials()).some((c) => c.id === id)).toBe(false);
    const again = await t.admin.deleteRegistryCredential(id).catch((err: unknown) => err);
    expect(again).toBeInstanceOf(AdminApiError);
    expect(again).toMatchObject({ status: 404, code: 'REGISTRY_CREDENTIAL_NOT_FOUND' });
    const long = await admin('DELETE', `registry-credentials/${'x'.repeat(65)}`);
    expect(long.status).toBe(400);
    expect(long.json.field).toBe('credentialId');
  });
});
