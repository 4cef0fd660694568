import { spawn } from 'node:child_process';
import type { WorkerDriver, WorkerExit, WorkerHandle, WorkerOutput, WorkerStartSpec } from './driver.js';

/** Variables of the gateway's own environment that a worker must never see. */
const PRIVATE_VARS = ['GANTRY_ADMIN_KEY', 'GANTRY_SECRET_KEY', 'DATABASE_URL'];
/** After the process group is killed, how long to wait for its output pipes to close. */
const PIPE_CLOSE_WAIT_MS = 2_000;

/**
 * The environment of a worker process: the gateway's, less its secrets and any RUNPOD_*
 * variables it inherited, plus the spec's (endpoint env and the worker's RUNPOD_* variables).
 */
export function workerProcessEnv(base: NodeJS.ProcessEnv, spec: Pick<WorkerStartSpec, 'env'>): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = {};
  for (const [key, value] of Object.entries(base)) {
    if (value === undefined || PRIVATE_VARS.includes(key) || key.startsWith('RUNPOD_')) continue;
    env[key] = value;
  }
  return { ...env, ...spec.env };
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
export function createLocalProcessDriver(options: { baseEnv?: NodeJS.ProcessEnv } = {}): WorkerDriver {
  const baseEnv = options.baseEnv ?? process.env;
  return {
    kind: 'local-process',
    start: (spec, output) => startProcess(spec, output, workerProcessEnv(baseEnv, spec)),
  };
}

function startProcess(spec: WorkerStartSpec, output: WorkerOutput, env: NodeJS.ProcessEnv): Promise<WorkerHandle> {
  return new Promise((resolveStart, rejectStart) => {
    const child = spawn(spec.command, {
      shell: true,
      detached: true,
      env,
      cwd: spec.cwd,
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    child.stdout.setEncoding('utf8').on('data', (text: string) => output('stdout', text));
    child.stderr.setEncoding('utf8').on('data', (text: string) => output('stderr', text));

    let stopping: Promise<WorkerExit> | undefined;
    let leaderExit: WorkerExit | undefined;
    let settle: ((exit: WorkerExit) => void) | undefined;
    let ended = false;
    const exited = new Promise<WorkerExit>((resolve) => (settle = resolve));

    const killGroup = (signal: NodeJS.Signals): void => {
      if (child.pid === undefined) return;
      try {
        process.kill(-child.pid, signal);
      } catch {
        // ESRCH: the whole group is gone already.
      }
    };
    const finish = (exit: WorkerExit): void => {
      if (ended) return;
      ended = true;
      child.stdout.destroy();
      child.stderr.destroy();
      settle?.(exit);
    };
    /** The pipes should close once the group is dead; if something escaped with them, give up waiting. */
    const finishSoon = (): void => {
      setTimeout(() => finish(leaderExit ?? { code: null, signal: 'SIGKILL' }), PIPE_CLOSE_WAIT_MS).unref();
    };

    child.once('error', (err) => {
      if (child.pid === undefined) {
        rejectStart(err);
        finish({ code: null, signal: null, error: err.message });
      }
    });
    child.once('exit', (code, signal) => {
      leaderExit = { code, signal };
      if (!stopping) {
        killGroup('SIGKILL');
        finishSoon();
      }
    });
    child.once('close', () => finish(leaderExit ?? { code: null, signal: null }));
    child.once('spawn', () => {
      resolveStart({
        pid: child.pid ?? null,
        exited,
        stop(graceMs: number): Promise<WorkerExit> {
          stopping ??= (async () => {
            if (ended) return exited;
            killGroup('SIGTERM');
            const timer = setTimeout(() => {
              killGroup('SIGKILL');
              finishSoon();
            }, graceMs);
            timer.unref();
            const exit = await exited;
            clearTimeout(timer);
            return exit;
          })();
          return stopping;
        },
      });
    });
  });
}
