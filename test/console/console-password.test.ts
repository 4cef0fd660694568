// Console sign-in with a password (GANTRY_CONSOLE_PASSWORD / GANTRY_CONSOLE_PASSWORD_FILE) over
// real HTTP: an admin session from the password, admin keys still accepted, bad bodies named,
// wrong guesses slowed per client address (test/console/sign-in-limits.test.ts has the rest), the password's admin key
// installed, rotated and revoked with the setting, and the password never in a log line.
import { request } from 'node:http';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Writable } from 'node:stream';
import { pino } from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/config/config.js';
import { CONSOLE_PASSWORD_KEY_NAME, createSignInGuard } from '../../src/console/sign-in.js';
import { startTestGantry, type TestGantry } from '../helpers/gantry.js';

const PASSWORD = 'correct horse battery staple';

interface Answer { status: number; json: Record<string, unknown>; text: string; headers: Record<string, string | string[] | undefined> }

/** POST /console/api/session from a chosen local address (127.0.0.x), so the gateway sees different clients. */
function signIn(t: TestGantry, body: unknown, from = '127.0.0.1'): Promise<Answer> {
  const url = new URL('/console/api/session', t.url);
  const text = JSON.stringify(body);
  return new Promise((resolve, reject) => {
    const req = request({ host: url.hostname, port: url.port, path: url.pathname, method: 'POST', localAddress: from, headers: { 'content-type': 'application/json', 'content-length': Buffer.byteLength(text) } }, (res) => {
      let data = '';
      res.setEncoding('utf8').on('data', (c: string) => (data += c));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, json: data === '' ? {} : (JSON.parse(data) as Record<string, unknown>), text: data, headers: res.headers }));
    });
    req.on('error', reject);
    req.end(text);
  });
}

const cookieOf = (a: Answer): string => String([a.headers['set-cookie']].flat()[0] ?? '').split(';')[0]!;

async function keyNames(t: TestGantry): Promise<string[]> {
  const res = await fetch(`${t.url}/admin/v1/keys`, { headers: { authorization: `Bearer ${t.adminKey}` } });
  return ((await res.json()) as { keys: { name: string }[] }).keys.map((k) => k.name);
}

describe('sign-in with the console password', () => {
  let t: TestGantry;
  beforeAll(async () => {
    t = await startTestGantry({ consolePassword: PASSWORD });
  });
  afterAll(async () => {
    await t?.close();
  });

  it('tells the sign-in page that a password is accepted', async () => {
    const res = await fetch(`${t.url}/console/api/session`);
    expect(res.status).toBe(401);
    expect(await res.json()).toMatchObject({ code: 'UNAUTHORIZED', passwordSignIn: true });
  });

  it('gives an admin session for the password, and the session works with its CSRF token', async () => {
    const ok = await signIn(t, { password: PASSWORD });
    expect(ok.status).toBe(200);
    expect(ok.json).toMatchObject({ signedIn: true });
    expect(ok.text).not.toContain(PASSWORD);
    expect(ok.text).not.toContain('gk_');
    const cookie = cookieOf(ok);
    expect(cookie).toMatch(/^gantry_console=/);
    const keys = await fetch(`${t.url}/console/api/admin/keys`, { headers: { cookie } });
    expect(keys.status).toBe(200);
    const listed = await keys.text();
    expect(listed).toContain(CONSOLE_PASSWORD_KEY_NAME);
    expect(listed).not.toContain(PASSWORD);
    const created = await fetch(`${t.url}/console/api/admin/endpoints`, {
      method: 'POST',
      headers: { cookie, 'x-csrf-token': ok.json.csrfToken as string, 'content-type': 'application/json' },
      body: JSON.stringify({ id: 'by-password' }),
    });
    expect(created.status).toBe(200);
  });

  it('refuses a wrong password with 401, and still accepts an admin key', async () => {
    const wrong = await signIn(t, { password: `${PASSWORD}!` }, '127.0.0.3');
    expect(wrong.status).toBe(401);
    expect(wrong.json.code).toBe('UNAUTHORIZED');
    const byKey = await signIn(t, { key: t.adminKey }, '127.0.0.3');
    expect(byKey.status).toBe(200);
  });

  it('names the field of a bad sign-in body (400)', async () => {
    const cases: [unknown, string][] = [
      [{}, 'key'],
      [{ password: 12345678901234 }, 'password'],
      [{ password: '' }, 'password'],
      [{ key: t.adminKey, password: PASSWORD }, 'password'],
      [{ pasword: PASSWORD }, 'pasword'],
    ];
    for (const [body, field] of cases) {
      const r = await signIn(t, body, '127.0.0.4');
      expect(r.status, JSON.stringify(body)).toBe(400);
      expect(r.json.field, JSON.stringify(body)).toBe(field);
    }
  });

  it('slows wrong guesses per client address (429 with Retry-After) without refusing the right admin key there, nor the password elsewhere', async () => {
    const from = '127.0.0.5';
    for (let i = 0; i < 4; i++) expect((await signIn(t, { password: `wrong ${i} password` }, from)).status).toBe(401);
    // Wrong keys count too: the fifth wrong guess starts a wait, and is answered 429 with it.
    const limited = await signIn(t, { key: 'wrong-key-0' }, from);
    expect(limited.status).toBe(429);
    expect(limited.json.code).toBe('TOO_MANY_SIGN_INS');
    expect(Number(limited.headers['retry-after'])).toBeGreaterThan(0);
    // A right admin key is always checked, and signs in.
    expect((await signIn(t, { key: t.adminKey }, from)).status).toBe(200);
    expect((await signIn(t, { password: PASSWORD }, '127.0.0.6')).status).toBe(200);
  });
});

