import { createHash, randomBytes, timingSafeEqual } from 'node:crypto';

/** A signed-in console user: the admin key it signed in with (held here, never sent to the page) and its CSRF token. */
export interface ConsoleSession {
  /** The admin key the session acts with; only in this process's memory. */
  readonly key: string;
  /** Sent by the page in `X-CSRF-Token` on every state-changing call. */
  readonly csrf: string;
  readonly createdAt: number;
  lastUsedAt: number;
}

/** Limits of the session table. */
export interface SessionLimits {
  /** At most this many sessions; the least recently used goes first. */
  maxSessions: number;
  /** A session unused this long is gone. */
  idleMs: number;
  /** A session is gone this long after sign-in, used or not. */
  maxAgeMs: number;
}

/** The console's sessions, in memory and bounded: a restart signs everyone out. */
export interface SessionTable {
  /** A new session for `key`; returns the cookie value (the session id) and the session. */
  open(key: string, now: number): { id: string; session: ConsoleSession };
  /** The live session of this cookie value, touched; undefined when unknown or expired. */
  get(id: string | undefined, now: number): ConsoleSession | undefined;
  /** Ends the session (sign-out). */
  close(id: string | undefined): void;
  readonly size: number;
}

/** Defaults: 1,000 sessions, 2 hours idle, 12 hours at most. */
export const SESSION_DEFAULTS: SessionLimits = { maxSessions: 1_000, idleMs: 2 * 3_600_000, maxAgeMs: 12 * 3_600_000 };

/** Sessions are keyed by the SHA-256 of their id, so the table never holds a usable cookie value. */
const digest = (id: string): string => createHash('sha256').update(id).digest('hex');

/**
 * How the audit log names a session: the first 12 hex digits of its id's digest (never a usable
 * cookie value; the same for every call of the session).
 *
 * @example sessionRef(id) // 'a3f09c21b7e4'
 */
export function sessionRef(id: string): string {
  return digest(id).slice(0, 12);
}

/**
 * The session table: ids are 256 random bits; a Map in least-recently-used order, so the
 * oldest session is evicted when the cap is reached.
 *
 * @example const sessions = createSessionTable(); const { id } = sessions.open(key, Date.now());
 */
export function createSessionTable(limits: SessionLimits = SESSION_DEFAULTS): SessionTable {
  const table = new Map<string, ConsoleSession>();
  const expired = (s: ConsoleSession, now: number): boolean => now - s.lastUsedAt >= limits.idleMs || now - s.createdAt >= limits.maxAgeMs;
  return {
    open(key, now) {
      const id = randomBytes(32).toString('base64url');
      const session: ConsoleSession = { key, csrf: randomBytes(32).toString('base64url'), createdAt: now, lastUsedAt: now };
      while (table.size >= limits.maxSessions) {
        const oldest = table.keys().next();
        if (oldest.done) break;
        table.delete(oldest.value);
      }
      table.set(digest(id), session);
      return { id, session };
    },
    get(id, now) {
      if (id === undefined || id === '') return undefined;
      const hash = digest(id);
      const session = table.get(hash);
      if (!session) return undefined;
      table.delete(hash);
      if (expired(session, now)) return undefined;
      session.lastUsedAt = now;
      table.set(hash, session);
      return session;
    },
    close(id) {
      if (id) table.delete(digest(id));
    },
    get size() {
      return table.size;
    },
  };
}

/** Constant-time comparison of a presented CSRF token with the session's. */
export function csrfMatches(session: ConsoleSession, presented: string | string[] | undefined): boolean {
  if (typeof presented !== 'string') return false;
  const a = Buffer.from(presented);
  const b = Buffer.from(session.csrf);
  return a.length === b.length && timingSafeEqual(a, b);
}
