#!/usr/bin/env node
/**
 * The `gantry` command line: `gantry serve`, `gantry keys ...`, `gantry endpoints ...`,
 * `gantry worker <file>`. Each subcommand lives in its own file and returns an exit code.
 */
import { serveCommand } from './serve-command.js';
import { keysCommand, endpointsCommand } from './admin-commands.js';
import { workerCommand } from './worker-command.js';

const USAGE = `usage: gantry <command> [options]

commands:
  serve                      run the gateway (HTTP API, dispatcher, reaper) on PORT (8080)
  keys create|list|delete    manage API keys (needs GANTRY_URL and GANTRY_ADMIN_KEY)
  endpoints create|list|get|update|delete
                             manage endpoints (same)
  worker <file>              run a handler module as a worker (RUNPOD_WEBHOOK_* or --url/--endpoint/--key)

Run 'gantry <command> --help' for the options of one command.`;

const commands: Record<string, (argv: string[]) => Promise<number>> = {
  serve: serveCommand,
  keys: keysCommand,
  endpoints: endpointsCommand,
  worker: workerCommand,
};

async function main(argv: string[]): Promise<number> {
  const [name, ...rest] = argv;
  if (!name || name === '--help' || name === '-h' || name === 'help') {
    console.log(USAGE);
    return name ? 0 : 2;
  }
  const command = commands[name];
  if (!command) {
    console.error(`gantry: unknown command '${name}'\n\n${USAGE}`);
    return 2;
  }
  return command(rest);
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
