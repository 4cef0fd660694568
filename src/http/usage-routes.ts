import { buildUsageReport, usageCsv } from '../jobs/usage-report.js';
import { invalidParameter } from '../model/errors.js';
import type { KeyService } from '../security/keys.js';
import type { UsageGroup, UsageStore } from '../store/store.js';
import { sendJson } from './respond.js';
import type { RouteCall } from './route-table.js';

/** Worker runs one report reads at most; a range holding more is refused (narrow from/to). */
export const MAX_WORKER_METERS = 100_000;
const GROUPS: readonly UsageGroup[] = ['key', 'endpoint', 'day'];

/** `from` / `to` as epoch milliseconds or an ISO 8601 date. */
function parseTime(field: string, raw: string | null, fallback: number): number {
  if (raw === null || raw === '') return fallback;
  const value = /^\d+$/.test(raw) ? Number(raw) : Date.parse(raw);
  if (!Number.isSafeInteger(value)) throw invalidParameter(field, 'must be epoch milliseconds or an ISO 8601 date');
  return value;
}

/** `groupBy`: any of key, endpoint, day, comma-separated (default endpoint). */
function parseGroups(raw: string | null): UsageGroup[] {
  const names = (raw ?? 'endpoint').split(',').map((g) => g.trim());
  const groups: UsageGroup[] = [];
  for (const name of names) {
    if (!GROUPS.includes(name as UsageGroup)) throw invalidParameter('groupBy', 'must be key, endpoint, day or several of them comma-separated (key,day)');
    if (!groups.includes(name as UsageGroup)) groups.push(name as UsageGroup);
  }
  return groups;
}

/** What the usage route reads. */
export interface UsageRouteDeps {
  usage: Pick<UsageStore, 'sumUsage' | 'listWorkerMeters' | 'listJobMeters'>;
  keys: Pick<KeyService, 'list'>;
  now(): number;
}

/**
 * `GET /admin/v1/usage?from=&to=&groupBy=key,endpoint,day&format=json|csv`: job meters and
 * pool worker time over [from, to) (default: everything until now), grouped (src/jobs/usage-report.ts).
 * Costs are exact (`cost` a JSON number that prints as the exact decimal, `costUsd` the same as a string).
 */
export async function sendUsage(deps: UsageRouteDeps, { res, query }: RouteCall): Promise<void> {
  for (const key of query.keys()) {
    if (!['from', 'to', 'groupBy', 'format'].includes(key)) throw invalidParameter(key, 'is not a known parameter (expected from, to, groupBy, format)');
  }
  const groupBy = parseGroups(query.get('groupBy'));
  const format = query.get('format') ?? 'json';
  if (format !== 'json' && format !== 'csv') throw invalidParameter('format', 'must be json or csv');
  const from = parseTime('from', query.get('from'), 0);
  const to = parseTime('to', query.get('to'), deps.now() + 1);
  if (to < from) throw invalidParameter('to', 'must not be before from');
  const [sums, workerMeters, keys] = await Promise.all([
    deps.usage.sumUsage({ from, to, groupBy }),
    deps.usage.listWorkerMeters({ from, to, limit: MAX_WORKER_METERS + 1 }),
    groupBy.includes('key') ? deps.keys.list() : Promise.resolve([]),
  ]);
  if (workerMeters.length > MAX_WORKER_METERS) throw invalidParameter('from', `the range holds more than ${MAX_WORKER_METERS} worker runs: narrow from and to`);
  const report = buildUsageReport({ from, to, groupBy, sums, workerMeters, keyNames: new Map(keys.map((k) => [k.id, k.name])) });
  if (format === 'json') return sendJson(res, 200, report);
  const csv = usageCsv(report, groupBy);
  res.setHeader('content-type', 'text/csv; charset=utf-8');
  res.setHeader('content-disposition', 'attachment; filename="gantry-usage.csv"');
  res.setHeader('content-length', Buffer.byteLength(csv));
  res.writeHead(200);
  res.end(csv);
}
