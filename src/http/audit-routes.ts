import type { IncomingMessage } from 'node:http';
import { invalidParameter } from '../model/errors.js';
import type { AuditLog } from '../security/audit-log.js';
import type { Principal } from '../security/keys.js';
import type { AuditActor, AuditQuery } from '../store/audit-store.js';
import type { ClientAddress } from './client-address.js';
import { queryInteger } from './query.js';
import { sendJson } from './respond.js';
import type { RouteCall } from './route-table.js';

/** What recording and reading the audit log uses. */
export interface AuditRouteDeps {
  audit: AuditLog;
  /** The client's address (X-Forwarded-For from GANTRY_TRUSTED_PROXIES only): where a change came from. */
  clientAddress: ClientAddress;
}

/** The console session a request is run for (console-api.ts marks it before re-dispatching). */
const consoleSessions = new WeakMap<IncomingMessage, string>();

/** Marks `req` as run by the console session `ref`, so its changes are recorded as the session's. */
export function markConsoleSession(req: IncomingMessage, ref: string): void {
  consoleSessions.set(req, ref);
}

/** Who makes a request: its key, as itself or as the key a console session acts with. */
export function auditActor(req: IncomingMessage, principal: Principal): AuditActor {
  const session = consoleSessions.get(req) ?? null;
  return { kind: session === null ? 'key' : 'console', keyId: principal.keyId, keyName: principal.keyName, session };
}

/**
 * Records a change the caller made (`principal` made it, the request says from where).
 *
 * @example await noteChange(deps, call, 'key.revoke', { kind: 'key', id }, { name });
 */
export function noteChange(deps: AuditRouteDeps, call: Pick<RouteCall, 'req' | 'principal'>, action: string, target: { kind: string; id: string }, detail: Record<string, unknown> = {}): Promise<void> {
  const actor: AuditActor = call.principal ? auditActor(call.req, call.principal) : { kind: 'anonymous', keyId: null, keyName: null, session: null };
  return deps.audit.record({ action, actor, address: deps.clientAddress(call.req), target, detail });
}

/** The most entries one page holds, and the default. */
export const MAX_AUDIT_PAGE = 1_000;
const DEFAULT_AUDIT_PAGE = 100;
const PARAMS = ['actor', 'action', 'target', 'since', 'until', 'limit', 'cursor'];
/** An action, or a prefix of one ending in `.`: lowercase words joined by `.` (no LIKE wildcard can get in). */
const ACTION = /^[a-z-]+(\.[a-z-]+)*\.?$/;

/** `since` / `until` as epoch milliseconds or an ISO 8601 date. */
function parseTime(field: string, raw: string | null): number | undefined {
  if (raw === null || raw === '') return undefined;
  const value = /^\d+$/.test(raw) ? Number(raw) : Date.parse(raw);
  if (!Number.isSafeInteger(value)) throw invalidParameter(field, 'must be epoch milliseconds or an ISO 8601 date');
  return value;
}

/** A text filter: at most 256 characters. */
function parseText(field: string, raw: string | null): string | undefined {
  if (raw === null || raw === '') return undefined;
  if (raw.length > 256) throw invalidParameter(field, 'must be at most 256 characters');
  return raw;
}

/** The filters of GET /admin/v1/audit; a bad one is a 400 naming it. */
export function parseAuditQuery(query: URLSearchParams): AuditQuery {
  for (const key of query.keys()) if (!PARAMS.includes(key)) throw invalidParameter(key, `is not a known parameter (expected ${PARAMS.join(', ')})`);
  const parsed: AuditQuery = { limit: queryInteger('limit', query.get('limit'), DEFAULT_AUDIT_PAGE, 1, MAX_AUDIT_PAGE) };
  const action = parseText('action', query.get('action'));
  if (action !== undefined) {
    if (!ACTION.test(action)) throw invalidParameter('action', 'must be an action (endpoint.update) or a prefix of one ending in a dot (endpoint.)');
    parsed.action = action;
  }
  const actor = parseText('actor', query.get('actor'));
  if (actor !== undefined) parsed.actor = actor;
  const target = parseText('target', query.get('target'));
  if (target !== undefined) parsed.target = target;
  const since = parseTime('since', query.get('since'));
  const until = parseTime('until', query.get('until'));
  if (since !== undefined) parsed.since = since;
  if (until !== undefined) parsed.until = until;
  if (since !== undefined && until !== undefined && until < since) throw invalidParameter('until', 'must not be before since');
  const cursor = query.get('cursor');
  if (cursor !== null && cursor !== '') {
    if (!/^\d{1,15}$/.test(cursor)) throw invalidParameter('cursor', 'must be the nextCursor of a previous page');
    parsed.before = Number(cursor);
  }
  return parsed;
}

/**
 * `GET /admin/v1/audit?actor=&action=&target=&since=&until=&limit=&cursor=`: audit entries,
 * newest first, and the cursor of the next page (docs/api.md, "Audit log").
 */
export async function sendAudit(deps: AuditRouteDeps, { res, query }: RouteCall): Promise<void> {
  sendJson(res, 200, await deps.audit.list(parseAuditQuery(query)));
}
