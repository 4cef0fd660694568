/**
 * The worker_logs table (docs/logs.md): every line a pool worker printed, and Gantry's own
 * notes about it, with when, which worker of which endpoint, and the job when one is known.
 * Written in batches by the leader's log writer (src/pool/log-writer.ts), read by any gateway
 * (GET /admin/v1/logs). Kept GANTRY_LOG_KEEP_DAYS, and per endpoint at most
 * GANTRY_LOG_MAX_LINES_PER_ENDPOINT lines and GANTRY_LOG_MAX_BYTES_PER_ENDPOINT bytes (each
 * line's UTF-8 size, stored with it), pruned by the reaper. `id` is the order lines were stored
 * in: the cursor of paged reads and of follows.
 */
export interface LogStore {
  /** Stores the lines in their order (ids ascending as given); resolves once committed. */
  appendLogs(lines: readonly LogRecord[]): Promise<void>;
  /**
   * The lines matching every filter given, at most `limit`. Without `after`: the newest first
   * (with `before`, those older than that id: the next page back). With `after`: the oldest
   * first of those newer than that id (a follow's next lines).
   */
  readLogs(query: LogQuery): Promise<StoredLogLine[]>;
  /** The id of the newest line stored (0 when none): where a follow starts. */
  lastLogId(): Promise<number>;
  /** Deletes up to `limit` lines with at < `before`, oldest first (GANTRY_LOG_KEEP_DAYS). Returns how many. */
  deleteLogsBefore(args: { before: number; limit: number }): Promise<number>;
  /**
   * Deletes up to `limit` of an endpoint's oldest lines beyond the newest ones kept: at most
   * `keep` lines (GANTRY_LOG_MAX_LINES_PER_ENDPOINT) whose bytes sum to at most `keepBytes`
   * (GANTRY_LOG_MAX_BYTES_PER_ENDPOINT), whichever keeps fewer. Returns how many.
   */
  trimEndpointLogs(args: { endpointId: string; keep: number; keepBytes: number; limit: number }): Promise<number>;
}

/** Where a line came from: the worker's stdout or stderr, or Gantry's own notes about the worker. */
export type LogSource = 'stdout' | 'stderr' | 'gantry';

/** One line to store. */
export interface LogRecord {
  /** Epoch ms when the line was complete. */
  at: number;
  endpointId: string;
  workerId: string;
  /** The job it belongs to: the line names it, or the worker held exactly that one job. */
  jobId: string | null;
  stream: LogSource;
  /** `debug`, `info`, `warn`, `error`, … when the line says (a JSON level, `ERROR | …`); null otherwise. */
  level: string | null;
  line: string;
}

/** A stored line, with its id. */
export interface StoredLogLine extends LogRecord {
  id: number;
}

/** Filters of readLogs; each one given narrows the answer. */
export interface LogQuery {
  endpointId?: string;
  workerId?: string;
  jobId?: string;
  /** at >= since (epoch ms). */
  since?: number;
  /** at < until (epoch ms). */
  until?: number;
  /** The line holds this text, ASCII letters in any case. */
  text?: string;
  /** Lines with id < before (paging back). */
  before?: number;
  /** Lines with id > after, oldest first (following). */
  after?: number;
  limit: number;
}

/** A LIKE pattern that finds `text` anywhere, with `\` as the escape of %, _ and itself (both backends). */
export function containsPattern(text: string): string {
  return `%${text.replace(/[\\%_]/g, (c) => `\\${c}`)}%`;
}

/** A row of worker_logs as both drivers return it. */
export interface LogRow {
  id: number;
  at: number;
  endpoint_id: string;
  worker_id: string;
  job_id: string | null;
  stream: string;
  level: string | null;
  line: string;
}

/** A worker_logs row as a StoredLogLine. */
export function logLineOf(r: LogRow): StoredLogLine {
  return { id: r.id, at: r.at, endpointId: r.endpoint_id, workerId: r.worker_id, jobId: r.job_id, stream: r.stream as LogSource, level: r.level, line: r.line };
}

/**
 * The WHERE clause and parameters of a readLogs query, for either backend (`param(i)` writes
 * the i-th placeholder: `?` or `$i`), and its order.
 *
 * @example logFilter({ endpointId: 'e', limit: 10 }, () => '?') // { where: 'endpoint_id = ?', params: ['e'], order: 'DESC' }
 */
export function logFilter(query: LogQuery, param: (i: number) => string, like: 'LIKE' | 'ILIKE'): { where: string; params: unknown[]; order: 'ASC' | 'DESC' } {
  const parts: string[] = [];
  const params: unknown[] = [];
  const add = (sql: (p: string) => string, value: unknown): void => {
    params.push(value);
    parts.push(sql(param(params.length)));
  };
  if (query.endpointId !== undefined) add((p) => `endpoint_id = ${p}`, query.endpointId);
  if (query.workerId !== undefined) add((p) => `worker_id = ${p}`, query.workerId);
  if (query.jobId !== undefined) add((p) => `job_id = ${p}`, query.jobId);
  if (query.since !== undefined) add((p) => `at >= ${p}`, query.since);
  if (query.until !== undefined) add((p) => `at < ${p}`, query.until);
  if (query.text !== undefined) add((p) => `line ${like} ${p} ESCAPE '\\'`, containsPattern(query.text));
  if (query.before !== undefined) add((p) => `id < ${p}`, query.before);
  if (query.after !== undefined) add((p) => `id > ${p}`, query.after);
  return { where: parts.length === 0 ? 'TRUE' : parts.join(' AND '), params, order: query.after === undefined ? 'DESC' : 'ASC' };
}