describe('a gateway without a console password', () => {
  let t: TestGantry;
  beforeAll(async () => {
    t = await startTestGantry();
  });
  afterAll(async () => {
    await t?.close();
  });

  it('offers no password and refuses one with 400 naming the field', async () => {
    const res = await fetch(`${t.url}/console/api/session`);
    expect(await res.json()).toMatchObject({ passwordSignIn: false });
    const r = await signIn(t, { password: PASSWORD });
    expect(r.status).toBe(400);
    expect(r.json.field).toBe('password');
    expect((await signIn(t, { key: t.adminKey })).status).toBe(200);
  });
});

describe("the password's admin key follows the setting across restarts", () => {
  const dataDir = mkdtempSync(join(tmpdir(), 'gantry-console-password-'));
  afterAll(() => rmSync(dataDir, { recursive: true, force: true }));

  it('is installed with a password, replaced when the password changes, and revoked when it is removed', async () => {
    const start = (consolePassword: string | null) => startTestGantry({ consolePassword }, { dataDir });
    let t = await start(PASSWORD);
    expect((await keyNames(t)).filter((n) => n === CONSOLE_PASSWORD_KEY_NAME)).toHaveLength(1);
    const first = await signIn(t, { password: PASSWORD });
    expect(first.status).toBe(200);
    await t.close();

    t = await start('another long password');
    expect((await keyNames(t)).filter((n) => n === CONSOLE_PASSWORD_KEY_NAME)).toHaveLength(1);
    expect((await signIn(t, { password: PASSWORD })).status).toBe(401);
    expect((await signIn(t, { password: 'another long password' })).status).toBe(200);
    await t.close();

    t = await start(null);
    expect(await keyNames(t)).not.toContain(CONSOLE_PASSWORD_KEY_NAME);
    await t.close();
  }, 30_000);
});

describe('the sign-in guard', () => {
  it('never writes the password, right or wrong, to the log', async () => {
    let logged = '';
    const sink = new Writable({ write: (chunk: Buffer, _enc, done) => ((logged += chunk.toString()), done()) });
    const t = await startTestGantry();
    try {
      const guard = createSignInGuard({ keys: t.gantry.gateway.keys, password: PASSWORD, secretKey: Buffer.alloc(32, 1), logger: pino({ level: 'trace' }, sink) });
      const typo = `${PASSWORD}x`;
      await guard.verify({ address: '127.0.0.9', body: { password: typo } }, 1_000).catch(() => undefined);
      await guard.verify({ address: '127.0.0.9', body: { password: PASSWORD } }, 1_000);
      expect(logged).toContain('console sign-in refused');
      expect(logged).not.toContain(PASSWORD);
    } finally {
      await t.close();
    }
  });
});

describe('GANTRY_CONSOLE_PASSWORD settings', () => {
  it('reads the password from a file (one trailing newline dropped), refuses both at once, short ones, and never quotes it', () => {
    const dir = mkdtempSync(join(tmpdir(), 'gantry-pw-'));
    try {
      const file = join(dir, 'password');
      writeFileSync(file, `${PASSWORD}\n`);
      expect(loadConfig({ GANTRY_CONSOLE_PASSWORD_FILE: file }).consolePassword).toBe(PASSWORD);
      expect(loadConfig({ GANTRY_CONSOLE_PASSWORD: PASSWORD }).consolePassword).toBe(PASSWORD);
      expect(loadConfig({}).consolePassword).toBeNull();
      expect(() => loadConfig({ GANTRY_CONSOLE_PASSWORD: PASSWORD, GANTRY_CONSOLE_PASSWORD_FILE: file })).toThrow(/GANTRY_CONSOLE_PASSWORD_FILE/);
      expect(() => loadConfig({ GANTRY_CONSOLE_PASSWORD: 'short-pass' })).toThrow(/^Invalid GANTRY_CONSOLE_PASSWORD: use at least 12 characters$/);
      expect(() => loadConfig({ GANTRY_CONSOLE_PASSWORD_FILE: join(dir, 'missing') })).toThrow(/GANTRY_CONSOLE_PASSWORD_FILE.*cannot read it \(ENOENT\)/);
      writeFileSync(file, 'tiny\n');
      expect(() => loadConfig({ GANTRY_CONSOLE_PASSWORD_FILE: file })).toThrow(/^Invalid GANTRY_CONSOLE_PASSWORD_FILE: use at least 12 characters$/);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
