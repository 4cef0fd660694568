// The console's server side over real HTTP: the redirect, the page's security headers, sign-in,
// the session cookie, the CSRF check on every state-changing call, sign-out, and the admin /
// client routes reached through the session. Needs `npm run build` (the page is dist/console).
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createSessionTable } from '../../src/console/sessions.js';
import { startTestGantry, type TestGantry } from '../helpers/gantry.js';

let t: TestGantry;

async function signIn(key = t.adminKey): Promise<{ cookie: string; csrf: string; res: Response; text: string }> {
  const res = await fetch(`${t.url}/console/api/session`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ key }) });
  const text = await res.text();
  const cookie = (res.headers.get('set-cookie') ?? '').split(';')[0]!;
  const csrf = res.status === 200 ? ((JSON.parse(text) as { csrfToken: string }).csrfToken) : '';
  return { cookie, csrf, res, text };
}

beforeAll(async () => {
  t = await startTestGantry();
});
afterAll(async () => {
  await t.close();
});

describe('the console page', () => {
  it('GET / redirects to /console/', async () => {
    const res = await fetch(`${t.url}/`, { redirect: 'manual' });
    expect(res.status).toBe(302);
    expect(res.headers.get('location')).toBe('/console/');
  });

  it('serves the page and its bundle with CSP (no inline script), frame-ancestors none and nosniff, and no key in it', async () => {
    const res = await fetch(`${t.url}/console/`);
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toMatch(/^text\/html/);
    const csp = res.headers.get('content-security-policy') ?? '';
    expect(csp).toContain("script-src 'self'");
    expect(csp).toContain("frame-ancestors 'none'");
    expect(csp).not.toContain('unsafe-inline');
    expect(res.headers.get('x-content-type-options')).toBe('nosniff');
    const html = await res.text();
    expect(html).toContain('<script type="module" src="/console/assets/app.js"></script>');
    expect(html).not.toMatch(/<script>|<script type="module">/);
    const js = await fetch(`${t.url}/console/assets/app.js`);
    expect(js.status).toBe(200);
    expect(js.headers.get('content-type')).toMatch(/^text\/javascript/);
    const bundle = await js.text();
    for (const text of [html, bundle]) expect(text).not.toContain(t.adminKey);
    expect((await fetch(`${t.url}/console/assets/nope.js`)).status).toBe(404);
  });
});

