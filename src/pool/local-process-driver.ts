import { spawn, type ChildProcessByStdio } from 'node:child_process';
import { mkdirSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type { Readable } from 'node:stream';
import type { WorkerDriver, WorkerExit, WorkerHandle, WorkerOutput, WorkerStartSpec } from './driver.js';
import { inheritedWorkerEnv } from './worker-env.js';

/** After the process group is killed, how long to wait for its output pipes to close. */
const PIPE_CLOSE_WAIT_MS = 2_000;

/**
 * The environment of a worker process: the allow-listed part of the gateway's
 * (inheritedWorkerEnv: PATH, HOME, locale, ...), plus the spec's (endpoint env and the
 * worker's RUNPOD_* variables).
 */
export function workerProcessEnv(base: NodeJS.ProcessEnv, spec: Pick<WorkerStartSpec, 'env'>): NodeJS.ProcessEnv {
  return { ...inheritedWorkerEnv(base), ...spec.env };
}

/**
 * Runs each worker as a local process: `command` through the shell (`/bin/sh -c`), in its own
 * process group so that stopping it reaches what the shell started too (the shell does not
 * always `exec` the command). A worker is gone when its output pipes close, not when the
 * shell exits: on SIGTERM the shell may die at once while the worker is still draining.
 *
 * - stop(grace): SIGTERM to the group; SIGKILL to the group after `grace` ms.
 * - The shell ending by itself (the worker crashed, or someone killed the shell) ends the
 *   group: leftovers are killed, so a worker never runs on unsupervised.
 *
 * POSIX only (process groups); the gateway's secrets are not passed on (workerProcessEnv).
 *
 * @example
 * const driver = createLocalProcessDriver();
 * const worker = await driver.start({ workerId: 'w1', endpointId: 'echo', command: 'node worker.js', env }, (s, t) => log.write(s, t));
 * await worker.stop(30_000);
 */
export function createLocalProcessDriver(options: { baseEnv?: NodeJS.ProcessEnv; stateDir?: string } = {}): WorkerDriver<WorkerStartSpec> {
  const baseEnv = options.baseEnv ?? process.env;
  const { stateDir } = options;
  return {
    kind: 'local-process',
    async start(spec, output) {
      const handle = await startProcess(spec, output, workerProcessEnv(baseEnv, spec));
      if (stateDir && handle.pid !== null) {
        const file = pidFile(stateDir, spec.workerId);
        mkdirSync(stateDir, { recursive: true });
        writeFileSync(file, String(handle.pid));
        void handle.exited.then(() => rmSync(file, { force: true }));
      }
      return handle;
    },
    reapOrphans: async (graceMs) => (stateDir ? reapOrphans(stateDir, graceMs) : 0),
  };
}

const pidFile = (stateDir: string, workerId: string): string => join(stateDir, `${workerId}.pid`);

/**
 * With a `stateDir`, each running worker has `<workerId>.pid` there (its process group). A
 * file left over means the gateway died without stopping that worker. A process is only
 * signalled when it is still that worker — its environment names the same RUNPOD_POD_ID — so a
 * reused pid is never touched.
 */
async function reapOrphans(stateDir: string, graceMs: number): Promise<number> {
  let files: string[];
  try {
    files = readdirSync(stateDir).filter((f) => f.endsWith('.pid'));
  } catch {
    return 0;
  }
  const orphans: number[] = [];
  for (const file of files) {
    const workerId = file.slice(0, -'.pid'.length);
    const pid = Number(readFileSync(join(stateDir, file), 'utf8'));
    rmSync(join(stateDir, file), { force: true });
    if (Number.isInteger(pid) && pid > 1 && isWorker(pid, workerId)) orphans.push(pid);
  }
  const signalGroups = (signal: NodeJS.Signals): void => {
    for (const pid of orphans) {
      try {
        process.kill(-pid, signal);
      } catch {
        // ESRCH: gone already
      }
    }
  };
  signalGroups('SIGTERM');
  if (orphans.length > 0) setTimeout(() => signalGroups('SIGKILL'), graceMs).unref();
  return orphans.length;
}

function isWorker(pid: number, workerId: string): boolean {
  try {
    return readFileSync(`/proc/${pid}/environ`, 'latin1').split('\0').includes(`RUNPOD_POD_ID=${workerId}`);
  } catch {
    return false; // not running (or not ours to read)
  }
}

function startProcess(spec: WorkerStartSpec, output: WorkerOutput, env: NodeJS.ProcessEnv): Promise<WorkerHandle> {
  return new Promise((resolveStart, rejectStart) => {
    const child = spawn(spec.command, { shell: true, detached: true, env, cwd: spec.cwd, stdio: ['ignore', 'pipe', 'pipe'] });
    child.stdout.setEncoding('utf8').on('data', (text: string) => output('stdout', text));
    child.stderr.setEncoding('utf8').on('data', (text: string) => output('stderr', text));
    const group = new ProcessGroup(child);
    child.once('error', (err) => {
      if (child.pid === undefined) {
        rejectStart(err);
        group.finish({ code: null, signal: null, error: err.message });
      }
    });
    child.once('exit', (code, signal) => group.leaderExited({ code, signal }));
    child.once('close', () => group.finish(group.leaderExit ?? { code: null, signal: null }));
    child.once('spawn', () => resolveStart(group));
  });
}

/**
 * One started worker: the shell and everything it started, in one process group. It is gone
 * when its output pipes close (or, if something escaped with them, soon after the group was
 * killed).
 */
class ProcessGroup implements WorkerHandle {
  readonly pid: number | null;
  readonly exited: Promise<WorkerExit>;
  leaderExit: WorkerExit | undefined;
  private settle: ((exit: WorkerExit) => void) | undefined;
  private stopping: Promise<WorkerExit> | undefined;
  private ended = false;

  constructor(private readonly child: ChildProcessByStdio<null, Readable, Readable>) {
    this.pid = child.pid ?? null;
    this.exited = new Promise<WorkerExit>((resolve) => (this.settle = resolve));
  }

  stop(graceMs: number): Promise<WorkerExit> {
    this.stopping ??= (async () => {
      if (this.ended) return this.exited;
      this.killGroup('SIGTERM');
      const timer = setTimeout(() => {
        this.killGroup('SIGKILL');
        this.finishSoon();
      }, graceMs);
      timer.unref();
      const exit = await this.exited;
      clearTimeout(timer);
      return exit;
    })();
    return this.stopping;
  }

  /** The shell ended by itself (the worker crashed, or someone killed the shell): end the group, so nothing runs on unsupervised. */
  leaderExited(exit: WorkerExit): void {
    this.leaderExit = exit;
    if (!this.stopping) {
      this.killGroup('SIGKILL');
      this.finishSoon();
    }
  }

  finish(exit: WorkerExit): void {
    if (this.ended) return;
    this.ended = true;
    this.child.stdout.destroy();
    this.child.stderr.destroy();
    this.settle?.(exit);
  }

  private killGroup(signal: NodeJS.Signals): void {
    if (this.child.pid === undefined) return;
    try {
      process.kill(-this.child.pid, signal);
    } catch {
      // ESRCH: the whole group is gone already.
    }
  }

  /** The pipes should close once the group is dead; if something escaped with them, give up waiting. */
  private finishSoon(): void {
    setTimeout(() => this.finish(this.leaderExit ?? { code: null, signal: 'SIGKILL' }), PIPE_CLOSE_WAIT_MS).unref();
  }
}
