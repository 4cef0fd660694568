// The admin API under /admin/v1 (keys and endpoints) and key scopes (docs/api.md, "Authentication" and "Admin API").
import { createHash } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pino } from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startGantry } from '../../src/server.js';
import { startTestGantry, type TestGantry } from '../helpers/gantry.js';
import { call, clientFor, isErrorBody, uniqueId, workerFor, type CallOptions, type Json } from './http-helpers.js';

let t: TestGantry;

beforeAll(async () => {
  t = await startTestGantry({ jobTakeWaitMs: 200 });
});

afterAll(async () => {
  await t?.close();
});

const admin = (method: string, path: string, opts: CallOptions = {}) => call(t.url, method, `/admin/v1/${path}`, { key: t.adminKey, ...opts });

async function newEndpoint(settings: Record<string, unknown> = {}): Promise<string> {
  const id = uniqueId('ad');
  const r = await admin('POST', 'endpoints', { body: { id, ...settings } });
  expect(r.status).toBe(200);
  return id;
}

describe('keys', () => {
  it('create shows the key once; list never shows the key or its hash; a deleted key stops working', async () => {
    const ep = await newEndpoint();
    const created = await admin('POST', 'keys', { body: { name: 'ci', scopes: ['run'] } });
    expect(created.status).toBe(200);
    const key = created.json.key as string;
    const keyId = created.json.id as string;
    expect(typeof key).toBe('string');
    expect(key.length).toBeGreaterThanOrEqual(20);
    expect(created.json).toMatchObject({ name: 'ci', scopes: ['run'], endpoints: null });
    expect(created.json).not.toHaveProperty('hash');

    const works = await call(t.url, 'POST', `/v2/${ep}/run`, { key, body: { input: {} } });
    expect(works.status).toBe(200);

    const list = await admin('GET', 'keys');
    expect(list.status).toBe(200);
    const keys = list.json.keys as Json[];
    const mine = keys.find((k) => k.id === keyId);
    expect(mine).toMatchObject({ id: keyId, name: 'ci', scopes: ['run'] });
    for (const k of keys) {
      expect(k).not.toHaveProperty('key');
      expect(k).not.toHaveProperty('hash');
    }
    const sha = createHash('sha256').update(key).digest('hex');
    expect(list.text).not.toContain(key);
    expect(list.text).not.toContain(sha);
    expect(list.text).not.toContain(t.adminKey);

    const del = await admin('DELETE', `keys/${keyId}`);
    expect(del.status).toBe(200);
    const refused = await call(t.url, 'POST', `/v2/${ep}/run`, { key, body: { input: {} } });
    expect(refused.status).toBe(401);
    expect(isErrorBody(refused)).toBe(true);
    expect(((await admin('GET', 'keys')).json.keys as Json[]).some((k) => k.id === keyId)).toBe(false);
    const again = await admin('DELETE', `keys/${keyId}`);
    expect(again.status).toBe(404);
    expect(isErrorBody(again)).toBe(true);
  });

  it('rejects bad key bodies with 400 naming the field', async () => {
    const cases: [unknown, string][] = [
      [{ scopes: ['run'] }, 'name'],
      [{ name: '', scopes: ['run'] }, 'name'],
      [{ name: 'x' }, 'scopes'],
      [{ name: 'x', scopes: [] }, 'scopes'],
      [{ name: 'x', scopes: ['root'] }, 'scopes'],
      [{ name: 'x', scopes: ['run'], endpoints: 'ep' }, 'endpoints'],
      [{ name: 'x', scopes: ['run'], colour: 'red' }, 'colour'],
    ];
    for (const [body, field] of cases) {
      const r = await admin('POST', 'keys', { body });
      expect(r.status, JSON.stringify(body)).toBe(400);
      expect(isErrorBody(r)).toBe(true);
      expect(r.json.error, JSON.stringify(body)).toContain(field);
    }
    const notObject = await admin('POST', 'keys', { body: [] });
    expect(notObject.status).toBe(400);
  });
});

