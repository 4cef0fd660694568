import { parseArgs } from 'node:util';
import type { startGantry as StartGantry } from '../server.js';
import { raiseFileLimit } from '../util/file-limit.js';

const HELP = `usage: gantry serve [--port N] [--data-dir DIR]

Runs the gateway: the v2 job API, the worker protocol, the admin API and the background
services, on one SQLite file under the data directory. Settings come from the environment
(docs/configuration.md); the flags override PORT and GANTRY_DATA_DIR.

SIGTERM or SIGINT hands out no more jobs, lets running jobs finish and post their results
(within the workers' stop grace), then exits 0; a second signal exits at once with 130.`;

/** `gantry serve`: runs until SIGINT/SIGTERM, then drains and closes. */
export async function serveCommand(argv: string[]): Promise<number> {
  const { values } = parseArgs({
    args: argv,
    options: { port: { type: 'string' }, 'data-dir': { type: 'string' }, help: { type: 'boolean', short: 'h' } },
  });
  if (values.help) {
    console.log(HELP);
    return 0;
  }
  const env = { ...process.env };
  if (values.port !== undefined) env.PORT = values.port;
  if (values['data-dir'] !== undefined) env.GANTRY_DATA_DIR = values['data-dir'];
  // Caught from before the start: a signal that comes once the gateway logs that it listens,
  // but before the start returns, still means "drain and exit 0" rather than the default kill.
  const stopped = new Promise<void>((resolve) => {
    const stop = (): void => resolve();
    process.once('SIGINT', stop);
    process.once('SIGTERM', stop);
  });
  // Loaded here, not at the top: the other commands need none of the gateway (images, stores).
  const { startGantry } = (await import('../server.js')) as { startGantry: typeof StartGantry };
  // Before any connection: the soft open-file limit up to the hard one (the gateway logs the outcome and caps connections by it).
  const fileLimit = raiseFileLimit();
  const gantry = await startGantry({ env, ...(fileLimit ? { fileLimit } : {}) });
  if (gantry.adminKey && !process.env.GANTRY_ADMIN_KEY) {
    // Printed once, on the first start; only its hash is stored.
    process.stdout.write(
      `\nGantry created an admin API key. It is shown only this once; keep it safe:\n\n  ${gantry.adminKey}\n\n` +
        `Use it as GANTRY_ADMIN_KEY for the CLI, or set GANTRY_ADMIN_KEY before the first start to choose it.\n\n`,
    );
  }
  await stopped;
  // The drain can last the workers' stop grace: a second signal does not wait for it.
  const again = (signal: NodeJS.Signals): void => {
    console.error(`gantry serve: second ${signal}, exiting without waiting for running jobs`);
    process.exit(130);
  };
  process.once('SIGINT', again);
  process.once('SIGTERM', again);
  await gantry.close();
  return 0;
}
