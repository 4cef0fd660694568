/**
 * `gantry usage [--from T] [--to T] [--group-by key|endpoint]`: cost and megapixels of the
 * completed jobs of priced endpoints, through the admin API.
 */
import type { UsageQuery } from '../sdk/admin-client.js';
import { expectPositionals, parseFlags, UsageError } from './args.js';
import { ADMIN_CONNECTION_HELP, ADMIN_OPTIONS, connectAdmin } from './connection.js';
import { formatTable, printJson } from './output.js';
import type { Subcommand } from './subcommands.js';

const USAGE = `usage: gantry usage [--from T] [--to T] [--group-by key|endpoint] [options]

Cost and megapixels of the completed jobs of priced endpoints (the image endpoints) in
[from, to), by key or by endpoint. Failed, cancelled and timed-out jobs cost nothing.

  --from T             start: epoch milliseconds or an ISO 8601 date (default: the beginning)
  --to T               end, exclusive (default: now)
  --group-by G         key or endpoint (default endpoint)

${ADMIN_CONNECTION_HELP}`;

/** A time flag: digits are epoch ms, anything else must parse as a date. */
function parseTime(flag: string, value: string | undefined): number | string | undefined {
  if (value === undefined) return undefined;
  if (/^\d+$/.test(value)) return Number(value);
  if (Number.isNaN(Date.parse(value))) throw new UsageError(`${flag} must be epoch milliseconds or an ISO 8601 date, got '${value}'`);
  return value;
}

async function usageCommand(argv: string[]): Promise<number> {
  const { values, positionals } = parseFlags(argv, { ...ADMIN_OPTIONS, from: { type: 'string' }, to: { type: 'string' }, 'group-by': { type: 'string' } });
  expectPositionals(positionals, []);
  const groupBy = values['group-by'] ?? 'endpoint';
  if (groupBy !== 'key' && groupBy !== 'endpoint') throw new UsageError(`--group-by must be key or endpoint, got '${groupBy}'`);
  const query: UsageQuery = { groupBy };
  const from = parseTime('--from', values.from);
  const to = parseTime('--to', values.to);
  if (from !== undefined) query.from = from;
  if (to !== undefined) query.to = to;
  const report = await connectAdmin(values).usage(query);
  if (values.json) return (printJson(report), 0);
  const rows = report.usage.map((u) => [String(u[groupBy] ?? '(no key)'), String(u.jobs), u.megapixels.toFixed(6), u.costUsd]);
  rows.push(['total', String(report.total.jobs), report.total.megapixels.toFixed(6), report.total.costUsd]);
  console.log(`${report.from} – ${report.to}`);
  console.log(formatTable([groupBy.toUpperCase(), 'JOBS', 'MEGAPIXELS', 'COST (USD)'], rows));
  return 0;
}

/** `gantry usage`, for the list of commands. */
export const usageCommandSpec: Subcommand = { summary: 'cost and megapixels by key or endpoint over a period (admin key)', usage: USAGE, run: usageCommand };
