// `gantry serve` as a child process of a test — the one way tests start a gateway process.
// It runs in a process group the test kit owns (spawnOwned: killed when the test file ends if
// the test did not stop it), with the environment the test gives (SQLite in a scratch folder
// unless DATABASE_URL is given). Its start ends on an event — the "gantry listening" log line,
// or its exit — with a generous cap for a busy machine; its JSON log lines can be awaited the
// same way. The SDK clients (`admin`, `client(key)`) are for setting up what a test needs.
import type { ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { fileURLToPath } from 'node:url';
import { createAdminClient, type AdminClient } from '../../src/sdk/admin-client.js';
import { createClient, type GantryClient } from '../../src/sdk/client.js';
import { spawnOwned } from './processes.js';
import { scratchDir } from './scratch.js';

export const CLI = fileURLToPath(new URL('../../dist/src/cli/main.js', import.meta.url));

/** How long a gateway may take to listen (or to exit) before the test is told: a busy 2-core machine started three at once in over 20 s. */
export const START_CAP_MS = 120_000;
/** Log lines kept per gateway (the oldest are dropped past it). */
const MAX_LOG_LINES = 20_000;

/** One JSON log line of the gateway (pino). */
export type LogLine = Record<string, unknown> & { msg?: string };

export interface GatewayOptions {
  /** Its admin key (GANTRY_ADMIN_KEY); default a random one. */
  adminKey?: string;
  /** GANTRY_* settings, DATABASE_URL (default none: SQLite), PORT (default 0: a free port). */
  env?: Record<string, string>;
  /** GANTRY_DATA_DIR; default a new scratch folder (another gateway's, to start it again on the same data). */
  dataDir?: string;
  /** Cap on the wait for "gantry listening" (default START_CAP_MS). */
  startTimeoutMs?: number;
  /** Resolve with `url` '' when it exits before listening (a start meant to fail); default: reject. */
  mayExit?: boolean;
  /** A command that runs `node … serve` (it execs it, keeping the pid), e.g. `['prlimit', '--nofile=1024:1024', '--']`. */
  runThrough?: string[];
}

export interface ServeProcess {
  /** Empty when it exited before listening (only with `mayExit`). */
  url: string;
  adminKey: string;
  dataDir: string;
  proc: ChildProcess;
  /** Its stdout and stderr (the last megabyte). */
  output: () => string;
  /** Its JSON log lines so far. */
  logs: () => LogLine[];
  /** Calls `listener` with each JSON log line from now on. */
  onLog(listener: (line: LogLine) => void): void;
  /** The first log line, seen or to come, that `match` accepts; rejects if the gateway exits first or `timeoutMs` (default 60 s) passes. */
  waitForLog(match: (line: LogLine) => boolean, what: string, timeoutMs?: number): Promise<LogLine>;
  /** Its exit code (null when a signal ended it). */
  exited: Promise<number | null>;
  /** The admin API, with its admin key. */
  admin: AdminClient;
  /** The job API with `apiKey` (default: the admin key). */
  client(apiKey?: string): GantryClient;
  /** Sends `signal` (default SIGTERM) unless it has exited; resolves with its exit code. */
  stop(signal?: NodeJS.Signals): Promise<number | null>;
}

/** The environment of a test gateway: this process's without DATABASE_URL, short settings for tests, then `env`. */
function gatewayEnv(adminKey: string, dataDir: string, env: Record<string, string>): NodeJS.ProcessEnv {
  const { DATABASE_URL: _inherited, ...inherited } = process.env;
  return {
    ...inherited,
    PORT: '0',
    GANTRY_HOST: '127.0.0.1',
    GANTRY_DATA_DIR: dataDir,
    GANTRY_ADMIN_KEY: adminKey,
    GANTRY_LOG_LEVEL: 'info',
    GANTRY_LOG_FORMAT: 'json',
    GANTRY_RATE_LIMITS: 'off',
    GANTRY_IMAGE_WORKERS: 'off',
    GANTRY_JOB_TAKE_WAIT_MS: '20000',
    ...env,
  };
}

/** Splits output into lines and parses the JSON ones; keeps the raw text bounded. */
function createLogReader(): { feed(text: string): void; output(): string; lines: LogLine[]; listeners: Set<(line: LogLine) => void> } {
  let out = '';
  let partial = '';
  const lines: LogLine[] = [];
  const listeners = new Set<(line: LogLine) => void>();
  return {
    lines,
    listeners,
    output: () => out,
    feed(text) {
      out += text;
      if (out.length > 1_000_000) out = out.slice(-500_000);
      partial += text;
      let nl: number;
      while ((nl = partial.indexOf('\n')) >= 0) {
        const raw = partial.slice(0, nl);
        partial = partial.slice(nl + 1);
        if (!raw.startsWith('{')) continue;
        let line: LogLine;
        try {
          line = JSON.parse(raw) as LogLine;
        } catch {
          continue;
        }
        lines.push(line);
        if (lines.length > MAX_LOG_LINES) lines.splice(0, lines.length - MAX_LOG_LINES);
        for (const listener of listeners) listener(line);
      }
    },
  };
}

/**
 * Starts `gantry serve` (dist/: `npm run build` first); resolves once it listens.
 *
 * @example
 * const gw = await startGateway({ env: { GANTRY_WORKER_LOST_MS: '3000' } });
 * await gw.admin.createEndpoint({ id: 'echo' });
 * const { id } = await gw.client().run('echo', { input: {} });
 * expect(await gw.stop()).toBe(0);
 */
export async function startGateway(options: GatewayOptions = {}): Promise<ServeProcess> {
  const adminKey = options.adminKey ?? `test-admin-${randomBytes(8).toString('hex')}`;
  const dataDir = options.dataDir ?? scratchDir('serve');
  const [command, ...args] = [...(options.runThrough ?? []), process.execPath, CLI, 'serve'];
  const proc = spawnOwned(command!, args, { env: gatewayEnv(adminKey, dataDir, options.env ?? {}), stdio: ['ignore', 'pipe', 'pipe'] });
  const reader = createLogReader();
  proc.stdout?.setEncoding('utf8').on('data', reader.feed);
  proc.stderr?.setEncoding('utf8').on('data', reader.feed);
  // Its end: the exit, and the rest of its output read (the pipes closed, or 2 s after the exit
  // if a process it started holds them).
  const exited = new Promise<number | null>((resolve) =>
    proc.once('exit', (code) => {
      const late = setTimeout(() => resolve(code), 2_000);
      proc.once('close', () => {
        clearTimeout(late);
        resolve(code);
      });
    }),
  );
  let gone = false;
  void exited.then(() => (gone = true));

  const waitForLog = (match: (line: LogLine) => boolean, what: string, timeoutMs = 60_000): Promise<LogLine> => {
    const seen = reader.lines.find(match);
    if (seen) return Promise.resolve(seen);
    return new Promise((resolve, reject) => {
      const done = (): void => {
        clearTimeout(cap);
        reader.listeners.delete(listener);
      };
      const listener = (line: LogLine): void => {
        if (!match(line)) return;
        done();
        resolve(line);
      };
      const cap = setTimeout(() => {
        done();
        reject(new Error(`gantry serve: no ${what} within ${timeoutMs} ms; its output: ${reader.output().slice(-2000)}`));
      }, timeoutMs);
      reader.listeners.add(listener);
      void exited.then((code) => {
        if (!reader.listeners.has(listener)) return;
        done();
        reject(new Error(`gantry serve exited (${code}) before ${what}; its output: ${reader.output().slice(-2000)}`));
      });
    });
  };

  let url = '';
  try {
    const listening = await waitForLog((l) => l.msg === 'gantry listening', 'listening', options.startTimeoutMs ?? START_CAP_MS);
    url = String(listening.url);
  } catch (err) {
    if (!(gone && options.mayExit)) {
      proc.kill('SIGKILL');
      throw err;
    }
  }
  return {
    url,
    adminKey,
    dataDir,
    proc,
    output: reader.output,
    logs: () => reader.lines,
    onLog: (listener) => reader.listeners.add(listener),
    waitForLog,
    exited,
    admin: createAdminClient({ url, adminKey }),
    client: (apiKey = adminKey) => createClient({ url, apiKey }),
    async stop(signal = 'SIGTERM') {
      if (!gone) proc.kill(signal);
      return exited;
    },
  };
}

