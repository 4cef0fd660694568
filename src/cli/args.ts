/**
 * Small helpers shared by the CLI subcommands: flag parsing on top of node:util parseArgs
 * that turns every mistake into a one-line {@link UsageError} (exit code 2), and checked
 * conversions of flag values.
 */
import { parseArgs, type ParseArgsConfig } from 'node:util';

/** A bad flag, a missing argument or a bad value: the command prints the message and exits 2. */
export class UsageError extends Error {
  override readonly name = 'UsageError';
}

type OptionSpecs = NonNullable<ParseArgsConfig['options']>;
type StrictConfig<O extends OptionSpecs> = { args: string[]; options: O; allowPositionals: true; strict: true };

/** What {@link parseFlags} returns: typed `values` for the given options, and `positionals`. */
export type ParsedFlags<O extends OptionSpecs> = ReturnType<typeof parseArgs<StrictConfig<O>>>;

/**
 * Parses `argv` strictly (unknown flags and missing values are errors); positionals are allowed
 * and left to the caller to count.
 *
 * @example
 * const { values, positionals } = parseFlags(['list', '--json'], { json: { type: 'boolean' } });
 * // values.json === true, positionals = ['list']
 */
export function parseFlags<O extends OptionSpecs>(argv: string[], options: O): ParsedFlags<O> {
  try {
    return parseArgs<StrictConfig<O>>({ args: argv, options, allowPositionals: true, strict: true });
  } catch (err) {
    throw new UsageError(describeParseError(err));
  }
}

/** parseArgs messages run on with advice about '--'; keep the first sentence, lower-cased. */
function describeParseError(err: unknown): string {
  const message = err instanceof Error ? err.message : String(err);
  const first = message.split(/\.\s/)[0] ?? message;
  const trimmed = first.replace(/\.$/, '');
  return trimmed.charAt(0).toLowerCase() + trimmed.slice(1);
}

/**
 * Parses a flag value as a whole number from `min` to `max` (the server's range, so a value it
 * would refuse is refused here before anything is sent).
 *
 * @example
 * parseInteger('--workers-max', '4', 0, 1000); // 4
 * parseInteger('--workers-max', '1.5', 0); // throws UsageError
 */
export function parseInteger(flag: string, value: string, min: number, max = Number.MAX_SAFE_INTEGER): number {
  const text = value.trim();
  const n = /^-?\d+$/.test(text) ? Number(text) : NaN;
  if (!Number.isSafeInteger(n)) throw new UsageError(`${flag} must be an integer, got '${value}'`);
  if (n < min) throw new UsageError(`${flag} must be at least ${min}, got ${n}`);
  if (n > max) throw new UsageError(`${flag} must be at most ${max}, got ${n}`);
  return n;
}

/**
 * Checks the count of positional arguments and returns them, named for the messages.
 *
 * @example const [id] = expectPositionals(positionals, ['ID']);
 */
export function expectPositionals<N extends string[]>(positionals: string[], names: [...N]): { [K in keyof N]: string } {
  if (positionals.length < names.length) throw new UsageError(`missing ${names.slice(positionals.length).join(' ')}`);
  if (positionals.length > names.length) throw new UsageError(`unexpected argument '${positionals[names.length] ?? ''}'`);
  for (const [i, value] of positionals.entries()) {
    if (!value.trim()) throw new UsageError(`${names[i] ?? 'argument'} must not be empty`);
  }
  return positionals as { [K in keyof N]: string };
}

/**
 * --help anywhere before a `--` wins over every other flag, valid or not.
 *
 * @example wantsHelp(['list', '--bogus', '-h']) // true
 */
export function wantsHelp(argv: string[]): boolean {
  for (const arg of argv) {
    if (arg === '--') return false;
    if (arg === '--help' || arg === '-h') return true;
  }
  return false;
}

/**
 * A range as help texts show it: `MIN–MAX`, with a default when there is one.
 *
 * @example range(1, 100, 3) // '1–100 (default 3)'
 */
export function range(min: number, max: number, fallback?: number | string): string {
  return `${min}–${max}${fallback === undefined ? '' : ` (default ${fallback})`}`;
}

/**
 * Splits a comma-separated list, dropping blanks.
 *
 * @example
 * parseList('run, read,'); // ['run', 'read']
 */
export function parseList(value: string): string[] {
  return value
    .split(',')
    .map((s) => s.trim())
    .filter((s) => s.length > 0);
}

/**
 * Turns repeated `K=V` flag values into an object (the value may itself contain '=').
 *
 * @example
 * parseKeyValues('--worker-env', ['A=1', 'B=x=y']); // { A: '1', B: 'x=y' }
 */
export function parseKeyValues(flag: string, values: string[]): Record<string, string> {
  const out: Record<string, string> = {};
  for (const pair of values) {
    const eq = pair.indexOf('=');
    if (eq <= 0) throw new UsageError(`${flag} takes KEY=VALUE, got '${pair}'`);
    out[pair.slice(0, eq)] = pair.slice(eq + 1);
  }
  return out;
}