describe('the console API', () => {
  it('refuses every call without a session: 401', async () => {
    for (const path of ['admin/endpoints', 'admin/keys', 'v2/echo/health', 'session']) {
      const res = await fetch(`${t.url}/console/api/${path}`);
      expect(res.status, path).toBe(401);
    }
    // An API key sent as a header does not stand in for a session.
    const res = await fetch(`${t.url}/console/api/admin/keys`, { headers: { authorization: `Bearer ${t.adminKey}` } });
    expect(res.status).toBe(401);
  });

  it('signs in only with an admin key, in a JSON body', async () => {
    const runKey = await t.createKey(['run']);
    expect((await signIn(runKey)).res.status).toBe(401);
    expect((await signIn('wrong')).res.status).toBe(401);
    const form = await fetch(`${t.url}/console/api/session`, { method: 'POST', headers: { 'content-type': 'application/x-www-form-urlencoded' }, body: `key=${t.adminKey}` });
    expect(form.status).toBe(415);
    const missing = await fetch(`${t.url}/console/api/session`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{}' });
    expect(missing.status).toBe(400);
    expect(((await missing.json()) as { field: string }).field).toBe('key');
  });

  it('sets an HttpOnly, SameSite=Strict cookie scoped to /console, and answers no key', async () => {
    const { res, text } = await signIn();
    expect(res.status).toBe(200);
    const cookie = res.headers.get('set-cookie') ?? '';
    expect(cookie).toMatch(/^gantry_console=[A-Za-z0-9_-]{40,};/);
    expect(cookie).toContain('HttpOnly');
    expect(cookie).toContain('SameSite=Strict');
    expect(cookie).toContain('Path=/console');
    expect(cookie).not.toContain('Secure');
    expect(text).not.toContain(t.adminKey);
    expect(res.headers.get('cache-control')).toBe('no-store');
  });

  it('needs the CSRF token on every state-changing call: 403 without or with a wrong one', async () => {
    const { cookie, csrf } = await signIn();
    const post = (headers: Record<string, string>) =>
      fetch(`${t.url}/console/api/admin/endpoints`, { method: 'POST', headers: { cookie, 'content-type': 'application/json', ...headers }, body: JSON.stringify({ id: 'csrf-ep' }) });
    expect((await post({})).status).toBe(403);
    expect((await post({ 'x-csrf-token': 'x'.repeat(csrf.length) })).status).toBe(403);
    expect((await fetch(`${t.url}/console/api/session`, { method: 'DELETE', headers: { cookie } })).status).toBe(403);
    expect((await fetch(`${t.url}/admin/v1/endpoints/csrf-ep`, { headers: { authorization: `Bearer ${t.adminKey}` } })).status).toBe(404);
    const ok = await post({ 'x-csrf-token': csrf });
    expect(ok.status).toBe(200);
    expect(((await ok.json()) as { id: string }).id).toBe('csrf-ep');
  });

  it('validates as the admin API does (400 naming the field) and reaches the client routes with the session', async () => {
    const { cookie, csrf } = await signIn();
    const headers = { cookie, 'x-csrf-token': csrf, 'content-type': 'application/json' };
    const bad = await fetch(`${t.url}/console/api/admin/endpoints`, { method: 'POST', headers, body: JSON.stringify({ id: 'bad-ep', workersMax: -1 }) });
    expect(bad.status).toBe(400);
    expect(((await bad.json()) as { field: string }).field).toBe('workersMax');
    await t.createEndpoint('console-echo');
    const run = await fetch(`${t.url}/console/api/v2/console-echo/run`, { method: 'POST', headers, body: JSON.stringify({ input: { a: 1 } }) });
    expect(run.status).toBe(200);
    const { id } = (await run.json()) as { id: string };
    const status = await fetch(`${t.url}/console/api/v2/console-echo/status/${id}`, { headers: { cookie } });
    expect(((await status.json()) as { status: string; input: unknown })).toMatchObject({ status: 'IN_QUEUE', input: { a: 1 } });
    const cancel = await fetch(`${t.url}/console/api/v2/console-echo/cancel/${id}`, { method: 'POST', headers: { cookie } });
    expect(cancel.status).toBe(403);
  });

  it('ends the previous session of a browser that signs in again', async () => {
    const first = await signIn();
    const again = await fetch(`${t.url}/console/api/session`, { method: 'POST', headers: { cookie: first.cookie, 'content-type': 'application/json' }, body: JSON.stringify({ key: t.adminKey }) });
    expect(again.status).toBe(200);
    expect((await fetch(`${t.url}/console/api/session`, { headers: { cookie: first.cookie } })).status).toBe(401);
    const second = (again.headers.get('set-cookie') ?? '').split(';')[0]!;
    expect((await fetch(`${t.url}/console/api/session`, { headers: { cookie: second } })).status).toBe(200);
  });

  it('signs out: the cookie is cleared and the session no longer works', async () => {
    const { cookie, csrf } = await signIn();
    expect((await fetch(`${t.url}/console/api/session`, { headers: { cookie } })).status).toBe(200);
    const out = await fetch(`${t.url}/console/api/session`, { method: 'DELETE', headers: { cookie, 'x-csrf-token': csrf } });
    expect(out.status).toBe(200);
    expect(out.headers.get('set-cookie')).toContain('Max-Age=0');
    expect((await fetch(`${t.url}/console/api/admin/keys`, { headers: { cookie } })).status).toBe(401);
  });

  it('ends the sessions of a revoked admin key', async () => {
    const created = await (await fetch(`${t.url}/admin/v1/keys`, { method: 'POST', headers: { authorization: `Bearer ${t.adminKey}`, 'content-type': 'application/json' }, body: JSON.stringify({ name: 'second admin', scopes: ['admin'] }) })).json() as { id: string; key: string };
    const { cookie } = await signIn(created.key);
    expect((await fetch(`${t.url}/console/api/admin/keys`, { headers: { cookie } })).status).toBe(200);
    await fetch(`${t.url}/admin/v1/keys/${created.id}`, { method: 'DELETE', headers: { authorization: `Bearer ${t.adminKey}` } });
    expect((await fetch(`${t.url}/console/api/admin/keys`, { headers: { cookie } })).status).toBe(401);
  });
});

describe('the session table', () => {
  it('is bounded: the least recently used session goes when the cap is reached', () => {
    const table = createSessionTable({ maxSessions: 2, idleMs: 1_000, maxAgeMs: 10_000 });
    const a = table.open('k', 0);
    const b = table.open('k', 1);
    expect(table.get(a.id, 2)).toBeDefined(); // a is now the most recently used
    table.open('k', 3);
    expect(table.size).toBe(2);
    expect(table.get(b.id, 4)).toBeUndefined();
    expect(table.get(a.id, 4)).toBeDefined();
  });

  it('expires sessions idle too long or too old', () => {
    const table = createSessionTable({ maxSessions: 10, idleMs: 1_000, maxAgeMs: 5_000 });
    const a = table.open('k', 0);
    expect(table.get(a.id, 999)).toBeDefined();
    expect(table.get(a.id, 2_000)).toBeUndefined();
    const b = table.open('k', 0);
    for (let now = 900; now < 5_000; now += 900) expect(table.get(b.id, now)).toBeDefined();
    expect(table.get(b.id, 5_000)).toBeUndefined();
  });
});

describe('the session cookie behind TLS', () => {
  it('is Secure when GANTRY_PUBLIC_URL is https', async () => {
    const tls = await startTestGantry({ publicUrl: 'https://gantry.example' });
    try {
      const res = await fetch(`${tls.url}/console/api/session`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ key: tls.adminKey }) });
      expect(res.headers.get('set-cookie')).toContain('; Secure');
    } finally {
      await tls.close();
    }
  });
});

describe('the npm package', () => {
  it('ships the built console bundle', async () => {
    const { stdout } = await promisify(execFile)('npm', ['pack', '--dry-run', '--json', '--ignore-scripts'], { cwd: new URL('../..', import.meta.url) });
    const files = (JSON.parse(stdout) as { files: { path: string }[] }[])[0]!.files.map((f) => f.path);
    for (const file of ['dist/console/index.html', 'dist/console/app.js', 'dist/console/app.css']) expect(files, file).toContain(file);
    expect(files.filter((f) => f.startsWith('src/console/'))).toEqual([]);
  }, 60_000);
});
