import { createHash, createHmac, randomBytes, timingSafeEqual } from 'node:crypto';
import type { Logger } from 'pino';
import { AppError, invalidParameter } from '../model/errors.js';
import { isObject } from '../model/json.js';
import type { KeyRefusal, KeyService, Principal } from '../security/keys.js';
import { TtlCache } from '../util/ttl-cache.js';
import { keyRefused } from '../http/auth.js';

/** The name of the admin key that password sessions act with (shown on the API keys page). */
export const CONSOLE_PASSWORD_KEY_NAME = 'admin (console password)';

/**
 * The sign-in limits (docs/security.md, "Console sign-in"). Wrong guesses are counted per
 * client address, per account (the console password; admin keys) and per known browser. An
 * address past its free wrong guesses waits before its next password is even checked: the
 * first delay, doubled with each further wrong guess, up to the longest. An account with many
 * wrong guesses from everywhere is under attack: every address then gets fewer free guesses.
 * A right password from an address that is not itself guessing, from a browser that signed
 * in before, and a right admin key from anywhere always sign in.
 */
export interface SignInLimits {
  /** Wrong guesses an address may make before each further one waits. */
  freeFailures: number;
  /** The same while the account is under attack. */
  freeFailuresUnderAttack: number;
  /** Wrong guesses on one account, from all addresses within the window, that put it under attack. */
  attackFailures: number;
  /** The wait after the free guesses; doubled by each further wrong guess, up to maxDelayMs. */
  firstDelayMs: number;
  maxDelayMs: number;
  /** Wrong guesses are forgotten this long after the last one (of the address, browser or account). */
  windowMs: number;
  /** Addresses, and browsers, remembered at once (bounded maps; the oldest go first). */
  maxClients: number;
  /** How long a browser that signed in stays known (its cookie's lifetime). */
  knownBrowserMs: number;
}

/** Defaults: 5 free wrong guesses per address (1 under attack: 20 in 15 minutes), then 1 s, 2 s, … up to 1 minute between guesses. */
export const SIGN_IN_LIMITS: SignInLimits = {
  freeFailures: 5,
  freeFailuresUnderAttack: 1,
  attackFailures: 20,
  firstDelayMs: 1_000,
  maxDelayMs: 60_000,
  windowMs: 15 * 60_000,
  maxClients: 10_000,
  knownBrowserMs: 30 * 86_400_000,
};

/** What signing in uses. */
export interface SignInGuardOptions {
  keys: Pick<KeyService, 'authorize' | 'install' | 'revokeNamed'>;
  /** The console password (GANTRY_CONSOLE_PASSWORD); null: admin keys only. */
  password: string | null;
  /** The gateway's secret key: the password's admin key and the known-browser tokens are derived from it and the password. */
  secretKey: Buffer | null;
  limits?: SignInLimits;
  logger: Logger;
}

/** A sign-in: the body `{key}` or `{password}`, from `address`, with the browser's known-browser token if it has one. */
export interface SignInAttempt {
  address: string;
  body: unknown;
  knownBrowser?: string | undefined;
}

/** A sign-in that passed: the admin key the session acts with and its principal, and a known-browser token to give the browser (null: none). */
export interface SignedIn {
  key: string;
  principal: Principal;
  method: 'key' | 'password';
  /** The browser came with a valid known-browser token. */
  knownBrowser: boolean;
  knownBrowserToken: string | null;
}

/** Checks sign-ins: an admin key, or the console password; limits wrong guesses. */
export interface SignInGuard {
  /** Whether the console password is accepted on this gateway. */
  readonly passwordSignIn: boolean;
  /**
   * Checks a sign-in. Throws 400 naming the field for a bad body; 401 for a wrong key or
   * password; 429 TOO_MANY_SIGN_INS with Retry-After for a wrong guess past the address's free
   * ones, and for a password from an address that must still wait (not checked: checking it
   * would let a guesser learn the answer at any rate).
   */
  verify(attempt: SignInAttempt, now: number): Promise<SignedIn>;
  /** At start: installs the password's admin key (revoking one of an earlier password), or revokes it when no password is set. */
  prepare(): Promise<void>;
}

const sha256 = (text: string): Buffer => createHash('sha256').update(text, 'utf8').digest();

/**
 * The admin key password sessions act with: derived from the gateway's secret key and the
 * password, so every gateway sharing a database and secret key (and password) finds the same
 * key, and a new password means a new key (the old one is revoked by `prepare`). Nobody is ever
 * shown this key; knowing the password alone does not give it.
 */
export function consolePasswordKey(secretKey: Buffer, password: string): string {
  return `gk_console_${createHmac('sha256', secretKey).update('gantry/console-password/v1\0').update(password, 'utf8').digest('base64url')}`;
}

/**
 * @example
 * const guard = createSignInGuard({ keys, password: config.consolePassword, secretKey, logger });
 * const { key } = await guard.verify({ address: '203.0.113.7', body: { password: 'correct horse battery' } }, Date.now());
 */
export function createSignInGuard(options: SignInGuardOptions): SignInGuard {
  return new Guard(options);
}

