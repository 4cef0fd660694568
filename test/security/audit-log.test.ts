// The audit log (issue 27, item 3) on both stores over real HTTP: every admin change of the
// list (keys created, limited and revoked; registry credentials saved and deleted; endpoints
// created, changed and deleted; an admin's purge-queue) and every console sign-in and sign-out
// leaves an entry naming who (key or console session), when, from where (X-Forwarded-For from a
// trusted proxy only) and what changed — and no secret appears anywhere in the log's JSON.
// GET /admin/v1/audit filters and pages; the reaper deletes entries past GANTRY_AUDIT_KEEP_DAYS.
import { mkdtempSync, rmSync } from 'node:fs';
import { request } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pino } from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/config/config.js';
import { createOffsetClock } from '../helpers/clock.js';
import { startTestGantry, type TestBackend, type TestGantry } from '../helpers/gantry.js';
import type { AuditEntry } from '../../src/sdk/admin-client.js';
import { createAuditLog, MAX_DETAIL_CHARS } from '../../src/security/audit-log.js';
import { createSqliteStore } from '../../src/store/sqlite/sqlite-store.js';
import { createManualClock } from '../helpers/clock.js';
import { workerFor } from '../http/http-helpers.js';

const PASSWORD = 'console password for the audit test';
const ENV_SECRET = 'env-value-SECRET-1f4e';
const ENV_SECRET_2 = 'env-value-SECRET-2b9c';
const REGISTRY_PASSWORD = 'registry-password-SECRET-77aa';
const WEBHOOK_SECRET = `whsec_${Buffer.alloc(32, 3).toString('base64')}`;
const WEBHOOK_SECRET_2 = `whsec_${Buffer.alloc(32, 9).toString('base64')}`;
const DAY = 86_400_000;
/** The name of the key GANTRY_ADMIN_KEY installs (the test gateway's admin key). */
const ADMIN_NAME = 'admin (GANTRY_ADMIN_KEY)';

interface Answer {
  status: number;
  json: Record<string, unknown>;
  cookies: string[];
}

/** A call over real HTTP from 127.0.0.1, with headers of our choosing (X-Forwarded-For, cookies). */
function call(t: TestGantry, method: string, path: string, body?: unknown, headers: Record<string, string> = {}): Promise<Answer> {
  const url = new URL(path, t.url);
  const text = body === undefined ? '' : JSON.stringify(body);
  return new Promise((resolve, reject) => {
    const req = request(
      { host: url.hostname, port: url.port, path: `${url.pathname}${url.search}`, method, headers: { ...(body === undefined ? {} : { 'content-type': 'application/json' }), 'content-length': Buffer.byteLength(text), ...headers } },
      (res) => {
        let data = '';
        res.setEncoding('utf8').on('data', (c: string) => (data += c));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, json: data === '' ? {} : (JSON.parse(data) as Record<string, unknown>), cookies: [res.headers['set-cookie'] ?? []].flat().map((c) => c.split(';')[0]!) }));
      },
    );
    req.on('error', reject);
    req.end(text);
  });
}

const admin = (t: TestGantry, extra: Record<string, string> = {}) => ({ authorization: `Bearer ${t.adminKey}`, ...extra });

async function auditLog(t: TestGantry, query = ''): Promise<{ entries: AuditEntry[]; nextCursor: string | null; text: string }> {
  const res = await fetch(`${t.url}/admin/v1/audit${query}`, { headers: admin(t) });
  const text = await res.text();
  expect(res.status, text).toBe(200);
  return { ...(JSON.parse(text) as { entries: AuditEntry[]; nextCursor: string | null }), text };
}

/** The newest entry of `action` (the log is newest first). */
async function latest(t: TestGantry, action: string): Promise<AuditEntry> {
  const { entries } = await auditLog(t, `?action=${action}&limit=1`);
  expect(entries, action).toHaveLength(1);
  return entries[0]!;
}

