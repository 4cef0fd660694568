// Real worker processes for the SDK, metrics and CLI tests: the built `gantry worker` command
// running one of the examples (echo-worker, stream-worker) against a test gateway.
import type { ChildProcess } from 'node:child_process';
import { spawnOwned } from '../helpers/processes.js';
import { existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

const MAIN = fileURLToPath(new URL('../../dist/src/cli/main.js', import.meta.url));

export interface WorkerProcess {
  stop(): Promise<void>;
}

/** Starts `gantry worker dist/examples/<example>.js` with the RUNPOD_* environment `env`. */
export function startWorkerProcess(example: 'echo-worker' | 'stream-worker', env: Record<string, string>): WorkerProcess {
  const module = fileURLToPath(new URL(`../../dist/examples/${example}.js`, import.meta.url));
  for (const file of [MAIN, module]) if (!existsSync(file)) throw new Error(`${file} is missing: run 'npm run build' first`);
  const proc: ChildProcess = spawnOwned(process.execPath, [MAIN, 'worker', module], { env: { ...process.env, ...env, LOG_LEVEL: 'warn' }, stdio: ['ignore', 'ignore', 'inherit'] });
  const exited = new Promise<void>((resolve) => proc.once('exit', () => resolve()));
  return {
    async stop() {
      if (proc.exitCode === null && proc.signalCode === null) proc.kill('SIGTERM');
      await exited;
    },
  };
}