describe('scopes', () => {
  it('a read key can read but cannot run, cancel or purge', async () => {
    const ep = await newEndpoint();
    const runKey = await t.createKey(['run']);
    const readKey = await t.createKey(['read']);
    const id = await clientFor(t, ep, runKey).submit();
    const reader = clientFor(t, ep, readKey);
    for (const r of [await reader.run(), await reader.runsync({ input: {} }, '?wait=1000'), await reader.cancel(id), await reader.purge(), await reader.retry(id)]) {
      expect(r.status).toBe(401);
      expect(isErrorBody(r)).toBe(true);
    }
    expect((await reader.status(id)).status).toBe(200);
    expect((await reader.stream(id, '?wait=0')).status).toBe(200);
    expect((await reader.health()).status).toBe(200);
    expect((await reader.requests()).status).toBe(200);
    expect((await reader.status(id)).json.status).toBe('IN_QUEUE');
  });

  it('an endpoint-restricted key gets 401 on another endpoint', async () => {
    const a = await newEndpoint();
    const b = await newEndpoint();
    const key = await t.createKey(['run'], [a]);
    expect((await clientFor(t, a, key).run()).status).toBe(200);
    const other = await clientFor(t, b, key).run();
    expect(other.status).toBe(401);
    expect(isErrorBody(other)).toBe(true);
    expect((await clientFor(t, b, key).health()).status).toBe(401);
  });

  it('admin includes run and read but not worker; run and read keys cannot use the admin API', async () => {
    const ep = await newEndpoint();
    const c = clientFor(t, ep, t.adminKey);
    const id = await c.submit();
    expect((await c.status(id)).status).toBe(200);
    expect((await workerFor(t, ep, t.adminKey).take()).status).toBe(401);
    for (const scopes of [['run'], ['read'], ['worker']] as const) {
      const key = await t.createKey([...scopes]);
      const r = await call(t.url, 'GET', '/admin/v1/keys', { key });
      expect(r.status, scopes[0]).toBe(401);
      expect(isErrorBody(r)).toBe(true);
      expect((await call(t.url, 'POST', '/admin/v1/endpoints', { key, body: { id: uniqueId('x') } })).status).toBe(401);
    }
  });

  it('no or an invalid admin key is 401 JSON', async () => {
    for (const key of [null, 'not-a-key', `${t.adminKey}x`]) {
      const r = await call(t.url, 'GET', '/admin/v1/endpoints', { key });
      expect(r.status, String(key)).toBe(401);
      expect(isErrorBody(r)).toBe(true);
    }
    expect((await call(t.url, 'GET', '/admin/v1/endpoints', { key: t.adminKey, rawAuth: true })).status).toBe(200);
  });
});

describe('endpoints', () => {
  it('create applies the defaults; get, list, patch and delete', async () => {
    const id = uniqueId('ep');
    const created = await admin('POST', 'endpoints', { body: { id } });
    expect(created.status).toBe(200);
    expect(created.json).toMatchObject({
      id,
      workersMin: 0,
      workersMax: 3,
      idleTimeout: 5,
      executionTimeoutMs: 600_000,
      scalerType: 'QUEUE_DELAY',
      scalerValue: 4,
      maxAttempts: 3,
      worker: null,
    });
    const got = await admin('GET', `endpoints/${id}`);
    expect(got.status).toBe(200);
    expect(got.json).toEqual(created.json);
    expect(((await admin('GET', 'endpoints')).json.endpoints as Json[]).some((e) => e.id === id)).toBe(true);

    const patched = await admin('PATCH', `endpoints/${id}`, { body: { workersMax: 5, scalerType: 'REQUEST_COUNT', executionTimeoutMs: 5_001 } });
    expect(patched.status).toBe(200);
    expect(patched.json).toMatchObject({ id, workersMin: 0, workersMax: 5, idleTimeout: 5, scalerType: 'REQUEST_COUNT', scalerValue: 4, executionTimeoutMs: 5_001, maxAttempts: 3 });
    expect((await admin('GET', `endpoints/${id}`)).json).toMatchObject({ workersMax: 5, executionTimeoutMs: 5_001 });

    // The endpoint's execution timeout becomes a new job's default.
    const runKey = await t.createKey(['run']);
    const workerKey = await t.createKey(['worker']);
    const c = clientFor(t, id, runKey);
    await c.submit();
    const job = await workerFor(t, id, workerKey).takeJob();
    expect(job.policy).toMatchObject({ executionTimeout: 5_001 });

    const del = await admin('DELETE', `endpoints/${id}`);
    expect(del.status).toBe(200);
    expect((await admin('GET', `endpoints/${id}`)).status).toBe(404);
    const run = await c.run();
    expect(run.status).toBe(404);
    expect(isErrorBody(run)).toBe(true);
  });

  it('rejects each bad value with 400 naming the field', async () => {
    const cases: [Record<string, unknown>, string][] = [
      [{ id: 'bad id' }, 'id'],
      [{ id: '' }, 'id'],
      [{ id: 'x'.repeat(65) }, 'id'],
      [{ id: 'admin' }, 'id'],
      [{ name: '' }, 'name'],
      [{ workersMin: -1 }, 'workersMin'],
      [{ workersMin: 1.5 }, 'workersMin'],
      [{ workersMax: 'three' }, 'workersMax'],
      [{ workersMin: 4, workersMax: 2 }, 'workersMin'],
      [{ idleTimeout: 0 }, 'idleTimeout'],
      [{ executionTimeoutMs: 5_000 }, 'executionTimeoutMs'],
      [{ scalerType: 'FASTEST' }, 'scalerType'],
      [{ scalerValue: 0 }, 'scalerValue'],
      [{ maxAttempts: 0 }, 'maxAttempts'],
      [{ worker: 'node w.js' }, 'worker'],
      [{ worker: { command: '' } }, 'worker.command'],
      [{ colour: 'red' }, 'colour'],
    ];
    for (const [settings, field] of cases) {
      const body = 'id' in settings ? settings : { id: uniqueId('bad'), ...settings };
      const r = await admin('POST', 'endpoints', { body });
      expect(r.status, JSON.stringify(settings)).toBe(400);
      expect(isErrorBody(r)).toBe(true);
      expect(r.json.error, JSON.stringify(settings)).toContain(field);
    }
    const id = await newEndpoint();
    for (const [settings, field] of cases.filter(([s]) => !('id' in s))) {
      const r = await admin('PATCH', `endpoints/${id}`, { body: settings });
      expect(r.status, `PATCH ${JSON.stringify(settings)}`).toBe(400);
      expect(r.json.error).toContain(field);
    }
    const changeId = await admin('PATCH', `endpoints/${id}`, { body: { id: 'other' } });
    expect(changeId.status).toBe(400);
    expect(changeId.json.error).toContain('id');
    // Nothing of the refused patches was applied.
    expect((await admin('GET', `endpoints/${id}`)).json).toMatchObject({ workersMin: 0, workersMax: 3, maxAttempts: 3 });
  });

  it('unknown endpoint → 404, duplicate → 409, unknown admin route → 404, wrong method → 405', async () => {
    for (const method of ['GET', 'PATCH', 'DELETE']) {
      const r = await admin(method, 'endpoints/no-such-endpoint', method === 'PATCH' ? { body: { workersMax: 1 } } : {});
      expect(r.status, method).toBe(404);
      expect(isErrorBody(r)).toBe(true);
    }
    const id = await newEndpoint();
    const dup = await admin('POST', 'endpoints', { body: { id } });
    expect(dup.status).toBe(409);
    expect(isErrorBody(dup)).toBe(true);
    const unknown = await admin('GET', 'widgets');
    expect(unknown.status).toBe(404);
    expect(isErrorBody(unknown)).toBe(true);
    const wrong = await admin('PUT', 'endpoints');
    expect(wrong.status).toBe(405);
    expect(isErrorBody(wrong)).toBe(true);
  });
});

