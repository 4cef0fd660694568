// Console sign-in limits that never lock out the right credentials (issue 25, item 5) over real
// HTTP, with the gateway's clock standing still unless the test moves it: an attacker's 100
// wrong guesses from one address, and from 100 addresses, are slowed (429 with Retry-After) while
// the right password from elsewhere, from a browser that signed in before, and a right admin key
// from the attacker's very address all sign in. Addresses come from X-Forwarded-For of a trusted
// proxy only. The guard's maps stay bounded.
import { request } from 'node:http';
import { pino } from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createSignInGuard, SIGN_IN_LIMITS } from '../../src/console/sign-in.js';
import { createManualClock } from '../helpers/clock.js';
import { startTestGantry, type TestGantry } from '../helpers/gantry.js';

const PASSWORD = 'the right console password';

interface Answer {
  status: number;
  json: Record<string, unknown>;
  retryAfter: number | null;
  cookies: string[];
}

/** POST /console/api/session through the "proxy" 127.0.0.1, for the client `from` (X-Forwarded-For). */
function signIn(t: TestGantry, body: unknown, from?: string, cookie?: string): Promise<Answer> {
  const url = new URL('/console/api/session', t.url);
  const text = JSON.stringify(body);
  const headers: Record<string, string | number> = { 'content-type': 'application/json', 'content-length': Buffer.byteLength(text) };
  if (from) headers['x-forwarded-for'] = from;
  if (cookie) headers.cookie = cookie;
  return new Promise((resolve, reject) => {
    const req = request({ host: url.hostname, port: url.port, path: url.pathname, method: 'POST', headers }, (res) => {
      let data = '';
      res.setEncoding('utf8').on('data', (c: string) => (data += c));
      res.on('end', () =>
        resolve({
          status: res.statusCode ?? 0,
          json: data === '' ? {} : (JSON.parse(data) as Record<string, unknown>),
          retryAfter: res.headers['retry-after'] === undefined ? null : Number(res.headers['retry-after']),
          cookies: [res.headers['set-cookie'] ?? []].flat().map((c) => c.split(';')[0]!),
        }),
      );
    });
    req.on('error', reject);
    req.end(text);
  });
}

const knownBrowserOf = (a: Answer): string => a.cookies.find((c) => c.startsWith('gantry_console_browser='))!;

