import { createHash, randomBytes, randomUUID, timingSafeEqual } from 'node:crypto';
import { invalidParameter } from '../model/errors.js';
import { usdNumber } from '../model/money.js';
import type { BudgetPeriod, KeyRecord, Scope } from '../model/records.js';
import type { KeyStore } from '../store/store.js';
import { TtlCache } from '../util/ttl-cache.js';

/** Every scope a key may have (docs/api.md, API keys). */
export const SCOPES: readonly Scope[] = ['admin', 'run', 'read', 'worker'];

/** What each scope grants: admin ⊇ run ⊇ read; worker is separate (docs/security.md). */
const GRANTS: Record<Scope, readonly Scope[]> = {
  admin: ['admin', 'run', 'read'],
  run: ['run', 'read'],
  read: ['read'],
  worker: ['worker'],
};

/** How long a key lookup is cached; a deleted key stops working at once on the gateway that deleted it. */
const CACHE_MS = 5_000;
const CACHE_MAX = 10_000;
/**
 * Bytes the key cache may hold by its estimate (the presented key, which a request sends, plus
 * a record's share): up to MAX_KEY_CHARS-long random keys fill it at about 3,700 entries, not 10,000.
 */
export const KEY_CACHE_MAX_BYTES = 4_000_000;
/** Longest key text looked up; anything longer is refused before hashing. */
const MAX_KEY_CHARS = 512;

/** Who is calling: the key's id, scopes and endpoint restriction. */
export interface Principal {
  keyId: string;
  /** The key's name, for the audit log (who made a change). */
  keyName: string;
  scopes: Scope[];
  endpoints: string[] | null;
}

/** What a new key is: a name, its scopes and (optionally) the endpoints it is limited to. */
export interface KeySpec {
  name: string;
  scopes: Scope[];
  endpoints: string[] | null;
  /** Made and revoked by the gateway itself (a pool worker's own key): revoking it by hand needs force. */
  managed?: boolean;
}

/** A key as the admin API shows it; `key` (the secret itself) only in the answer that created it. */
export interface KeyView {
  id: string;
  name: string;
  scopes: Scope[];
  endpoints: string[] | null;
  createdAt: string;
  /** USD the key may spend per budgetPeriod (docs/api.md, "Budgets and quotas"); null: no budget. */
  budgetUsd: number | null;
  budgetPeriod: BudgetPeriod | null;
  /** Queued + running jobs the key may have at once; null: no cap. */
  maxConcurrentJobs: number | null;
  /** The key's first characters, to recognise it by (null: made before they were kept). */
  prefix: string | null;
  /** When it was last used (ISO text; written at most once a minute per gateway); null: not since prefixes were kept. */
  lastUsedAt: string | null;
  /** Made by the gateway (a pool worker's own key): DELETE refuses it without `?force=true`. */
  managed: boolean;
}

/** A key's budget and job cap as set through the admin API (units of 1e-10 USD). */
export type KeyLimitsChange = Pick<KeyRecord, 'budgetUnits' | 'budgetPeriod' | 'maxConcurrentJobs'>;

/** API keys: made here, stored as SHA-256 digests, looked up and checked for every request. */
export interface KeyService {
  /** Creates a key; the plain key is returned only here (`key` given: install that text, e.g. GANTRY_ADMIN_KEY). */
  create(spec: KeySpec, key?: string): Promise<KeyView & { key: string }>;
  /**
   * Installs `key` (GANTRY_ADMIN_KEY) as the one key of the bootstrap names: every key named in
   * `replaces` with other text is deleted (a rotated value revokes the old one), and `key` is
   * created under `spec` unless it exists. Returns how many old keys were deleted.
   */
  install(spec: KeySpec, key: string, replaces: readonly string[]): Promise<number>;
  /** True when a key with exactly this text exists. */
  exists(key: string): Promise<boolean>;
  list(): Promise<KeyView[]>;
  /** The key as stored now; undefined when there is none. */
  get(id: string): Promise<KeyRecord | undefined>;
  /** Sets a key's budget and job cap; the key as stored now, or undefined when there is none. */
  setLimits(id: string, limits: KeyLimitsChange): Promise<KeyRecord | undefined>;
  /** Deletes a key; false when there is none with that id. Takes effect at once on this gateway. */
  revoke(id: string): Promise<boolean>;
  /** Deletes every key whose name matches (keys a killed gateway left behind); returns how many. */
  revokeNamed(pattern: RegExp): Promise<number>;
  countWithScope(scope: Scope): Promise<number>;
  /**
   * The principal of a presented key, checked for `scope` (and `endpointId`, when given), or
   * why it is refused: unknown, lacking the scope, an endpoint-limited key on the admin API, or
   * not allowed on the endpoint (http/auth.ts answers each with its 401).
   */
  authorize(rawKey: string, scope: Scope, endpointId?: string): Promise<Authorization>;
}