describe('the first admin key', () => {
  it('a first start without GANTRY_ADMIN_KEY creates one and returns it; a restart creates none', async () => {
    const dataDir = mkdtempSync(join(tmpdir(), 'gantry-admin-test-'));
    const start = () =>
      startGantry({
        env: { GANTRY_IMAGE_WORKERS: 'off' },
        config: { port: 0, host: '127.0.0.1', dataDir, adminKey: null, logLevel: 'silent', rateLimits: false },
        logger: pino({ level: 'silent' }),
      });
    try {
      const first = await start();
      let key: string;
      try {
        expect(typeof first.adminKey).toBe('string');
        key = first.adminKey!;
        const r = await call(first.url, 'GET', '/admin/v1/keys', { key });
        expect(r.status).toBe(200);
        expect((r.json.keys as Json[]).filter((k) => (k.scopes as string[]).includes('admin'))).toHaveLength(1);
      } finally {
        await first.close();
      }
      const second = await start();
      try {
        expect(second.adminKey).toBeNull();
        const r = await call(second.url, 'GET', '/admin/v1/keys', { key });
        expect(r.status).toBe(200);
        expect((r.json.keys as Json[]).filter((k) => (k.scopes as string[]).includes('admin'))).toHaveLength(1);
      } finally {
        await second.close();
      }
    } finally {
      rmSync(dataDir, { recursive: true, force: true });
    }
  });

  it('GANTRY_ADMIN_KEY from the environment is installed once and works', async () => {
    const dataDir = mkdtempSync(join(tmpdir(), 'gantry-admin-test-'));
    const key = 'env-admin-key-0123456789abcdef';
    const start = () =>
      startGantry({
        env: { GANTRY_ADMIN_KEY: key, GANTRY_IMAGE_WORKERS: 'off' }, // image workers would add their own (worker) key
        config: { port: 0, host: '127.0.0.1', dataDir, logLevel: 'silent', rateLimits: false },
        logger: pino({ level: 'silent' }),
      });
    try {
      for (let i = 0; i < 2; i++) {
        const g = await start();
        try {
          expect(g.adminKey).toBe(key);
          const r = await call(g.url, 'GET', '/admin/v1/keys', { key });
          expect(r.status).toBe(200);
          expect(r.json.keys as Json[]).toHaveLength(1);
        } finally {
          await g.close();
        }
      }
    } finally {
      rmSync(dataDir, { recursive: true, force: true });
    }
  });
});
