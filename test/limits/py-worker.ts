// A protocol-exact runpod-python 1.12 stand-in (test/e2e/fixtures/runpod_like_worker.py) as a
// child process, for the limits tests.
import type { ChildProcess } from 'node:child_process';
import { spawnOwned } from '../helpers/processes.js';
import { fileURLToPath } from 'node:url';

const WORKER_SCRIPT = fileURLToPath(new URL('../e2e/fixtures/runpod_like_worker.py', import.meta.url));

/** One worker process; its stderr (every request with `--verbose`) is kept for failure messages. */
export class PyWorker {
  stderr = '';
  private exited = false;
  private readonly proc: ChildProcess;

  constructor(env: Record<string, string>, args: string[]) {
    const base = Object.fromEntries(Object.entries(process.env).filter(([k]) => !k.startsWith('RUNPOD_')));
    this.proc = spawnOwned('python3', ['-u', WORKER_SCRIPT, ...args, '--verbose'], { env: { ...base, ...env }, stdio: ['ignore', 'ignore', 'pipe'] });
    this.proc.stderr?.setEncoding('utf8').on('data', (chunk: string) => (this.stderr += chunk));
    this.proc.on('exit', () => (this.exited = true));
  }

  /** How many requests of `what` (e.g. `GET /v2/ep/job-take`) the worker made. */
  requests(what: RegExp): number {
    return this.stderr.split('\n').filter((l) => what.test(l)).length;
  }

  /** Ends the process at once (SIGKILL): a SIGTERMed runpod-python waits for its open polls to be answered. */
  async stop(): Promise<void> {
    if (this.exited) return;
    const exited = new Promise((resolve) => this.proc.once('exit', resolve));
    this.proc.kill('SIGKILL');
    await exited;
  }
}