describe('console sign-in limits that never lock out the right credentials', () => {
  const clock = createManualClock();
  let t: TestGantry;
  beforeAll(async () => {
    t = await startTestGantry({ consolePassword: PASSWORD, trustedProxies: ['127.0.0.1'] }, { clock });
  }, 30_000);
  afterAll(async () => {
    await t?.close();
  });

  it('100 wrong guesses from one address are slowed; the right password elsewhere, a known browser there, and a right admin key there all sign in', async () => {
    const attacker = '203.0.113.66';
    // A browser that signed in from the attacker's address before the attack (an office behind one NAT).
    const earlier = await signIn(t, { password: PASSWORD }, attacker);
    expect(earlier.status).toBe(200);
    const known = knownBrowserOf(earlier);
    expect(known).toMatch(/^gantry_console_browser=b1\./);

    const answers: number[] = [];
    const waits: number[] = [];
    for (let i = 0; i < 100; i++) {
      const a = await signIn(t, { password: `wrong guess ${i}` }, attacker);
      answers.push(a.status);
      if (a.status === 429) {
        expect(a.json.code).toBe('TOO_MANY_SIGN_INS');
        expect(a.retryAfter).toBeGreaterThan(0);
        waits.push(a.retryAfter!);
      }
      // Half the attacker's tries come before its wait is over: refused unchecked.
      if (i % 2 === 1 && i < 99 && a.retryAfter !== null) clock.advance(a.retryAfter * 1000);
    }
    expect(answers.slice(0, 4)).toEqual([401, 401, 401, 401]);
    expect(answers.slice(4).every((s) => s === 429)).toBe(true);
    // The wait grows with the wrong guesses, up to a minute.
    expect(Math.max(...waits)).toBe(SIGN_IN_LIMITS.maxDelayMs / 1000);
    expect(waits[0]).toBeLessThan(Math.max(...waits));

    // The right password from another address signs in at once.
    expect((await signIn(t, { password: PASSWORD }, '198.51.100.7')).status).toBe(200);
    // From the attacker's address, a browser that signed in before signs in at once…
    expect((await signIn(t, { password: PASSWORD }, attacker, known)).status).toBe(200);
    // …and so does a right admin key from any browser (keys are always checked).
    expect((await signIn(t, { key: t.adminKey }, attacker)).status).toBe(200);
    // A new browser at the attacker's address waits like the attacker, then signs in.
    const waiting = await signIn(t, { password: PASSWORD }, attacker);
    expect(waiting.status).toBe(429);
    clock.advance(waiting.retryAfter! * 1000);
    expect((await signIn(t, { password: PASSWORD }, attacker)).status).toBe(200);
  });

  it('100 wrong guesses from 100 addresses put the password under attack: each address gets one free guess, and the right password still signs in', async () => {
    clock.advance(SIGN_IN_LIMITS.windowMs); // the first test's guesses are forgotten
    const statuses: number[] = [];
    for (let i = 0; i < 100; i++) statuses.push((await signIn(t, { password: `spread guess ${i}` }, `192.0.2.${i + 1}`)).status);
    expect(statuses.filter((s) => s === 401).length).toBeGreaterThan(0);
    // Past attackFailures wrong guesses the account is under attack: each address's first wrong guess already starts its wait.
    expect(statuses.slice(SIGN_IN_LIMITS.attackFailures).every((s) => s === 429)).toBe(true);
    // A second guess from an attacking address is refused before it is checked.
    const again = await signIn(t, { password: 'second guess' }, '192.0.2.50');
    expect(again.status).toBe(429);
    expect(again.retryAfter).toBeGreaterThan(0);
    // The operator, from an address of their own, signs in at once.
    expect((await signIn(t, { password: PASSWORD }, '198.51.100.8')).status).toBe(200);
    expect((await signIn(t, { key: t.adminKey }, '192.0.2.50')).status).toBe(200);
  });

  it('believes X-Forwarded-For only from a trusted proxy: without one, every guess counts for the peer', async () => {
    const u = await startTestGantry({ consolePassword: PASSWORD }, { clock });
    try {
      const statuses: number[] = [];
      for (let i = 0; i < 6; i++) statuses.push((await signIn(u, { password: `guess ${i}` }, `192.0.2.${100 + i}`)).status);
      expect(statuses).toEqual([401, 401, 401, 401, 429, 429]);
    } finally {
      await u.close();
    }
  });

  it('refuses a forged or tampered known-browser token, and forgets a known browser that guesses wrong too often', async () => {
    clock.advance(SIGN_IN_LIMITS.windowMs);
    const address = '203.0.113.90';
    const first = await signIn(t, { password: PASSWORD }, address);
    const known = knownBrowserOf(first);
    const tampered = `${known.slice(0, -2)}${known.endsWith('AA') ? 'BB' : 'AA'}`;
    for (let i = 0; i < 5; i++) await signIn(t, { password: `typo ${i}` }, address, tampered);
    // The tampered token is no token: the address waits.
    expect((await signIn(t, { password: PASSWORD }, address, tampered)).status).toBe(429);
    expect((await signIn(t, { password: PASSWORD }, address, 'gantry_console_browser=b1.forged.0.mac')).status).toBe(429);
    // The real one is spared the wait…
    expect((await signIn(t, { password: PASSWORD }, address, known)).status).toBe(200);
    // …until it guesses wrong five times itself.
    clock.advance(SIGN_IN_LIMITS.windowMs);
    for (let i = 0; i < 5; i++) await signIn(t, { password: `browser typo ${i}` }, address, known);
    expect((await signIn(t, { password: PASSWORD }, address, known)).status).toBe(429);
  });
});

describe('the sign-in guard', () => {
  it('keeps bounded maps of addresses: the oldest is forgotten first', async () => {
    const t = await startTestGantry();
    try {
      const limits = { ...SIGN_IN_LIMITS, freeFailures: 2, maxClients: 2 };
      const guard = createSignInGuard({ keys: t.gantry.gateway.keys, password: PASSWORD, secretKey: Buffer.alloc(32, 1), limits, logger: pino({ level: 'silent' }) });
      const fail = (address: string) => guard.verify({ address, body: { password: 'not the password' } }, 1_000).then(() => 200, (err: { status: number }) => err.status);
      expect([await fail('a'), await fail('a')]).toEqual([401, 429]);
      expect(await fail('a')).toBe(429);
      // Two more addresses push `a` out of the map: its count starts over.
      await fail('b');
      await fail('c');
      expect(await fail('a')).toBe(401);
      // Once its wait is over, a limited address's right password signs in.
      expect(await fail('c')).toBe(429);
      expect((await guard.verify({ address: 'c', body: { password: PASSWORD } }, 1_000 + SIGN_IN_LIMITS.maxDelayMs)).key).toMatch(/^gk_console_/);
    } finally {
      await t.close();
    }
  });
});
