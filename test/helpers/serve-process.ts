// `gantry serve` as a child process of a test: started with the environment the test gives
// (SQLite in a folder of its own unless DATABASE_URL is given), its output kept, its URL read
// from the "gantry listening" log line.
import { spawn, type ChildProcess } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { eventually } from './gantry.js';

export const CLI = fileURLToPath(new URL('../../dist/src/cli/main.js', import.meta.url));

export interface ServeProcess {
  /** Empty when it exited before listening. */
  url: string;
  proc: ChildProcess;
  output: () => string;
  exited: Promise<number | null>;
}

/** Spawns `gantry serve`; resolves once it listens, or once it exits (url then empty). */
export async function startServe(adminKey: string, env: Record<string, string>): Promise<ServeProcess> {
  // The gateway's store is the test's choice: SQLite unless `env` names DATABASE_URL.
  const { DATABASE_URL: _inherited, ...inherited } = process.env;
  const proc = spawn(process.execPath, [CLI, 'serve'], {
    env: {
      ...inherited,
      PORT: '0',
      GANTRY_HOST: '127.0.0.1',
      GANTRY_ADMIN_KEY: adminKey,
      GANTRY_LOG_LEVEL: 'info',
      GANTRY_LOG_FORMAT: 'json',
      GANTRY_RATE_LIMITS: 'off',
      GANTRY_IMAGE_WORKERS: 'off',
      GANTRY_JOB_TAKE_WAIT_MS: '20000',
      ...env,
    },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  let url = '';
  proc.stdout?.on('data', (d: Buffer) => {
    out += d.toString('utf8');
    if (out.length > 1_000_000) out = out.slice(-500_000);
    url ||= /"url":"(http:[^"]+)"[^\n]*"msg":"gantry listening"/.exec(out)?.[1] ?? '';
  });
  proc.stderr?.on('data', (d: Buffer) => (out += d.toString('utf8')));
  const exited = new Promise<number | null>((resolve) => proc.once('exit', (code) => resolve(code)));
  let done = false;
  void exited.then(() => (done = true));
  await eventually(async () => (url || done ? true : undefined), 30_000, 'gantry serve to listen or exit').catch((err: unknown) => {
    proc.kill('SIGKILL');
    throw new Error(`${String(err)}: ${out.slice(-2000)}`);
  });
  return { url, proc, output: () => out, exited };
}
