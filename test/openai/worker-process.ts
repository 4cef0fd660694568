// A real `gantry worker` process (the built examples in dist/) for the OpenAI tests, with its
// JSON log lines collected so a test can wait for what the worker did.
import type { ChildProcess } from 'node:child_process';
import { spawnOwned } from '../helpers/processes.js';
import { existsSync } from 'node:fs';
import { createInterface } from 'node:readline';

const MAIN = 'dist/src/cli/main.js';
export const TOY_WORKER = 'dist/examples/llm-toy-worker.js';

export interface LogLine {
  msg?: string;
  jobId?: string;
  [field: string]: unknown;
}

export interface WorkerProcess {
  child: ChildProcess;
  logs: LogLine[];
  /** Resolves with the first log line `match` accepts, already written or yet to come. */
  waitForLog(match: (line: LogLine) => boolean, what: string, timeoutMs?: number): Promise<LogLine>;
  stop(): Promise<void>;
}

/** Spawns `gantry worker <file>` with the RUNPOD_* environment of one endpoint. */
export function spawnWorker(file: string, env: Record<string, string>): WorkerProcess {
  if (!existsSync(MAIN) || !existsSync(file)) throw new Error('run `npm run build` first: the tests spawn dist/src/cli/main.js');
  const child = spawnOwned(process.execPath, [MAIN, 'worker', file], { env: { ...process.env, LOG_LEVEL: 'info', ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
  const logs: LogLine[] = [];
  const listeners = new Set<() => void>();
  createInterface({ input: child.stdout! }).on('line', (line) => {
    try {
      logs.push(JSON.parse(line) as LogLine);
    } catch {
      logs.push({ msg: line });
    }
    for (const notify of [...listeners]) notify();
  });
  let stderr = '';
  child.stderr!.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
  const exited = new Promise<void>((resolve) => {
    child.on('exit', () => {
      if (stderr.trim()) console.error(`worker stderr: ${stderr}`);
      for (const notify of [...listeners]) notify();
      resolve();
    });
  });
  const waitForLog = (match: (line: LogLine) => boolean, what: string, timeoutMs = 15_000): Promise<LogLine> =>
    new Promise((resolve, reject) => {
      const finish = (then: () => void): void => {
        clearTimeout(timer);
        listeners.delete(check);
        then();
      };
      const check = (): void => {
        const found = logs.find(match);
        if (found) finish(() => resolve(found));
        else if (child.exitCode !== null || child.signalCode !== null) finish(() => reject(new Error(`worker exited before: ${what}`)));
      };
      const timer = setTimeout(() => finish(() => reject(new Error(`timed out waiting for the worker to log: ${what}`))), timeoutMs);
      listeners.add(check);
      check();
    });
  return {
    child,
    logs,
    waitForLog,
    async stop() {
      if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
      await exited;
    },
  };
}