/** Wrong guesses of one address, browser or account, and when the last was. */
interface Failures {
  count: number;
  lastAt: number;
}

type Account = 'key' | 'password';

class Guard implements SignInGuard {
  readonly passwordSignIn: boolean;
  private readonly limits: SignInLimits;
  /** SHA-256 of the password: only digests are compared, of equal length whatever was typed. */
  private readonly expected: Buffer | null;
  private readonly passwordKey: string | null;
  private readonly keySpec = { name: CONSOLE_PASSWORD_KEY_NAME, scopes: ['admin' as const], endpoints: null };
  private readonly byAddress: TtlCache<string, Failures>;
  private readonly byBrowser: TtlCache<string, Failures>;
  private readonly byAccount = new Map<Account, Failures>();
  private readonly browsers: KnownBrowsers | null;

  constructor(private readonly options: SignInGuardOptions) {
    const { password, secretKey } = options;
    if (password !== null && secretKey === null) throw new Error('a console password needs the gateway secret key');
    this.passwordSignIn = password !== null;
    this.limits = options.limits ?? SIGN_IN_LIMITS;
    this.expected = password === null ? null : sha256(password);
    this.passwordKey = password === null || secretKey === null ? null : consolePasswordKey(secretKey, password);
    this.byAddress = new TtlCache({ ttlMs: this.limits.windowMs, maxEntries: this.limits.maxClients });
    this.byBrowser = new TtlCache({ ttlMs: this.limits.windowMs, maxEntries: this.limits.maxClients });
    // Known browsers matter only where a password is checked; with admin keys alone nothing waits.
    this.browsers = password === null || secretKey === null ? null : new KnownBrowsers(secretKey, password, this.limits.knownBrowserMs);
  }

  async verify(attempt: SignInAttempt, now: number): Promise<SignedIn> {
    const presented = this.parse(attempt.body);
    const browser = this.browsers?.check(attempt.knownBrowser, now) ?? null;
    // A known browser past its own free guesses is known no more until they are forgotten.
    const known = browser !== null && (this.byBrowser.get(browser, now)?.value.count ?? 0) < this.limits.freeFailures;
    const account: Account = 'password' in presented ? 'password' : 'key';
    if (account === 'password' && !known) this.waitOrThrow(attempt.address, now);
    const signedIn = 'password' in presented ? await this.checkPassword(presented.password) : await this.checkKey(presented.key);
    if (typeof signedIn === 'string') {
      this.failed(attempt.address, browser, account, now);
      const waitMs = this.waitOf(attempt.address, now);
      if (waitMs > 0) throw tooMany(`Wrong ${account === 'password' ? 'console password' : 'admin key'}`, waitMs);
      if (signedIn === 'wrong-password') throw new AppError('UNAUTHORIZED', 'Wrong console password');
      throw keyRefused(signedIn, 'admin');
    }
    // A right password that waited its turn clears its address; a key or a known browser, which
    // skip the wait, do not (an attacker sharing the address gains no fresh guesses from them).
    if (account === 'password' && !known) this.byAddress.delete(attempt.address);
    if (browser !== null) this.byBrowser.delete(browser);
    return { ...signedIn, method: account, knownBrowser: known, knownBrowserToken: this.browsers?.issue(now) ?? null };
  }

  async prepare(): Promise<void> {
    if (this.passwordKey !== null) await this.options.keys.install(this.keySpec, this.passwordKey, [CONSOLE_PASSWORD_KEY_NAME]);
    else await this.options.keys.revokeNamed(/^admin \(console password\)$/);
  }

  /** The sign-in body: `{key}` or `{password}`, one of them; 400 naming the field otherwise. */
  private parse(body: unknown): { key: string } | { password: string } {
    const keyProblem = `must be an admin API key${this.passwordSignIn ? ' (or send password)' : ''}`;
    if (!isObject(body)) throw invalidParameter('key', keyProblem);
    const fields = this.passwordSignIn ? 'key or password' : 'key';
    for (const k of Object.keys(body)) if (k !== 'key' && k !== 'password') throw invalidParameter(k, `is not a known field (expected ${fields})`);
    if (body.key !== undefined && body.password !== undefined) throw invalidParameter('password', 'cannot be sent with key: sign in with one of them');
    if (body.password !== undefined) {
      if (typeof body.password !== 'string' || body.password === '') throw invalidParameter('password', 'must be a non-empty string');
      if (!this.passwordSignIn) throw invalidParameter('password', 'is not accepted: no console password is set on this gateway (GANTRY_CONSOLE_PASSWORD)');
      return { password: body.password };
    }
    if (typeof body.key !== 'string' || body.key === '') throw invalidParameter('key', keyProblem);
    return { key: body.key };
  }

  /** The password's session key and principal, or why not. */
  private async checkPassword(password: string): Promise<{ key: string; principal: Principal } | 'wrong-password'> {
    if (this.expected === null || !timingSafeEqual(sha256(password), this.expected)) return 'wrong-password';
    const key = await this.sessionKeyForPassword();
    const outcome = await this.options.keys.authorize(key, 'admin');
    if (!outcome.ok) throw new AppError('UNAUTHORIZED', 'Wrong console password');
    return { key, principal: outcome.principal };
  }

