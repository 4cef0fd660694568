/**
 * `gantry audit [--actor A] [--action X] [--target T] [--since T] [--until T] [--limit N] [--all]`:
 * the audit log through the admin API, newest first (docs/cli.md).
 */
import type { AuditEntry, AuditQuery } from '../sdk/admin-client.js';
import { expectPositionals, parseFlags, UsageError } from './args.js';
import { ADMIN_CONNECTION_HELP, ADMIN_OPTIONS, connectAdmin } from './connection.js';
import { formatTable, printJson } from './output.js';
import type { Subcommand } from './subcommands.js';

const USAGE = `usage: gantry audit [--actor A] [--action X] [--target T] [--since T] [--until T] [--limit N] [--all] [options]

Who changed what through the admin API (keys, registry credentials, endpoints, budgets, an
admin's purge-queue) and every console sign-in, newest first: when, the action, its outcome,
who (the key's name, or the console session), from which address, and what changed. Never a
secret value: changed env variables, webhook secrets and passwords are named, not shown.

  --actor A      a key id, key name or console session reference
  --action X     an action (endpoint.update), or every action under a prefix (endpoint.)
  --target T     the id of what was changed (an endpoint, key or registry credential id)
  --since T      from this time: epoch milliseconds or an ISO 8601 date
  --until T      before this time
  --limit N      entries per page, 1-1000 (default 100)
  --all          every page, not only the first
  --cursor C     the page after C (the nextCursor the previous page printed)

${ADMIN_CONNECTION_HELP}`;

/** A time flag: digits are epoch ms, anything else must parse as a date. */
function parseTime(flag: string, value: string | undefined): number | string | undefined {
  if (value === undefined) return undefined;
  if (/^\d+$/.test(value)) return Number(value);
  if (Number.isNaN(Date.parse(value))) throw new UsageError(`${flag} must be epoch milliseconds or an ISO 8601 date, got '${value}'`);
  return value;
}

/** Who, as a person reads it: the key's name, with `console <session>` for a console session. */
export function actorText(entry: AuditEntry): string {
  const { actor } = entry;
  if (actor.kind === 'anonymous') return '-';
  const key = actor.keyName ?? (actor.keyId === null ? '(unknown key)' : `(deleted) ${actor.keyId.slice(0, 8)}`);
  return actor.kind === 'console' ? `${key} [console ${actor.session ?? '?'}]` : key;
}

/** What changed, in one line: the changed fields, env names, or the detail's own words. */
export function detailText(entry: AuditEntry): string {
  const d = entry.detail;
  const parts: string[] = [];
  if (typeof d.method === 'string') parts.push(`by ${d.method}`);
  if (typeof d.name === 'string' && !entry.action.startsWith('console.')) parts.push(`name ${d.name}`);
  if (Array.isArray(d.fields) && d.fields.length > 0) parts.push(`fields ${d.fields.join(',')}`);
  const env = d.env as { added?: string[]; removed?: string[]; changed?: string[] } | undefined;
  if (env) for (const k of ['added', 'removed', 'changed'] as const) if (env[k]?.length) parts.push(`env ${k} ${env[k].join(',')}`);
  if (typeof d.removed === 'number') parts.push(`${d.removed} removed`);
  if (typeof d.retryAfterS === 'number') parts.push(`retry after ${d.retryAfterS} s`);
  if (typeof d.notRecordedBefore === 'number') parts.push(`${d.notRecordedBefore} earlier refusals not recorded`);
  return parts.join('; ');
}

async function auditCommand(argv: string[]): Promise<number> {
  const flags = { ...ADMIN_OPTIONS, actor: { type: 'string' }, action: { type: 'string' }, target: { type: 'string' }, since: { type: 'string' }, until: { type: 'string' }, limit: { type: 'string' }, cursor: { type: 'string' }, all: { type: 'boolean' } } as const;
  const { values, positionals } = parseFlags(argv, flags);
  expectPositionals(positionals, []);
  const query: AuditQuery = {};
  for (const name of ['actor', 'action', 'target', 'cursor'] as const) if (values[name] !== undefined) query[name] = values[name];
  const since = parseTime('--since', values.since);
  const until = parseTime('--until', values.until);
  if (since !== undefined) query.since = since;
  if (until !== undefined) query.until = until;
  if (values.limit !== undefined) {
    if (!/^\d+$/.test(values.limit) || Number(values.limit) < 1 || Number(values.limit) > 1000) throw new UsageError(`--limit must be an integer from 1 to 1000, got '${values.limit}'`);
    query.limit = Number(values.limit);
  }
  const admin = connectAdmin(values);
  const entries: AuditEntry[] = [];
  let page = await admin.audit(query);
  entries.push(...page.entries);
  while (values.all && page.nextCursor !== null) {
    page = await admin.audit({ ...query, cursor: page.nextCursor });
    entries.push(...page.entries);
  }
  if (values.json) return (printJson({ entries, nextCursor: page.nextCursor }), 0);
  const rows = entries.map((e) => [e.at, e.action, e.outcome, actorText(e), e.address, e.target ? `${e.target.kind} ${e.target.id}` : '-', detailText(e)]);
  console.log(formatTable(['TIME', 'ACTION', 'OUTCOME', 'WHO', 'FROM', 'TARGET', 'DETAIL'], rows));
  if (page.nextCursor !== null) console.log(`more: gantry audit --cursor ${page.nextCursor} (or --all)`);
  return 0;
}

/** `gantry audit`, for the list of commands. */
export const auditCommandSpec: Subcommand = { summary: 'who changed what and every console sign-in, newest first (admin key)', usage: USAGE, run: auditCommand };
