/**
 * `gantry logs ENDPOINT [--job ID] [--worker ID] [--follow]`: the pool workers' stored lines
 * (docs/logs.md) as time, level, worker and message, through the admin API.
 */
import type { LogLine, LogQuery, WorkerLogLine } from '../sdk/admin-client.js';
import { expectPositionals, parseFlags, parseInteger, UsageError } from './args.js';
import { ADMIN_CONNECTION_HELP, ADMIN_OPTIONS, connectAdmin } from './connection.js';
import { printJson } from './output.js';
import type { Subcommand } from './subcommands.js';

const USAGE = `usage: gantry logs ENDPOINT [--job ID] [--worker ID] [--follow] [options]

The lines the endpoint's pool workers printed, and Gantry's notes about them (started, exited,
lines dropped), kept in the store GANTRY_LOG_KEEP_DAYS: time, level, worker and message (the
message of a JSON line is its msg or message field; --json prints every field).

  --job ID             only the lines of this job (printed while the worker held it, or naming it)
  --worker ID          only this worker's lines
  --since T            lines at or after T: epoch milliseconds or an ISO 8601 time
  --until T            lines before T
  --grep TEXT          lines that hold TEXT (ASCII letters in any case)
  --lines N            how many of the newest lines (1-1000, default 100)
  -f, --follow         then print each new line as it is stored, until interrupted

${ADMIN_CONNECTION_HELP}`;

/** A time flag: digits are epoch ms, anything else must parse as a date. */
function parseTime(flag: string, value: string | undefined): string | undefined {
  if (value === undefined) return undefined;
  if (!/^\d+$/.test(value) && Number.isNaN(Date.parse(value))) throw new UsageError(`${flag} must be epoch milliseconds or an ISO 8601 time, got '${value}'`);
  return value;
}

/**
 * One line as the CLI prints it: time, level (the stream's name when the line has none: `-`
 * for output, `gantry` for Gantry's notes), worker when asked, message.
 *
 * @example formatLogLine({ at: '2026-…Z', level: 'info', message: 'job started', stream: 'stdout', line: '…' }) // '2026-…Z INFO   job started'
 */
export function formatLogLine(l: Pick<WorkerLogLine, 'at' | 'level' | 'message' | 'stream' | 'line'> & { workerId?: string }, withWorker = false): string {
  const level = (l.level ?? (l.stream === 'gantry' ? 'gantry' : '-')).toUpperCase();
  const worker = withWorker && l.workerId ? ` ${l.workerId}` : '';
  return `${l.at} ${level.padEnd(6)}${worker} ${l.message ?? l.line}`;
}

async function logsCommand(argv: string[]): Promise<number> {
  const { values, positionals } = parseFlags(argv, {
    ...ADMIN_OPTIONS,
    job: { type: 'string' },
    worker: { type: 'string' },
    since: { type: 'string' },
    until: { type: 'string' },
    grep: { type: 'string' },
    lines: { type: 'string' },
    follow: { type: 'boolean', short: 'f' },
  });
  const [endpoint] = expectPositionals(positionals, ['ENDPOINT']);
  const query: LogQuery = { endpoint };
  if (values.job !== undefined) query.job = values.job;
  if (values.worker !== undefined) query.worker = values.worker;
  const since = parseTime('--since', values.since);
  const until = parseTime('--until', values.until);
  if (since !== undefined) query.since = since;
  if (until !== undefined) query.until = until;
  if (values.grep !== undefined) query.q = values.grep;
  if (values.lines !== undefined) query.limit = parseInteger('--lines', values.lines, 1, 1_000);
  const admin = connectAdmin(values);
  const print = (l: LogLine): void => (values.json ? console.log(JSON.stringify(l)) : console.log(formatLogLine(l, query.worker === undefined)));
  if (values.follow) {
    const stop = new AbortController();
    const interrupted = (): void => stop.abort();
    process.once('SIGINT', interrupted);
    process.once('SIGTERM', interrupted);
    try {
      await admin.followLogs(query, print, stop.signal);
    } finally {
      process.off('SIGINT', interrupted);
      process.off('SIGTERM', interrupted);
    }
    return 0;
  }
  const { lines } = await admin.logs(query);
  if (values.json) printJson(lines);
  else for (const l of lines) print(l);
  return 0;
}

/** `gantry logs`, for the list of commands. */
export const logsCommandSpec: Subcommand = { summary: "an endpoint's worker logs, by job or worker, or followed (admin key)", usage: USAGE, run: logsCommand };