describe.each<TestBackend>(['sqlite', 'postgres'])('the audit log (%s)', (backend) => {
  let t: TestGantry;
  const clock = createOffsetClock();
  const secrets: string[] = [PASSWORD, ENV_SECRET, ENV_SECRET_2, REGISTRY_PASSWORD, WEBHOOK_SECRET, WEBHOOK_SECRET_2];

  beforeAll(async () => {
    t = await startTestGantry({ consolePassword: PASSWORD, trustedProxies: ['127.0.0.1'] }, { backend, clock });
    secrets.push(t.adminKey);
  }, 30_000);
  afterAll(async () => {
    await t?.close();
  });

  it('records keys created (from the proxied client address), limited and revoked, never the key', async () => {
    const created = await call(t, 'POST', '/admin/v1/keys', { name: 'ci runner', scopes: ['run'] }, admin(t, { 'x-forwarded-for': '203.0.113.9' }));
    expect(created.status).toBe(200);
    const id = created.json.id as string;
    secrets.push(created.json.key as string);
    expect(await latest(t, 'key.create')).toMatchObject({
      outcome: 'ok',
      actor: { kind: 'key', keyName: ADMIN_NAME, session: null },
      address: '203.0.113.9',
      target: { kind: 'key', id },
      detail: { name: 'ci runner', scopes: ['run'], endpoints: null },
    });
    await t.admin.setKeyLimits(id, { budgetUsd: 5, budgetPeriod: 'day', maxConcurrentJobs: 3 });
    expect(await latest(t, 'key.limits')).toMatchObject({
      target: { kind: 'key', id },
      detail: { name: 'ci runner', changes: { budgetUsd: { from: null, to: 5 }, budgetPeriod: { from: null, to: 'day' }, maxConcurrentJobs: { from: null, to: 3 } } },
    });
    await t.admin.deleteKey(id);
    const revoked = await latest(t, 'key.revoke');
    expect(revoked).toMatchObject({ target: { kind: 'key', id }, detail: { name: 'ci runner' }, address: '127.0.0.1' });
    // Without a trusted proxy in front, X-Forwarded-For is not believed: tested by the client-address tests; here the proxy is trusted.
    expect(Date.parse(revoked.at)).toBeGreaterThan(Date.now() - 60_000);
  });

  it('records registry credentials saved and deleted, the password only as set', async () => {
    const { id } = await t.admin.createRegistryCredential({ name: 'ghcr', username: 'bot', password: REGISTRY_PASSWORD });
    expect(await latest(t, 'registry-credential.create')).toMatchObject({ target: { kind: 'registry-credential', id }, detail: { name: 'ghcr', username: 'bot', password: 'set' } });
    await t.admin.deleteRegistryCredential(id);
    expect(await latest(t, 'registry-credential.delete')).toMatchObject({ target: { kind: 'registry-credential', id }, detail: { name: 'ghcr' } });
  });

  it('records endpoints created, changed (which fields, env by name) and deleted, and an admin purge-queue', async () => {
    await t.admin.createEndpoint({ id: 'audited', workersMax: 2, webhookSecret: WEBHOOK_SECRET, worker: { command: 'node worker.js', env: { API_TOKEN: ENV_SECRET, MODE: 'fast' } } } as never);
    const created = await latest(t, 'endpoint.create');
    expect(created).toMatchObject({ target: { kind: 'endpoint', id: 'audited' }, detail: { env: { added: ['API_TOKEN', 'MODE'], removed: [], changed: [] } } });
    expect(created.detail.fields).toEqual(expect.arrayContaining(['workersMax', 'webhookSecret', 'worker', 'worker.command', 'worker.env']));
    expect(created.detail.changes).toMatchObject({ workersMax: { from: 3, to: 2 }, webhookSecret: { from: 'none', to: 'set' } });

    await t.admin.updateEndpoint('audited', { workersMax: 5, webhookSecret: WEBHOOK_SECRET_2, worker: { command: 'node worker.js', env: { API_TOKEN: ENV_SECRET_2, EXTRA: 'x' } } } as never);
    const updated = await latest(t, 'endpoint.update');
    expect(updated).toMatchObject({
      target: { kind: 'endpoint', id: 'audited' },
      detail: { fields: ['workersMax', 'webhookSecret', 'worker.env'], changes: { workersMax: { from: 2, to: 5 }, webhookSecret: { from: 'set', to: 'set' } }, env: { added: ['EXTRA'], removed: ['MODE'], changed: ['API_TOKEN'] } },
    });

    // purge-queue by an admin key is an admin change; by a run key it is not recorded.
    const runKey = await t.createKey(['run']);
    secrets.push(runKey);
    expect((await call(t, 'POST', '/v2/audited/purge-queue', {}, { authorization: `Bearer ${runKey}` })).status).toBe(200);
    expect((await call(t, 'POST', '/v2/audited/purge-queue', {}, admin(t))).status).toBe(200);
    const purges = (await auditLog(t, '?action=queue.purge')).entries;
    expect(purges).toHaveLength(1);
    expect(purges[0]).toMatchObject({ target: { kind: 'endpoint', id: 'audited' }, actor: { keyName: ADMIN_NAME }, detail: { removed: 0 } });

    await t.admin.deleteEndpoint('audited');
    expect(await latest(t, 'endpoint.delete')).toMatchObject({ target: { kind: 'endpoint', id: 'audited' }, detail: { name: 'audited' } });
  });

  it('records console sign-ins (right and wrong), changes made in a session as the session, and sign-outs', async () => {
    const from = { 'x-forwarded-for': '198.51.100.4' };
    expect((await call(t, 'POST', '/console/api/session', { password: 'a wrong password guess' }, from)).status).toBe(401);
    const failed = await latest(t, 'console.sign-in');
    expect(failed).toMatchObject({ outcome: 'failed', actor: { kind: 'anonymous', keyId: null }, address: '198.51.100.4', detail: { method: 'password' } });

    const ok = await call(t, 'POST', '/console/api/session', { password: PASSWORD }, from);
    expect(ok.status).toBe(200);
    const cookie = ok.cookies.join('; ');
    for (const c of ok.cookies) secrets.push(c.split('=')[1]!);
    const signedIn = await latest(t, 'console.sign-in');
    expect(signedIn).toMatchObject({ outcome: 'ok', actor: { kind: 'console', keyName: 'admin (console password)' }, address: '198.51.100.4', detail: { method: 'password' } });
    const session = signedIn.actor.session!;
    expect(session).toMatch(/^[0-9a-f]{12}$/);

    const csrf = ok.json.csrfToken as string;
    secrets.push(csrf);
    const made = await call(t, 'POST', '/console/api/admin/endpoints', { id: 'from-console' }, { ...from, cookie, 'x-csrf-token': csrf });
    expect(made.status).toBe(200);
    expect(await latest(t, 'endpoint.create')).toMatchObject({ target: { id: 'from-console' }, actor: { kind: 'console', session, keyName: 'admin (console password)' }, address: '198.51.100.4' });
    // A job cancelled with the console's button is the session's change; a run key's cancel is not recorded.
    const queued = (await call(t, 'POST', '/v2/from-console/run', { input: {} }, admin(t))).json.id as string;
    expect((await call(t, 'POST', `/console/api/v2/from-console/cancel/${queued}`, {}, { ...from, cookie, 'x-csrf-token': csrf })).status).toBe(200);
    expect(await latest(t, 'job.cancel')).toMatchObject({ target: { kind: 'job', id: queued }, actor: { kind: 'console', session }, address: '198.51.100.4', detail: { endpoint: 'from-console' } });
    const runKey = await t.createKey(['run']);
    secrets.push(runKey);
    const own = (await call(t, 'POST', '/v2/from-console/run', { input: {} }, { authorization: `Bearer ${runKey}` })).json.id as string;
    expect((await call(t, 'POST', `/v2/from-console/cancel/${own}`, {}, { authorization: `Bearer ${runKey}` })).status).toBe(200);
    // A retry by an admin key (a failed job's, the worker speaking the protocol over HTTP) is recorded too.
    const failing = (await call(t, 'POST', '/v2/from-console/run', { input: {} }, admin(t))).json.id as string;
    const worker = workerFor(t, 'from-console', await t.createKey(['worker']));
    expect((await worker.takeJob()).id).toBe(failing);
    expect((await worker.done(failing, { error: 'boom' })).status).toBe(200);
    expect((await call(t, 'POST', `/v2/from-console/retry/${failing}`, {}, admin(t))).status).toBe(200);
    expect(await latest(t, 'job.retry')).toMatchObject({ target: { kind: 'job', id: failing }, actor: { kind: 'key', keyName: ADMIN_NAME }, detail: { endpoint: 'from-console' } });
    expect((await call(t, 'POST', `/v2/from-console/cancel/${failing}`, {}, admin(t))).status).toBe(200);
    expect((await auditLog(t, '?action=job.')).entries.map((e) => [e.action, e.target?.id])).toEqual([['job.cancel', failing], ['job.retry', failing], ['job.cancel', queued]]);
    // The session's own entries are found by its reference.
    expect((await auditLog(t, `?actor=${session}`)).entries.map((e) => e.action)).toEqual(['job.cancel', 'endpoint.create', 'console.sign-in']);

    expect((await call(t, 'DELETE', '/console/api/session', undefined, { cookie, 'x-csrf-token': csrf })).status).toBe(200);
    expect(await latest(t, 'console.sign-out')).toMatchObject({ actor: { kind: 'console', session } });

    const byKey = await call(t, 'POST', '/console/api/session', { key: t.adminKey });
    expect(byKey.status).toBe(200);
    for (const c of byKey.cookies) secrets.push(c.split('=')[1]!);
    expect(await latest(t, 'console.sign-in')).toMatchObject({ outcome: 'ok', actor: { kind: 'console', keyName: ADMIN_NAME }, detail: { method: 'key' } });
  });

  it('holds no secret in any entry: keys, passwords, env values, webhook and registry secrets, cookies', async () => {
    const { text, entries } = await auditLog(t, '?limit=1000');
    expect(entries.length).toBeGreaterThanOrEqual(14);
    for (const secret of secrets) expect(text, 'a secret in the audit log').not.toContain(secret);
    // The console password's derived admin key (gk_console_…) is a secret too.
    expect(text).not.toContain('gk_');
  });

  it('filters by action prefix, actor, target and time, and pages with a cursor', async () => {
    const all = (await auditLog(t, '?limit=1000')).entries;
    const ids = all.map((e) => Number(e.id));
    expect(ids).toEqual([...ids].sort((a, b) => b - a));
    expect((await auditLog(t, '?action=endpoint.')).entries.every((e) => e.action.startsWith('endpoint.'))).toBe(true);
    expect((await auditLog(t, '?target=audited')).entries.map((e) => e.action)).toEqual(['endpoint.delete', 'queue.purge', 'endpoint.update', 'endpoint.create']);
    const byAdmin = (await auditLog(t, `?actor=${encodeURIComponent(ADMIN_NAME)}&action=key.`)).entries;
    expect(byAdmin.every((e) => e.actor.keyName === ADMIN_NAME && e.action.startsWith('key.'))).toBe(true);
    expect(byAdmin.filter((e) => e.detail.name === 'ci runner').map((e) => e.action)).toEqual(['key.revoke', 'key.limits', 'key.create']);
    expect((await auditLog(t, `?since=${Date.now() + DAY}`)).entries).toEqual([]);
    expect((await auditLog(t, `?until=${new Date(Date.now() - DAY).toISOString()}`)).entries).toEqual([]);

    const pages: string[] = [];
    let cursor: string | null = null;
    do {
      const page: { entries: AuditEntry[]; nextCursor: string | null } = await auditLog(t, `?limit=4${cursor ? `&cursor=${cursor}` : ''}`);
      expect(page.entries.length).toBeLessThanOrEqual(4);
      pages.push(...page.entries.map((e) => e.id));
      cursor = page.nextCursor;
    } while (cursor !== null);
    expect(pages).toEqual(all.map((e) => e.id));
  });

  it('refuses bad filters with 400 naming the parameter', async () => {
    for (const [query, field] of [
      ['?limit=0', 'limit'],
      ['?limit=1001', 'limit'],
      ['?since=yesterday', 'since'],
      ['?action=endpoint%25', 'action'],
      ['?cursor=abc', 'cursor'],
      ['?actr=admin', 'actr'],
      [`?since=${Date.now()}&until=${Date.now() - 1}`, 'until'],
    ] as const) {
      const res = await fetch(`${t.url}/admin/v1/audit${query}`, { headers: admin(t) });
      expect(res.status, query).toBe(400);
      expect(await res.json(), query).toMatchObject({ code: 'INVALID_PARAMETER', field });
    }
    const runKey = await t.createKey(['run', 'read']);
    expect((await fetch(`${t.url}/admin/v1/audit`, { headers: { authorization: `Bearer ${runKey}` } })).status).toBe(401);
  });

  it('keeps entries GANTRY_AUDIT_KEEP_DAYS (90): the leader reaper deletes older ones', async () => {
    const before = (await auditLog(t, '?limit=1000')).entries.length;
    expect(before).toBeGreaterThan(0);
    expect(await clock.ahead(89 * DAY, () => t.gantry.gateway.reaper.runOnce())).toMatchObject({ audit: 0 });
    expect((await auditLog(t, '?limit=1000')).entries).toHaveLength(before);
    // The count is not checked: the leader's own reaper pass may run in the same window and
    // delete them first (one run in three on PostgreSQL). What is left is what matters.
    await clock.ahead(91 * DAY, () => t.gantry.gateway.reaper.runOnce());
    expect((await auditLog(t, '?limit=1000')).entries).toEqual([]);
  });
});

