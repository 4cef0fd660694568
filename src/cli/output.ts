/**
 * What the CLI prints: JSON for scripts (`--json`), aligned fields and tables for people,
 * and a progress line on long waits when stderr is a terminal (never in pipes or logs).
 */

/** Prints a value as indented JSON on stdout. */
export function printJson(value: unknown): void {
  console.log(JSON.stringify(value, null, 2));
}

/**
 * Prints `label: value` lines with the values aligned.
 *
 * @example printFields([['id', 'j1'], ['status', 'COMPLETED']]);
 */
export function printFields(fields: [string, string][]): void {
  const width = Math.max(...fields.map(([label]) => label.length)) + 1;
  console.log(fields.map(([label, value]) => `${`${label}:`.padEnd(width)} ${value}`).join('\n'));
}

/**
 * A table with a header row and columns padded to their widest cell.
 *
 * @example formatTable(['ID', 'NAME'], [['a', 'first']]);
 */
export function formatTable(headers: string[], rows: string[][]): string {
  const widths = headers.map((h, i) => Math.max(h.length, ...rows.map((r) => (r[i] ?? '').length)));
  const line = (cells: string[]) =>
    cells
      .map((c, i) => c.padEnd(widths[i] ?? 0))
      .join('  ')
      .trimEnd();
  return [line(headers), ...rows.map(line)].join('\n');
}

/** An endpoint list for people: 'all' when a key is not limited. */
export function formatEndpointList(endpoints: string[] | null | undefined): string {
  return endpoints && endpoints.length > 0 ? endpoints.join(',') : 'all';
}

/** Epoch ms or an ISO string as ISO 8601; '-' when absent. */
export function formatTime(t: number | string | null | undefined): string {
  if (typeof t === 'number' && Number.isFinite(t)) return new Date(t).toISOString();
  return typeof t === 'string' && t ? t : '-';
}

/** Milliseconds for people: `850 ms`, `12.3 s`, `4 min 2 s`. */
export function formatMs(ms: number | undefined): string {
  if (ms === undefined) return '-';
  if (ms < 1000) return `${ms} ms`;
  if (ms < 60_000) return `${(ms / 1000).toFixed(1)} s`;
  return `${Math.floor(ms / 60_000)} min ${Math.round((ms % 60_000) / 1000)} s`;
}

/** A job output for people: strings as they are, anything else as indented JSON. */
export function formatOutput(output: unknown): string {
  return typeof output === 'string' ? output : JSON.stringify(output, null, 2);
}

/** A line on stderr that says what the command waits for; `stop` clears it. */
export interface Progress {
  update(text: string): void;
  stop(): void;
}

const FRAMES = ['⠋', '⠙', '⠹', '⠸', '⠼', '⠴', '⠦', '⠧', '⠇', '⠏'];

/**
 * A spinner with the elapsed time on stderr, redrawn in place — only when stderr is a
 * terminal and `enabled`; otherwise every call does nothing.
 *
 * @example const progress = createProgress(!json, 'waiting for j1'); ...; progress.stop();
 */
export function createProgress(enabled: boolean, text: string, stream: NodeJS.WriteStream = process.stderr): Progress {
  if (!enabled || !stream.isTTY) return { update: () => undefined, stop: () => undefined };
  const started = Date.now();
  let frame = 0;
  let current = text;
  const draw = (): void => {
    const seconds = Math.floor((Date.now() - started) / 1000);
    stream.write(`\r\x1b[2K${FRAMES[frame++ % FRAMES.length] ?? ''} ${current} (${seconds}s)`);
  };
  const timer = setInterval(draw, 100);
  timer.unref();
  draw();
  return {
    update(next) {
      current = next;
    },
    stop() {
      clearInterval(timer);
      stream.write('\r\x1b[2K');
    },
  };
}
