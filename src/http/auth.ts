import type { IncomingMessage } from 'node:http';
import { AppError } from '../errors.js';
import { sameDigest, sha256Hex } from '../jobs/secrets.js';
import type { KeyRecord, Scope, Store } from '../store/store.js';

/** Who is calling: the key's id, scopes and endpoint restriction. */
export interface Principal {
  keyId: string;
  scopes: Scope[];
  endpoints: string[] | null;
}

/** How long a key lookup is cached; a deleted key stops working at once on the gateway that deleted it. */
const CACHE_MS = 5_000;
const CACHE_MAX = 10_000;

/** What each scope grants (DESIGN.md §2): admin ⊇ run ⊇ read; worker is separate. */
const GRANTS: Record<Scope, Scope[]> = {
  admin: ['admin', 'run', 'read'],
  run: ['run', 'read'],
  read: ['read'],
  worker: ['worker'],
};

/**
 * API key authentication. Accepts `Authorization: Bearer KEY` and a raw `Authorization: KEY`
 * (runpod-python workers send the key raw). Keys are looked up by SHA-256 digest and compared
 * in constant time. Missing, unknown and insufficient keys are all 401 (spec, Authentication).
 */
export function createAuth(store: Store, now: () => number = Date.now) {
  // Keyed by the presented key itself, so a cached request skips hashing too. Kept in memory
  // only, never logged, and gone within CACHE_MS of a deletion on another gateway.
  const cache = new Map<string, { key: KeyRecord | undefined; at: number }>();

  async function lookup(raw: string): Promise<KeyRecord | undefined> {
    const t = now();
    const hit = cache.get(raw);
    if (hit && t - hit.at < CACHE_MS) return hit.key;
    const hash = sha256Hex(raw);
    const found = await store.getKeyByHash(hash);
    const key = found && sameDigest(found.hash, hash) ? found : undefined;
    if (cache.size >= CACHE_MAX) cache.clear();
    cache.set(raw, { key, at: t });
    return key;
  }

  /** Authenticates and checks `scope` (and the endpoint, when given); throws a 401 AppError. */
  async function authorize(req: IncomingMessage, scope: Scope, endpointId?: string): Promise<Principal> {
    const header = req.headers.authorization;
    if (!header) throw new AppError(401, 'UNAUTHORIZED', 'Missing API key: send "Authorization: Bearer <key>"');
    const raw = header.startsWith('Bearer ') || header.startsWith('bearer ') ? header.slice(7).trim() : header.trim();
    if (raw === '' || raw.length > 512) throw new AppError(401, 'UNAUTHORIZED', 'Invalid API key');
    const key = await lookup(raw);
    if (!key) throw new AppError(401, 'UNAUTHORIZED', 'Invalid API key');
    if (!key.scopes.some((s) => GRANTS[s].includes(scope))) {
      throw new AppError(401, 'INSUFFICIENT_SCOPE', `API key lacks the "${scope}" scope`);
    }
    if (endpointId !== undefined && key.endpoints !== null && !key.endpoints.includes(endpointId)) {
      throw new AppError(401, 'INSUFFICIENT_SCOPE', `API key is not allowed on endpoint ${endpointId}`);
    }
    return { keyId: key.id, scopes: key.scopes, endpoints: key.endpoints };
  }

  return { authorize, forget: () => cache.clear() };
}

export type Auth = ReturnType<typeof createAuth>;
