/**
 * `gantry worker <file>`: loads a handler module and runs it as a worker until SIGTERM or
 * SIGINT, then drains (in-flight jobs finish and post their results) and exits 0.
 */
import { resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import { parseArgs } from 'node:util';
import { startWorker, WorkerConfigError, WorkerRefusedError, type Handler, type WorkerHandle, type WorkerOptions } from '../sdk/worker.js';

const USAGE = `usage: gantry worker <file> [options]

Runs the handler exported by <file> (default export, or a named 'handler' export) as a
worker. The module may also export 'concurrency' (number) and 'returnAggregateStream'.

Connection settings come from RUNPOD_WEBHOOK_GET_JOB, RUNPOD_WEBHOOK_POST_OUTPUT,
RUNPOD_WEBHOOK_POST_STREAM, RUNPOD_WEBHOOK_PING, RUNPOD_POD_ID, RUNPOD_AI_API_KEY and
RUNPOD_PING_INTERVAL, as a RunPod worker gets them; these flags override them:

  --url URL            Gantry base URL (default GANTRY_URL when --endpoint is given)
  --endpoint ID        endpoint id (default RUNPOD_ENDPOINT_ID when --url is given)
  --key KEY            worker API key (default RUNPOD_AI_API_KEY)
  --worker-id ID       worker id (default RUNPOD_POD_ID, else a random UUID)
  --concurrency N      jobs run at once (default: the module's, else 1)

SIGTERM or SIGINT stops taking jobs, lets running ones finish, then exits 0; a second
signal exits at once with code 130. A worker the server refuses before ever accepting it (no
key, a key without the worker scope, an unknown endpoint) exits 2 with one line saying why;
network errors, 5xx and 429 are retried.`;

/** What a handler module may export. */
interface HandlerModule {
  default?: unknown;
  handler?: unknown;
  concurrency?: unknown;
  returnAggregateStream?: unknown;
}

/**
 * Runs `gantry worker <file> [--url --endpoint --key --worker-id --concurrency]`; resolves
 * with the exit code once the worker has drained after a signal, or with 2 when the server
 * refused it at its start (docs/cli.md).
 *
 * @example
 * ```ts
 * import { workerCommand } from './worker-command.js';
 * process.exitCode = await workerCommand(['dist/examples/echo-worker.js', '--concurrency', '2']);
 * ```
 */
export async function workerCommand(argv: string[]): Promise<number> {
  const flags = parseWorkerFlags(argv);
  if (typeof flags === 'number') return flags;
  const { file, values, concurrency: flagConcurrency } = flags;

  // Signals are caught from here on, so one that comes while the module loads still means
  // "drain and exit 0" rather than the default kill.
  let signals = 0;
  let worker: WorkerHandle | null = null;
  const onSignal = (signal: NodeJS.Signals): void => {
    signals += 1;
    if (signals > 1) {
      console.error(`gantry worker: second ${signal}, exiting without waiting for running jobs`);
      process.exit(130);
    }
    void worker?.stop();
  };
  process.on('SIGTERM', onSignal);
  process.on('SIGINT', onSignal);
  try {
    const options = await loadOptions(file, values, flagConcurrency);
    if (typeof options === 'number') return options;
    if (signals > 0) return 0; // stopped before it started
    const started = start(options);
    if (typeof started === 'number') return started;
    worker = started;
    await worker.done;
    return 0;
  } catch (err) {
    if (!(err instanceof WorkerRefusedError)) throw err;
    console.error(`gantry worker: ${err.message}`);
    return 2;
  } finally {
    process.off('SIGTERM', onSignal);
    process.off('SIGINT', onSignal);
  }
}

/** The handler file and flags of `gantry worker`, or the exit code when there is nothing to run (help, a usage error). */
function parseWorkerFlags(argv: string[]): number | { file: string; values: WorkerFlags; concurrency: number | undefined } {
  let parsed;
  try {
    parsed = parseArgs({
      args: argv,
      allowPositionals: true,
      options: {
        url: { type: 'string' },
        endpoint: { type: 'string' },
        key: { type: 'string' },
        'worker-id': { type: 'string' },
        concurrency: { type: 'string' },
        help: { type: 'boolean', short: 'h' },
      },
    });
  } catch (err) {
    console.error(`gantry worker: ${err instanceof Error ? err.message : String(err)}\n\n${USAGE}`);
    return 2;
  }
  const { values, positionals } = parsed;
  if (values.help) {
    console.log(USAGE);
    return 0;
  }
  const [file, ...extra] = positionals;
  if (!file || extra.length > 0) {
    console.error(`gantry worker: expected exactly one handler file\n\n${USAGE}`);
    return 2;
  }
  let concurrency: number | undefined;
  if (values.concurrency !== undefined) {
    concurrency = Number(values.concurrency);
    if (!Number.isInteger(concurrency) || concurrency < 1) {
      console.error(`gantry worker: --concurrency must be a positive integer, got '${values.concurrency}'`);
      return 2;
    }
  }
  return { file, values, concurrency };
}

interface WorkerFlags {
  url?: string;
  endpoint?: string;
  key?: string;
  'worker-id'?: string;
}

/** Imports the handler module and builds the worker options; a number is an exit code for a failure. */
async function loadOptions(file: string, values: WorkerFlags, flagConcurrency: number | undefined): Promise<WorkerOptions | number> {
  let mod: HandlerModule;
  try {
    mod = (await import(pathToFileURL(resolve(file)).href)) as HandlerModule;
  } catch (err) {
    console.error(`gantry worker: cannot load ${file}: ${err instanceof Error ? err.message : String(err)}`);
    return 1;
  }
  const exported = pickExports(mod);
  if (!exported) {
    console.error(`gantry worker: ${file} exports no handler function (default export or 'handler')`);
    return 1;
  }

  const options: WorkerOptions = {
    handler: exported.handler,
    concurrency: flagConcurrency ?? exported.concurrency,
    returnAggregateStream: exported.returnAggregateStream,
    apiKey: values.key,
    workerId: values['worker-id'],
  };
  if (values.url !== undefined || values.endpoint !== undefined) {
    options.url = values.url ?? process.env.GANTRY_URL;
    options.endpointId = values.endpoint ?? process.env.RUNPOD_ENDPOINT_ID;
  }
  return options;
}

/** Starts the worker, or prints why not and returns exit code 1. */
function start(options: WorkerOptions): WorkerHandle | number {
  try {
    return startWorker(options);
  } catch (err) {
    if (err instanceof WorkerConfigError || err instanceof TypeError) {
      console.error(`gantry worker: ${err.message}`);
      return 1;
    }
    throw err;
  }
}

function pickExports(
  mod: HandlerModule,
): { handler: Handler; concurrency?: number; returnAggregateStream?: boolean } | null {
  // `export default { handler, concurrency }` is accepted beside plain function exports.
  const fromDefault = mod.default !== null && typeof mod.default === 'object' ? (mod.default as HandlerModule) : {};
  const handler = [mod.default, mod.handler, fromDefault.handler].find((h) => typeof h === 'function');
  if (!handler) return null;
  const concurrency = mod.concurrency ?? fromDefault.concurrency;
  const aggregate = mod.returnAggregateStream ?? fromDefault.returnAggregateStream;
  return {
    handler: handler as Handler,
    concurrency: typeof concurrency === 'number' ? concurrency : undefined,
    returnAggregateStream: typeof aggregate === 'boolean' ? aggregate : undefined,
  };
}
