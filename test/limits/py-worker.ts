// A protocol-exact runpod-python 1.12 stand-in (test/e2e/fixtures/runpod_like_worker.py) as a
// child process, for the limits, requeue and stream tests.
import type { ChildProcess } from 'node:child_process';
import { spawnOwned } from '../helpers/processes.js';
import { fileURLToPath } from 'node:url';

const WORKER_SCRIPT = fileURLToPath(new URL('../e2e/fixtures/runpod_like_worker.py', import.meta.url));
/** How much of the worker's stderr (its request log) a failed wait shows: enough to see each post of a job and its answer (a case once failed with only its last pings shown). */
const STDERR_SHOWN = 20_000;

/**
 * One worker process; its stderr (every request with `--verbose`) is kept for failure messages,
 * and the `EVENT <what> <job id>` lines of its stdout (taken, done, stopped, …) can be waited for.
 */
export class PyWorker {
  /** Its RUNPOD_POD_ID. */
  readonly workerId: string;
  stderr = '';
  /** Its exit code once it exited (null: ended by a signal). */
  exitCode: number | null | undefined = undefined;
  readonly events: { what: string; id: string }[] = [];
  private exited = false;
  private readonly exit: Promise<void>;
  private readonly listeners = new Set<() => void>();
  private readonly proc: ChildProcess;

  constructor(env: Record<string, string>, args: string[]) {
    this.workerId = env.RUNPOD_POD_ID ?? '';
    const base = Object.fromEntries(Object.entries(process.env).filter(([k]) => !k.startsWith('RUNPOD_')));
    this.proc = spawnOwned('python3', ['-u', WORKER_SCRIPT, ...args, '--verbose'], { env: { ...base, ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
    this.proc.stderr?.setEncoding('utf8').on('data', (chunk: string) => (this.stderr += chunk));
    let pending = '';
    this.proc.stdout?.setEncoding('utf8').on('data', (chunk: string) => {
      const lines = (pending + chunk).split('\n');
      pending = lines.pop() ?? '';
      for (const m of lines.map((l) => /^EVENT (\S+) (\S+)$/.exec(l))) if (m) this.events.push({ what: m[1]!, id: m[2]! });
      this.notify();
    });
    this.exit = new Promise((resolve) =>
      this.proc.on('exit', (code) => {
        this.exited = true;
        this.exitCode = code;
        this.notify();
        resolve();
      }),
    );
  }

  /** How many times it printed `EVENT <what> <id>`. */
  count(what: string, id: string): number {
    return this.events.filter((e) => e.what === what && e.id === id).length;
  }

  has(what: string, id: string): boolean {
    return this.count(what, id) > 0;
  }

  /** Requests the gateway refused or failed (`GET /path -> 4xx/5xx`), and results it failed to post. */
  errors(): string[] {
    return this.stderr.split('\n').filter((l) => / -> [45]\d\d$/.test(l) || l.includes('failed to'));
  }

  /** How many requests of `what` (e.g. `GET /v2/ep/job-take`) the worker made. */
  requests(what: RegExp): number {
    return this.stderr.split('\n').filter((l) => what.test(l)).length;
  }

  /** Resolves once the worker has printed `EVENT <what> <id>` (`count` times); fails if it exits first. */
  waitFor(what: string, id: string, count = 1, timeoutMs = 20_000): Promise<void> {
    return new Promise((resolve, reject) => {
      const done = (then: () => void): void => {
        clearTimeout(timer);
        this.listeners.delete(check);
        then();
      };
      const check = (): void => {
        if (this.count(what, id) >= count) done(resolve);
        else if (this.exited) done(() => reject(new Error(`worker exited before EVENT ${what} ${id}\n${this.stderr.slice(-STDERR_SHOWN)}`)));
      };
      const timer = setTimeout(() => done(() => reject(new Error(`timed out waiting for EVENT ${what} ${id}\n${this.stderr.slice(-STDERR_SHOWN)}`))), timeoutMs);
      this.listeners.add(check);
      check();
    });
  }

  /** SIGKILL: the worker dies mid-job, posting nothing more (a crash, an OOM kill). */
  async kill(): Promise<void> {
    if (this.exited) return;
    this.proc.kill('SIGKILL');
    await this.exit;
  }

  /** Ends the process at once (SIGKILL): a SIGTERMed runpod-python waits for its open polls to be answered. */
  async stop(): Promise<void> {
    await this.kill();
  }

  private notify(): void {
    for (const listener of [...this.listeners]) listener();
  }
}
