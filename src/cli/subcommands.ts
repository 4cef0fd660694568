/**
 * How a CLI command runs: its --help wins over everything, a bad flag is exit 2 with one line
 * on stderr, a server refusal exit 1 with the server's message, and anything else its own
 * exit code.
 */
import { UsageError, wantsHelp } from './args.js';
import { isServerError } from './connection.js';

/** One command or subcommand: its help text and what it does once its flags are parsed. */
export interface Subcommand {
  /** One line for the list of commands. */
  summary: string;
  usage: string;
  run(argv: string[]): Promise<number>;
}

/**
 * Runs one command with `argv` (its flags and arguments); `name` prefixes its messages.
 *
 * @example process.exitCode = await runSubcommand('gantry status', statusCommand, ['echo', 'j1']);
 */
export async function runSubcommand(name: string, command: Subcommand, argv: string[]): Promise<number> {
  if (wantsHelp(argv)) {
    console.log(command.usage);
    return 0;
  }
  try {
    return await command.run(argv);
  } catch (err) {
    if (err instanceof UsageError) {
      console.error(`${name}: ${err.message} (see '${name} --help')`);
      return 2;
    }
    if (isServerError(err)) {
      console.error(`${name}: ${err.message}`);
      return 1;
    }
    throw err;
  }
}

/**
 * `gantry <group> <subcommand> ...` (keys, endpoints): picks the subcommand and runs it.
 *
 * @example await dispatch('gantry keys', KEYS_USAGE, { create, list, delete: remove }, ['list']);
 */
export async function dispatch(prefix: string, usage: string, subcommands: Record<string, Subcommand>, argv: string[]): Promise<number> {
  const [name, ...rest] = argv;
  if (!name || name === '--help' || name === '-h' || name === 'help') {
    if (name) console.log(usage);
    else console.error(usage);
    return name ? 0 : 2;
  }
  const sub = Object.hasOwn(subcommands, name) ? subcommands[name] : undefined;
  if (!sub) {
    console.error(`${prefix}: unknown subcommand '${name}' (see '${prefix} --help')`);
    return 2;
  }
  return runSubcommand(`${prefix} ${name}`, sub, rest);
}

/**
 * The list of subcommands for a usage text: name and summary, aligned.
 *
 * @example listSubcommands({ list: { summary: 'list keys', ... } }) // '  list     list keys'
 */
export function listSubcommands(subcommands: Record<string, Pick<Subcommand, 'summary'>>, usageOf: (name: string) => string = (n) => n): string {
  const names = Object.keys(subcommands).map(usageOf);
  const width = Math.max(...names.map((n) => n.length)) + 2;
  return Object.entries(subcommands)
    .map(([name, sub], i) => `  ${(names[i] ?? name).padEnd(width)} ${sub.summary}`)
    .join('\n');
}
