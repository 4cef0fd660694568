/**
 * What a worker's output line says about itself: its level, the job it names and its message.
 * JSON lines (pino, runpod-python's `{"requestId","message","level"}`, most structured loggers)
 * are read by their fields; plain lines by a leading level word (`ERROR | …`, `[WARN] …`,
 * `INFO:root:…`, runpod-python's `INFO   | <job id> | message`). Anything else has no level.
 */
export interface LineFacts {
  /** `trace`, `debug`, `info`, `warn`, `error` or `fatal`; null when the line does not say. */
  level: string | null;
  /** The job the line names (`jobId`, `job_id`, `requestId`, `request_id`); null when none. */
  jobId: string | null;
  /** The message without the JSON around it or the level word before it. */
  message: string;
  /** Whether the line is a JSON object (the console shows its fields behind a toggle). */
  json: boolean;
}

/** pino's numeric levels. */
const PINO_LEVELS: Record<number, string> = { 10: 'trace', 20: 'debug', 30: 'info', 40: 'warn', 50: 'error', 60: 'fatal' };

/** Level words as loggers write them, to the six names above. */
const LEVEL_WORDS: Record<string, string> = {
  trace: 'trace',
  debug: 'debug',
  info: 'info',
  information: 'info',
  notice: 'info',
  warn: 'warn',
  warning: 'warn',
  error: 'error',
  err: 'error',
  fatal: 'fatal',
  critical: 'fatal',
  crit: 'fatal',
  panic: 'fatal',
};

const JOB_FIELDS = ['jobId', 'job_id', 'requestId', 'request_id'] as const;
const LEVEL_FIELDS = ['level', 'levelname', 'severity', 'lvl'] as const;
const MESSAGE_FIELDS = ['msg', 'message'] as const;
/** A job id as workers print it: no spaces, not absurdly long. */
const ID = /^[A-Za-z0-9][A-Za-z0-9_.:-]{0,99}$/;
/** A plain line that starts with a level word and a separator; runpod-python's `LEVEL | id | message` too. */
const PLAIN = /^\s*\[?(trace|debug|info|warn|warning|error|err|fatal|critical)\]?\s*(?:\||:|-|\])\s*(.*)$/i;

/**
 * @example
 * parseLogLine('{"level":50,"jobId":"j1","msg":"boom"}') // { level: 'error', jobId: 'j1', message: 'boom', json: true }
 * parseLogLine('INFO   | j1 | started')                  // { level: 'info', jobId: 'j1', message: 'started', json: false }
 */
export function parseLogLine(line: string): LineFacts {
  if (line.startsWith('{') && line.endsWith('}')) {
    const fields = parseObject(line);
    if (fields) return { level: levelOf(fields), jobId: jobIdOf(fields), message: messageOf(fields) ?? line, json: true };
  }
  const plain = PLAIN.exec(line);
  if (!plain) return { level: null, jobId: null, message: line, json: false };
  const level = LEVEL_WORDS[plain[1]!.toLowerCase()] ?? null;
  const rest = plain[2] ?? '';
  // runpod-python without a JSON logger: `LEVEL   | <request id> | message`.
  const bar = rest.indexOf(' | ');
  const id = bar > 0 ? rest.slice(0, bar).trim() : '';
  if (ID.test(id)) return { level, jobId: id, message: rest.slice(bar + 3), json: false };
  return { level, jobId: null, message: rest, json: false };
}

function parseObject(line: string): Record<string, unknown> | null {
  try {
    const value: unknown = JSON.parse(line);
    return typeof value === 'object' && value !== null && !Array.isArray(value) ? (value as Record<string, unknown>) : null;
  } catch {
    return null;
  }
}

function levelOf(fields: Record<string, unknown>): string | null {
  for (const name of LEVEL_FIELDS) {
    const v = fields[name];
    if (typeof v === 'number') return PINO_LEVELS[v] ?? null;
    if (typeof v === 'string') return LEVEL_WORDS[v.toLowerCase()] ?? null;
  }
  return null;
}

function jobIdOf(fields: Record<string, unknown>): string | null {
  for (const name of JOB_FIELDS) {
    const v = fields[name];
    if (typeof v === 'string' && ID.test(v)) return v;
  }
  return null;
}

function messageOf(fields: Record<string, unknown>): string | null {
  for (const name of MESSAGE_FIELDS) {
    const v = fields[name];
    if (typeof v === 'string') return v;
  }
  return null;
}