/** Why a presented key is refused. */
export type KeyRefusal = 'unknown-key' | 'lacks-scope' | 'admin-limited-to-endpoints' | 'not-on-endpoint';

/** The outcome of KeyService.authorize. */
export type Authorization = { ok: true; principal: Principal } | { ok: false; refusal: KeyRefusal };

/** SHA-256 hex digest: how API keys are stored and looked up. */
export function sha256Hex(text: string): string {
  return createHash('sha256').update(text).digest('hex');
}

/** Constant-time comparison of two hex digests of equal length. */
export function sameDigest(a: string, b: string): boolean {
  const x = Buffer.from(a, 'hex');
  const y = Buffer.from(b, 'hex');
  return x.length === y.length && timingSafeEqual(x, y);
}

/** How often a key's lastUsedAt is written at most (per gateway): often enough to read, never a write per request. */
export const KEY_LAST_USED_GAP_MS = 60_000;

/**
 * The part of a key kept in the clear to recognise it by: its first 8 characters (`gk_` and 5
 * random ones, 30 bits of 256), fewer for a short key set by hand (a quarter of it at most).
 *
 * @example keyPrefix('gk_AbCdEfGh...') // 'gk_AbCdE'
 */
export function keyPrefix(key: string): string {
  return key.slice(0, Math.min(8, Math.floor(key.length / 4)));
}

/** A new API key: a recognisable prefix and 32 random bytes. */
export function generateApiKey(): string {
  return `gk_${randomBytes(32).toString('base64url')}`;
}

/** The key as the admin API shows it (never its hash or text). */
export function renderKey(key: KeyRecord): KeyView {
  return {
    id: key.id,
    name: key.name,
    scopes: key.scopes,
    endpoints: key.endpoints,
    createdAt: new Date(key.createdAt).toISOString(),
    budgetUsd: key.budgetUnits === null ? null : usdNumber(BigInt(key.budgetUnits)),
    budgetPeriod: key.budgetPeriod,
    maxConcurrentJobs: key.maxConcurrentJobs,
    prefix: key.prefix,
    lastUsedAt: key.lastUsedAt === null ? null : new Date(key.lastUsedAt).toISOString(),
    managed: key.managed,
  };
}

/**
 * Why a key spec is refused, or null. An admin key manages every endpoint (it can create keys,
 * change any endpoint's worker command, read all usage), so it may not be limited to endpoints:
 * a limit would only look like one (docs/security.md). Only an unrestricted admin key reaches
 * the admin API, so no key can create a key broader than itself.
 */
export function keySpecRefusal(spec: Pick<KeySpec, 'scopes' | 'endpoints'>): string | null {
  if (spec.endpoints !== null && spec.scopes.includes('admin')) return 'cannot limit an admin key to endpoints (an admin key manages every endpoint)';
  return null;
}

/** True when a key with `scopes` is allowed what `scope` needs. */
export function grants(scopes: readonly Scope[], scope: Scope): boolean {
  return scopes.some((s) => GRANTS[s].includes(scope));
}

/**
 * @example
 * const keys = createKeyService({ store, now: Date.now });
 * const { key } = await keys.create({ name: 'ci', scopes: ['run'], endpoints: ['echo'] });
 * await keys.authorize(key, 'run', 'echo'); // { ok: true, principal: { keyId, scopes: ['run'], endpoints: ['echo'] } }
 */
export function createKeyService(deps: { store: KeyStore; now: () => number }): KeyService {
  return new Keys(deps.store, deps.now);
}

class Keys implements KeyService {
  // Keyed by the presented key itself, so a cached request skips hashing too. Kept in memory
  // only, never logged, and gone within CACHE_MS of a deletion on another gateway.
  private readonly cache = new TtlCache<string, KeyRecord | undefined>({
    ttlMs: CACHE_MS,
    maxEntries: CACHE_MAX,
    maxBytes: KEY_CACHE_MAX_BYTES,
    sizeOf: (key, record) => 2 * key.length + 96 + (record ? 512 : 0),
  });

