#!/usr/bin/env node
/**
 * The `gantry` command line. Each command lives in its own file and returns an exit code;
 * this file lists them (`gantry --help` is made from that list) and runs the one named.
 */
import { codeSchemaVersion } from '../store/migrations.js';
import { packageVersion } from '../util/package-version.js';
import { auditCommandSpec } from './audit-command.js';
import { backupCommand, restoreCommand } from './backup-command.js';
import { endpointsCommand } from './endpoint-commands.js';
import { jobCommands } from './job-commands.js';
import { keysCommand } from './key-commands.js';
import { logsCommandSpec } from './logs-command.js';
import { registryCredentialsCommand } from './registry-commands.js';
import { serveCommand } from './serve-command.js';
import { listSubcommands, runSubcommand } from './subcommands.js';
import { usageCommandSpec } from './usage-command.js';
import { workerCommand } from './worker-command.js';

/** A top-level command: its line in `gantry --help`, and what runs it. */
interface Command {
  summary: string;
  /** The arguments shown after the name in the list. */
  args: string;
  run(argv: string[]): Promise<number>;
}

const commands: Record<string, Command> = {
  serve: { summary: 'run the gateway: job API, worker protocol, admin API, metrics, background services', args: '', run: serveCommand },
  worker: { summary: 'run a handler module as a worker', args: 'FILE', run: workerCommand },
  keys: { summary: keysCommand.summary, args: '<subcommand>', run: keysCommand.run },
  'registry-credentials': { summary: registryCredentialsCommand.summary, args: '<subcommand>', run: registryCredentialsCommand.run },
  endpoints: { summary: endpointsCommand.summary, args: '<subcommand>', run: endpointsCommand.run },
  ...Object.fromEntries(
    Object.entries(jobCommands).map(([name, command]) => [
      name,
      { summary: command.summary, args: /usage: gantry \S+ (\S+(?: JOB_ID)?)/.exec(command.usage)?.[1] ?? '', run: (argv: string[]) => runSubcommand(`gantry ${name}`, command, argv) },
    ]),
  ),
  backup: { summary: backupCommand.summary, args: 'FILE', run: (argv) => runSubcommand('gantry backup', backupCommand, argv) },
  restore: { summary: restoreCommand.summary, args: 'FILE', run: (argv) => runSubcommand('gantry restore', restoreCommand, argv) },
  usage: { summary: usageCommandSpec.summary, args: '', run: (argv) => runSubcommand('gantry usage', usageCommandSpec, argv) },
  audit: { summary: auditCommandSpec.summary, args: '', run: (argv) => runSubcommand('gantry audit', auditCommandSpec, argv) },
  logs: { summary: logsCommandSpec.summary, args: 'ENDPOINT', run: (argv) => runSubcommand('gantry logs', logsCommandSpec, argv) },
};

const USAGE = `usage: gantry <command> [options]

commands:
${listSubcommands(commands, (name) => `${name} ${commands[name]?.args ?? ''}`.trimEnd())}

Most commands talk to a gateway: GANTRY_URL (default http://localhost:8080), GANTRY_API_KEY
for the job commands, GANTRY_ADMIN_KEY for keys, registry credentials, endpoints, usage and audit.
--json prints JSON for scripts. Run 'gantry <command> --help' for its options and their
ranges; docs/cli.md has more.

  -V, --version              print the version`;

async function main(argv: string[]): Promise<number> {
  const [name, ...rest] = argv;
  if (name === '--version' || name === '-V') {
    console.log(`gantry ${packageVersion()} (schema version ${codeSchemaVersion()})`);
    return 0;
  }
  if (!name || name === '--help' || name === '-h') {
    if (name) console.log(USAGE);
    else console.error(USAGE);
    return name ? 0 : 2;
  }
  if (name === 'help') return rest[0] && Object.hasOwn(commands, rest[0]) ? commands[rest[0]]!.run(['--help']) : (console.log(USAGE), 0);
  const command = Object.hasOwn(commands, name) ? commands[name] : undefined;
  if (!command) {
    console.error(`gantry: unknown command '${name}' (see 'gantry --help')`);
    return 2;
  }
  return command.run(rest);
}

main(process.argv.slice(2)).then(
  (code) => {
    if (code !== 0) process.exitCode = code;
  },
  (err: unknown) => {
    console.error(err instanceof Error ? err.message : String(err));
    process.exitCode = 1;
  },
);