  /** The key and its principal, or why it is refused. */
  private async checkKey(key: string): Promise<{ key: string; principal: Principal } | KeyRefusal> {
    const outcome = await this.options.keys.authorize(key, 'admin');
    return outcome.ok ? { key, principal: outcome.principal } : outcome.refusal;
  }

  /** How long the address must still wait before its next guess is checked (0: not at all). */
  private waitOf(address: string, now: number): number {
    const hit = this.byAddress.get(address, now)?.value;
    if (!hit) return 0;
    const free = this.underAttack('password', now) || this.underAttack('key', now) ? this.limits.freeFailuresUnderAttack : this.limits.freeFailures;
    if (hit.count < free) return 0;
    const delay = Math.min(this.limits.maxDelayMs, this.limits.firstDelayMs * 2 ** Math.min(30, hit.count - free));
    return Math.max(0, hit.lastAt + delay - now);
  }

  /** 429 before checking a password from an address that must still wait. */
  private waitOrThrow(address: string, now: number): void {
    const waitMs = this.waitOf(address, now);
    if (waitMs > 0) throw tooMany('Too many wrong sign-ins from this address', waitMs);
  }

  private underAttack(account: Account, now: number): boolean {
    const hit = this.byAccount.get(account);
    return hit !== undefined && now - hit.lastAt < this.limits.windowMs && hit.count >= this.limits.attackFailures;
  }

  /** Counts a wrong guess of the address, the browser and the account; the log line names the address, never what was typed. */
  private failed(address: string, browser: string | null, account: Account, now: number): void {
    const count = (this.byAddress.get(address, now)?.value.count ?? 0) + 1;
    this.byAddress.set(address, { count, lastAt: now }, now);
    if (browser !== null) this.byBrowser.set(browser, { count: (this.byBrowser.get(browser, now)?.value.count ?? 0) + 1, lastAt: now }, now);
    const hit = this.byAccount.get(account);
    const accountCount = hit !== undefined && now - hit.lastAt < this.limits.windowMs ? hit.count + 1 : 1;
    this.byAccount.set(account, { count: accountCount, lastAt: now });
    this.options.logger.warn({ address, method: account, failures: count, accountFailures: accountCount }, 'console sign-in refused');
  }

  /** The password's key, installed again if someone revoked it (a revocation ends the sessions, not the password). */
  private async sessionKeyForPassword(): Promise<string> {
    const key = this.passwordKey;
    if (key === null) throw new AppError('UNAUTHORIZED', 'Wrong console password');
    if (!(await this.options.keys.authorize(key, 'admin')).ok) await this.options.keys.install(this.keySpec, key, [CONSOLE_PASSWORD_KEY_NAME]);
    return key;
  }
}

/** 429 TOO_MANY_SIGN_INS with Retry-After in whole seconds. */
function tooMany(what: string, waitMs: number): AppError {
  const retryS = Math.max(1, Math.ceil(waitMs / 1000));
  return new AppError('TOO_MANY_SIGN_INS', `${what}: try again in ${retryS} s`, { retryAfterS: retryS }, { 'retry-after': String(retryS) });
}

/** The longest known-browser token read; anything longer is no token. */
const MAX_TOKEN_CHARS = 128;

/**
 * Known browsers: a browser that signed in gets a token (an HttpOnly cookie) naming a random
 * id and the time, signed with a key derived from the secret key and the password, so every
 * gateway of a deployment accepts it and a new password forgets every browser. It holds no
 * session and grants nothing by itself: it only spares its browser the waits other addresses'
 * guesses cause.
 */
class KnownBrowsers {
  private readonly key: Buffer;

  constructor(
    secretKey: Buffer,
    password: string,
    private readonly maxAgeMs: number,
  ) {
    this.key = createHmac('sha256', secretKey).update('gantry/console-known-browser/v1\0').update(password, 'utf8').digest();
  }

  /** A new token for a browser that just signed in. */
  issue(now: number): string {
    const body = `b1.${randomBytes(16).toString('base64url')}.${now.toString(36)}`;
    return `${body}.${this.mac(body)}`;
  }

  /** The browser's id when `token` is one of ours and young enough; null otherwise. */
  check(token: string | undefined, now: number): string | null {
    if (token === undefined || token.length > MAX_TOKEN_CHARS) return null;
    const parts = token.split('.');
    if (parts.length !== 4 || parts[0] !== 'b1') return null;
    const [version, id, issued36, mac] = parts as [string, string, string, string];
    const expected = Buffer.from(this.mac(`${version}.${id}.${issued36}`));
    const given = Buffer.from(mac);
    if (given.length !== expected.length || !timingSafeEqual(given, expected)) return null;
    const issuedAt = parseInt(issued36, 36);
    return Number.isSafeInteger(issuedAt) && issuedAt <= now && now - issuedAt < this.maxAgeMs ? id : null;
  }

  private mac(body: string): string {
    return createHmac('sha256', this.key).update(body).digest('base64url');
  }
}
