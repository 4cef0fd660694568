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
 * Parses a flag value as a whole number no smaller than `min`.
 *
 * @example
 * parseInteger('--workers-max', '4', 0); // 4
 * parseInteger('--workers-max', '1.5', 0); // throws UsageError
 */
export function parseInteger(flag: string, value: string, min: number): number {
  const text = value.trim();
  const n = /^-?\d+$/.test(text) ? Number(text) : NaN;
  if (!Number.isSafeInteger(n)) throw new UsageError(`${flag} must be an integer, got '${value}'`);
  if (n < min) throw new UsageError(`${flag} must be at least ${min}, got ${n}`);
  return n;
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
