import type { Logger } from 'pino';
import type { AuditActor, AuditEntry, AuditQuery, AuditRecord, AuditStore } from '../store/audit-store.js';

/** An entry as the admin API answers it (docs/api.md, "Audit log"). */
export interface AuditView {
  /** The cursor of the next page is the last entry's id. */
  id: string;
  at: string;
  action: string;
  outcome: AuditEntry['outcome'];
  actor: AuditActor;
  address: string;
  target: { kind: string; id: string } | null;
  detail: Record<string, unknown>;
}

/** One page of entries, newest first; `nextCursor` null on the last page. */
export interface AuditPage {
  entries: AuditView[];
  nextCursor: string | null;
}

/** What the caller of `record` gives: the entry without its time, its details as an object (never a secret value in it). */
export interface AuditNote {
  action: string;
  outcome?: AuditEntry['outcome'];
  actor: AuditActor;
  address: string;
  target?: { kind: string; id: string } | null;
  detail?: Record<string, unknown>;
}

/**
 * The audit log: who changed what through the admin API and every console sign-in
 * (docs/security.md, "Audit log"). Callers name changed fields and give old and new values of
 * settings that hold no secret; secret values (keys, passwords, webhook secrets, env values)
 * are never handed to it.
 */
export interface AuditLog {
  /**
   * Writes an entry, committed when this resolves. A store fault is logged and swallowed: the
   * change it records is made already, and answering it as failed would invite a repeat.
   * Entries of nobody known (refused sign-ins) are written at most `anonymousPerMinute` a
   * minute; the next one written says how many were left out (`detail.notRecordedBefore`).
   */
  record(note: AuditNote): Promise<void>;
  /** A page of entries matching the filters, newest first. */
  list(query: AuditQuery): Promise<AuditPage>;
}

/** What the audit log uses. */
export interface AuditLogDeps {
  store: Pick<AuditStore, 'appendAudit' | 'listAudit'>;
  logger: Pick<Logger, 'warn' | 'error'>;
  now(): number;
  /** Refused sign-ins written per minute at most (default 30), so a flood of guesses cannot fill the disk. */
  anonymousPerMinute?: number;
}

/** The largest detail kept (JSON characters); larger ones are cut to their field names. */
export const MAX_DETAIL_CHARS = 16_384;

/** @example const audit = createAuditLog({ store, logger, now: Date.now }); await audit.record({ action: 'key.revoke', actor, address, target: { kind: 'key', id } }); */
export function createAuditLog(deps: AuditLogDeps): AuditLog {
  const perMinute = deps.anonymousPerMinute ?? 30;
  // A token bucket of anonymous entries: `perMinute` tokens, refilled continuously.
  let tokens = perMinute;
  let refilledAt = deps.now();
  let left = 0;
  return {
    async record(note) {
      const at = deps.now();
      const detail: Record<string, unknown> = { ...(note.detail ?? {}) };
      if (note.actor.kind === 'anonymous') {
        tokens = Math.min(perMinute, tokens + ((at - refilledAt) * perMinute) / 60_000);
        refilledAt = at;
        if (tokens < 1) {
          if (left++ === 0) deps.logger.warn({ action: note.action }, `audit: more than ${perMinute} refused sign-ins a minute; the rest are counted, not each written`);
          return;
        }
        tokens -= 1;
        if (left > 0) detail.notRecordedBefore = left;
        left = 0;
      }
      let detailJson = JSON.stringify(detail);
      if (detailJson.length > MAX_DETAIL_CHARS) detailJson = JSON.stringify({ truncated: true, fields: Object.keys(detail) });
      const entry: AuditEntry = { at, action: note.action, outcome: note.outcome ?? 'ok', actor: note.actor, address: note.address, target: note.target ?? null, detailJson };
      try {
        await deps.store.appendAudit(entry);
      } catch (err) {
        deps.logger.error({ err, action: entry.action, target: entry.target, actor: entry.actor }, 'audit entry not written');
      }
    },
    async list(query) {
      const rows = await deps.store.listAudit({ ...query, limit: query.limit + 1 });
      const page = rows.slice(0, query.limit);
      const last = page[page.length - 1];
      return { entries: page.map(renderAudit), nextCursor: rows.length > query.limit && last ? String(last.id) : null };
    },
  };
}

/** An entry as the admin API shows it. */
export function renderAudit(record: AuditRecord): AuditView {
  return {
    id: String(record.id),
    at: new Date(record.at).toISOString(),
    action: record.action,
    outcome: record.outcome,
    actor: record.actor,
    address: record.address,
    target: record.target,
    detail: JSON.parse(record.detailJson) as Record<string, unknown>,
  };
}

/** Lists longer than this are cut (`…and N more`), names longer than MAX_NAME_CHARS too: a detail stays small. */
const MAX_NAMES = 100;
const MAX_NAME_CHARS = 128;

/**
 * Names (env variable names, fields) as a detail lists them: each cut at 128 characters, at
 * most 100, then a count of the rest.
 *
 * @example boundedNames(['A', 'B']) // ['A', 'B']
 */
export function boundedNames(names: readonly string[]): string[] {
  const shown = names.slice(0, MAX_NAMES).map((n) => (n.length > MAX_NAME_CHARS ? `${n.slice(0, MAX_NAME_CHARS)}…` : n));
  if (names.length > MAX_NAMES) shown.push(`…and ${names.length - MAX_NAMES} more`);
  return shown;
}
