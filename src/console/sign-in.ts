import { createHash, createHmac, timingSafeEqual } from 'node:crypto';
import type { Logger } from 'pino';
import { AppError, invalidParameter } from '../model/errors.js';
import { isObject } from '../model/json.js';
import type { KeyService } from '../security/keys.js';
import { TtlCache } from '../util/ttl-cache.js';

/** The name of the admin key that password sessions act with (shown on the API keys page). */
export const CONSOLE_PASSWORD_KEY_NAME = 'admin (console password)';

/** How many failed sign-ins a client address may make, in what window, and how many addresses are tracked. */
export interface SignInLimits {
  maxFailures: number;
  windowMs: number;
  /** Addresses remembered at once; the oldest goes first (a bounded map). */
  maxClients: number;
}

/** Defaults: 10 failed sign-ins per address in 15 minutes, 10,000 addresses. */
export const SIGN_IN_LIMITS: SignInLimits = { maxFailures: 10, windowMs: 15 * 60_000, maxClients: 10_000 };

/** What signing in uses. */
export interface SignInGuardOptions {
  keys: Pick<KeyService, 'authorize' | 'install' | 'revokeNamed'>;
  /** The console password (GANTRY_CONSOLE_PASSWORD); null: admin keys only. */
  password: string | null;
  /** The gateway's secret key: the password's admin key is derived from it and the password. */
  secretKey: Buffer | null;
  limits?: SignInLimits;
  logger: Logger;
}

/** Checks sign-ins: an admin key, or the console password; counts failures per client address. */
export interface SignInGuard {
  /** Whether the console password is accepted on this gateway. */
  readonly passwordSignIn: boolean;
  /**
   * The admin key a new session acts with, for a sign-in body `{key}` or `{password}` from
   * `address`. Throws 400 naming the field for a bad body, 401 for a wrong key or password, 429
   * (Retry-After) once the address has failed too often.
   */
  verify(address: string, body: unknown, now: number): Promise<string>;
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
 * const key = await guard.verify(req.socket.remoteAddress ?? '', { password: 'correct horse battery' }, Date.now());
 */
export function createSignInGuard(options: SignInGuardOptions): SignInGuard {
  return new Guard(options);
}

class Guard implements SignInGuard {
  readonly passwordSignIn: boolean;
  private readonly limits: SignInLimits;
  /** SHA-256 of the password: only digests are compared, of equal length whatever was typed. */
  private readonly expected: Buffer | null;
  private readonly passwordKey: string | null;
  private readonly keySpec = { name: CONSOLE_PASSWORD_KEY_NAME, scopes: ['admin' as const], endpoints: null };
  /** Failures per address, counted from the first failure of the window (the entry's own time). */
  private readonly failures: TtlCache<string, { count: number; since: number }>;

  constructor(private readonly options: SignInGuardOptions) {
    const { password, secretKey } = options;
    if (password !== null && secretKey === null) throw new Error('a console password needs the gateway secret key');
    this.passwordSignIn = password !== null;
    this.limits = options.limits ?? SIGN_IN_LIMITS;
    this.expected = password === null ? null : sha256(password);
    this.passwordKey = password === null || secretKey === null ? null : consolePasswordKey(secretKey, password);
    this.failures = new TtlCache({ ttlMs: this.limits.windowMs, maxEntries: this.limits.maxClients });
  }

  async verify(address: string, body: unknown, now: number): Promise<string> {
    const presented = this.parse(body);
    this.throttle(address, now);
    if ('password' in presented) {
      if (this.expected === null || !timingSafeEqual(sha256(presented.password), this.expected)) {
        this.failed(address, now, 'password');
        throw new AppError('UNAUTHORIZED', 'Wrong console password');
      }
      this.failures.delete(address);
      return this.sessionKeyForPassword();
    }
    try {
      await this.options.keys.authorize(presented.key, 'admin');
    } catch (err) {
      if (err instanceof AppError && err.status === 401) this.failed(address, now, 'key');
      throw err;
    }
    this.failures.delete(address);
    return presented.key;
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

  /** 429 with Retry-After once the address has failed `maxFailures` times in the window. */
  private throttle(address: string, now: number): void {
    const hit = this.failures.get(address, now)?.value;
    if (!hit || hit.count < this.limits.maxFailures) return;
    const retryS = Math.max(1, Math.ceil((hit.since + this.limits.windowMs - now) / 1000));
    throw new AppError('TOO_MANY_SIGN_INS', `Too many failed sign-ins from this address: try again in ${retryS} s`, undefined, { 'retry-after': String(retryS) });
  }

  /** Counts a failure of the address; the log line names the address, never what was typed. */
  private failed(address: string, now: number, how: 'key' | 'password'): void {
    const hit = this.failures.get(address, now)?.value;
    if (hit) hit.count += 1;
    else this.failures.set(address, { count: 1, since: now }, now);
    this.options.logger.warn({ address, method: how, failures: hit?.count ?? 1 }, 'console sign-in refused');
  }

  /** The password's key, installed again if someone revoked it (a revocation ends the sessions, not the password). */
  private async sessionKeyForPassword(): Promise<string> {
    const key = this.passwordKey;
    if (key === null) throw new AppError('UNAUTHORIZED', 'Wrong console password');
    try {
      await this.options.keys.authorize(key, 'admin');
    } catch {
      await this.options.keys.install(this.keySpec, key, [CONSOLE_PASSWORD_KEY_NAME]);
    }
    return key;
  }
}