describe('GANTRY_AUDIT_KEEP_DAYS', () => {
  it('defaults to 90 days, takes 1-3650, and names itself when wrong', () => {
    expect(loadConfig({}).auditKeepDays).toBe(90);
    expect(loadConfig({ GANTRY_AUDIT_KEEP_DAYS: '7' }).auditKeepDays).toBe(7);
    expect(() => loadConfig({ GANTRY_AUDIT_KEEP_DAYS: '0' })).toThrow(/GANTRY_AUDIT_KEEP_DAYS/);
    expect(() => loadConfig({ GANTRY_AUDIT_KEEP_DAYS: 'ninety' })).toThrow(/GANTRY_AUDIT_KEEP_DAYS/);
  });
});

describe('the audit log service', () => {
  it('writes refused sign-ins at a bounded rate, counting those left out, and cuts an oversized detail to its field names', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'gantry-audit-'));
    const store = createSqliteStore({ file: join(dir, 'g.db') });
    await store.migrate();
    try {
      const clock = createManualClock(1_000_000);
      const audit = createAuditLog({ store, logger: pino({ level: 'silent' }), now: clock.now, anonymousPerMinute: 3 });
      const nobody = { kind: 'anonymous' as const, keyId: null, keyName: null, session: null };
      for (let i = 0; i < 10; i++) await audit.record({ action: 'console.sign-in', outcome: 'failed', actor: nobody, address: `192.0.2.${i}` });
      expect((await audit.list({ limit: 100 })).entries).toHaveLength(3);
      clock.advance(60_000);
      await audit.record({ action: 'console.sign-in', outcome: 'failed', actor: nobody, address: '192.0.2.99' });
      const page = await audit.list({ limit: 100 });
      expect(page.entries).toHaveLength(4);
      expect(page.entries[0]!.detail).toEqual({ notRecordedBefore: 7 });
      // Admin changes are never dropped, whatever the rate.
      const admin = { kind: 'key' as const, keyId: 'k1', keyName: 'ops', session: null };
      for (let i = 0; i < 10; i++) await audit.record({ action: 'endpoint.update', actor: admin, address: '127.0.0.1', target: { kind: 'endpoint', id: 'e' }, detail: { big: 'x'.repeat(i === 9 ? MAX_DETAIL_CHARS : 1) } });
      const updates = (await audit.list({ action: 'endpoint.update', limit: 100 })).entries;
      expect(updates).toHaveLength(10);
      expect(updates[0]!.detail).toEqual({ truncated: true, fields: ['big'] });
    } finally {
      await store.close();
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
