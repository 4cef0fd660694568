/**
 * `gantry usage [--from T] [--to T] [--group-by G[,G]] [--csv]`: execution, worker and GPU
 * seconds, megapixels and cost by key, endpoint and/or day, through the admin API.
 */
import type { UsageGroup, UsageLine, UsageQuery } from '../sdk/admin-client.js';
import { expectPositionals, parseFlags, UsageError } from './args.js';
import { ADMIN_CONNECTION_HELP, ADMIN_OPTIONS, connectAdmin } from './connection.js';
import { formatTable, printJson } from './output.js';
import type { Subcommand } from './subcommands.js';

const GROUPS: readonly UsageGroup[] = ['key', 'endpoint', 'day'];

const USAGE = `usage: gantry usage [--from T] [--to T] [--group-by G[,G]] [--csv] [options]

What every endpoint used in [from, to): jobs, execution seconds (start to result, for the key
that submitted the job), pool worker seconds and GPU-seconds (start to stop, per endpoint; not
shared out to keys), megapixels and cost (pricePerSecond × execution, plus the image endpoints'
megapixels). A run that never started costs nothing; a failed image generation stays free.

  --from T             start: epoch milliseconds or an ISO 8601 date (default: the beginning)
  --to T               end, exclusive (default: now)
  --group-by G[,G]     key, endpoint, day (UTC), or several: key,day (default endpoint)
  --csv                print CSV (the grouped columns, then the measures, a total line)

${ADMIN_CONNECTION_HELP}`;

/** A time flag: digits are epoch ms, anything else must parse as a date. */
function parseTime(flag: string, value: string | undefined): number | string | undefined {
  if (value === undefined) return undefined;
  if (/^\d+$/.test(value)) return Number(value);
  if (Number.isNaN(Date.parse(value))) throw new UsageError(`${flag} must be epoch milliseconds or an ISO 8601 date, got '${value}'`);
  return value;
}

/** --group-by: one or several of key, endpoint, day. */
function parseGroups(value: string): UsageGroup[] {
  const groups = value.split(',').map((g) => g.trim());
  for (const g of groups) if (!(GROUPS as readonly string[]).includes(g)) throw new UsageError(`--group-by must be key, endpoint, day or several of them (key,day), got '${value}'`);
  return [...new Set(groups)] as UsageGroup[];
}

const seconds = (s: number | null): string => (s === null ? '-' : s.toFixed(3));

/** The row's group columns, as the table shows them. */
function groupCells(row: UsageLine, groups: readonly UsageGroup[]): string[] {
  const cells: string[] = [];
  if (groups.includes('day')) cells.push(row.day ?? '');
  if (groups.includes('key')) cells.push(row.key === null || row.key === undefined ? '(no key)' : (row.keyName ?? `(deleted) ${row.key}`));
  if (groups.includes('endpoint')) cells.push(row.endpoint ?? '');
  return cells;
}

async function usageCommand(argv: string[]): Promise<number> {
  const { values, positionals } = parseFlags(argv, { ...ADMIN_OPTIONS, from: { type: 'string' }, to: { type: 'string' }, 'group-by': { type: 'string' }, csv: { type: 'boolean' } });
  expectPositionals(positionals, []);
  const groupBy = parseGroups(values['group-by'] ?? 'endpoint');
  const query: UsageQuery = { groupBy };
  const from = parseTime('--from', values.from);
  const to = parseTime('--to', values.to);
  if (from !== undefined) query.from = from;
  if (to !== undefined) query.to = to;
  const admin = connectAdmin(values);
  if (values.csv) return (process.stdout.write(await admin.usageCsv(query)), 0);
  const report = await admin.usage(query);
  if (values.json) return (printJson(report), 0);
  const head = [...groupBy.map((g) => g.toUpperCase()), 'JOBS', 'EXEC (S)', 'WORKER (S)', 'GPU (S)', 'MEGAPIXELS', 'COST (USD)'];
  const measures = (r: Omit<UsageLine, 'day' | 'key' | 'keyName' | 'endpoint'>) => [String(r.jobs), seconds(r.executionSeconds), seconds(r.workerSeconds), seconds(r.gpuSeconds), r.megapixels.toFixed(6), r.costUsd];
  const rows = report.usage.map((u) => [...groupCells(u, groupBy), ...measures(u)]);
  rows.push(['total', ...groupBy.slice(1).map(() => ''), ...measures(report.total)]);
  console.log(`${report.from} – ${report.to}`);
  console.log(formatTable(head, rows));
  return 0;
}

/** `gantry usage`, for the list of commands. */
export const usageCommandSpec: Subcommand = { summary: 'execution and worker seconds and cost by key, endpoint or day (admin key)', usage: USAGE, run: usageCommand };