  constructor(
    private readonly store: KeyStore,
    private readonly now: () => number,
  ) {}

  async create(spec: KeySpec, key = generateApiKey()): Promise<KeyView & { key: string }> {
    const refusal = keySpecRefusal(spec);
    if (refusal) throw invalidParameter('endpoints', refusal);
    const record: KeyRecord = {
      id: randomUUID(),
      name: spec.name,
      hash: sha256Hex(key),
      scopes: spec.scopes,
      endpoints: spec.endpoints,
      createdAt: this.now(),
      budgetUnits: null,
      budgetPeriod: null,
      maxConcurrentJobs: null,
      prefix: keyPrefix(key),
      lastUsedAt: null,
      managed: spec.managed === true,
    };
    await this.store.createKey(record);
    this.cache.delete(key);
    return { ...renderKey(record), key };
  }

  async install(spec: KeySpec, key: string, replaces: readonly string[]): Promise<number> {
    const hash = sha256Hex(key);
    const stale = (await this.store.listKeys()).filter((k) => replaces.includes(k.name) && !sameDigest(k.hash, hash));
    for (const old of stale) await this.store.deleteKey(old.id);
    if (stale.length > 0) this.cache.clear();
    if (!(await this.exists(key))) {
      try {
        await this.create(spec, key);
      } catch (err) {
        // Gateways of one store starting together install the same key: the one that lost the race finds it stored.
        if (!(await this.exists(key))) throw err;
      }
    }
    return stale.length;
  }

  async exists(key: string): Promise<boolean> {
    return (await this.store.getKeyByHash(sha256Hex(key))) !== undefined;
  }

  async list(): Promise<KeyView[]> {
    return (await this.store.listKeys()).map(renderKey);
  }

  get(id: string): Promise<KeyRecord | undefined> {
    return this.store.getKey(id);
  }

  async setLimits(id: string, limits: KeyLimitsChange): Promise<KeyRecord | undefined> {
    // The checks read limits through KeyQuotas (its own cache), not through this key cache.
    return this.store.updateKeyLimits({ id, ...limits });
  }

  async revoke(id: string): Promise<boolean> {
    const deleted = await this.store.deleteKey(id);
    if (deleted) this.cache.clear();
    return deleted;
  }

  async revokeNamed(pattern: RegExp): Promise<number> {
    const stale = (await this.store.listKeys()).filter((k) => pattern.test(k.name));
    for (const key of stale) await this.store.deleteKey(key.id);
    if (stale.length > 0) this.cache.clear();
    return stale.length;
  }

  countWithScope(scope: Scope): Promise<number> {
    return this.store.countKeysWithScope(scope);
  }

  async authorize(rawKey: string, scope: Scope, endpointId?: string): Promise<Authorization> {
    if (rawKey === '' || rawKey.length > MAX_KEY_CHARS) return { ok: false, refusal: 'unknown-key' };
    const key = await this.lookup(rawKey);
    if (!key) return { ok: false, refusal: 'unknown-key' };
    if (!grants(key.scopes, scope)) return { ok: false, refusal: 'lacks-scope' };
    // An admin key stored with an endpoint limit (made before such keys were refused) is no admin.
    if (scope === 'admin' && key.endpoints !== null) return { ok: false, refusal: 'admin-limited-to-endpoints' };
    if (endpointId !== undefined && key.endpoints !== null && !key.endpoints.includes(endpointId)) return { ok: false, refusal: 'not-on-endpoint' };
    return { ok: true, principal: { keyId: key.id, keyName: key.name, scopes: key.scopes, endpoints: key.endpoints } };
  }

  private async lookup(raw: string): Promise<KeyRecord | undefined> {
    const t = this.now();
    const hit = this.cache.get(raw, t);
    if (hit) return hit.value;
    const hash = sha256Hex(raw);
    const found = await this.store.getKeyByHash(hash);
    const key = found && sameDigest(found.hash, hash) ? found : undefined;
    this.cache.set(raw, key, t);
    // Only on a cache miss (once per CACHE_MS per key at most), and only when the stored time is
    // a gap old: last-used is for people reading the keys page, not worth a write per request.
    if (key && (key.lastUsedAt === null || key.lastUsedAt <= t - KEY_LAST_USED_GAP_MS)) {
      // Advisory: a failed write (the store busy or closing) loses one timestamp, nothing else.
      this.store.touchKey({ id: key.id, at: t, minGapMs: KEY_LAST_USED_GAP_MS }).catch(() => undefined);
    }
    return key;
  }
}
