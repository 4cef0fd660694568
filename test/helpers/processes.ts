// Every process a test starts goes through `spawnOwned`: in a process group of its own, which
// this test process kills when it ends (the file's last afterAll, see setup-file.ts, and
// `process.on('exit')`), and marked with the run's folder in its environment, by which the
// suite's global teardown (global-setup.ts) finds and kills whatever is left after a crash —
// the worker processes of a gateway killed with -9 included, since TMPDIR is passed on to them.
import { spawn, type ChildProcess, type SpawnOptions } from 'node:child_process';
import { readdirSync, readFileSync } from 'node:fs';

/** Names the folder of one `vitest` run; set by the global setup, inherited by every process of the run. */
export const RUN_DIR_ENV = 'GANTRY_TEST_RUN_DIR';

/** The process groups this test process started and that may still have members. */
const groups = new Set<number>();

/** Whether any process of group `pgid` is alive. */
function groupAlive(pgid: number): boolean {
  try {
    process.kill(-pgid, 0);
    return true;
  } catch {
    return false;
  }
}

/**
 * `spawn` for tests: the child leads a process group of its own (so that killing it reaches what
 * it started, and a terminal's Ctrl-C reaches only the test runner), carries the run's marker,
 * and is killed with its group when this test process ends, if the test has not ended it.
 *
 * @example const child = spawnOwned('python3', ['-u', script], { env: { ...process.env, ...workerEnv }, stdio: 'ignore' });
 */
export function spawnOwned(command: string, args: readonly string[], options: SpawnOptions = {}): ChildProcess {
  const env = { ...(options.env ?? process.env) };
  const runDir = process.env[RUN_DIR_ENV];
  if (runDir) Object.assign(env, { [RUN_DIR_ENV]: runDir, TMPDIR: env.TMPDIR ?? runDir });
  const child = spawn(command, args, { ...options, env, detached: true });
  const pgid = child.pid;
  if (pgid === undefined) return child; // it failed to start: 'error' tells the caller
  groups.add(pgid);
  // A group lives on after its leader while members remain; forget it only once it is empty, so
  // that its number, free again, is never signalled later.
  child.once('exit', () => {
    if (!groupAlive(pgid)) groups.delete(pgid);
  });
  return child;
}

/** SIGKILLs every process group this test process started that is still alive; returns how many were. */
export function killOwned(): number {
  let killed = 0;
  for (const pgid of groups) {
    try {
      process.kill(-pgid, 'SIGKILL');
      killed++;
    } catch {
      // ESRCH: the group is gone already
    }
  }
  groups.clear();
  return killed;
}

process.on('exit', () => killOwned());

/** A process found by its environment: pid and command line. */
export interface MarkedProcess {
  pid: number;
  command: string;
}

/**
 * The processes whose environment names `runDir` as the run's folder or as their TMPDIR (so
 * pool workers, which inherit only an allow-list, are found too), except `exclude`.
 */
export function processesOfRun(runDir: string, exclude: ReadonlySet<number>): MarkedProcess[] {
  const marks = [`${RUN_DIR_ENV}=${runDir}`, `TMPDIR=${runDir}`];
  const found: MarkedProcess[] = [];
  for (const entry of readdirSync('/proc')) {
    const pid = Number(entry);
    if (!Number.isInteger(pid) || exclude.has(pid)) continue;
    try {
      const env = readFileSync(`/proc/${pid}/environ`, 'latin1').split('\0');
      if (!env.some((v) => marks.includes(v))) continue;
      const command = readFileSync(`/proc/${pid}/cmdline`, 'latin1').split('\0').join(' ').trim();
      found.push({ pid, command });
    } catch {
      // gone meanwhile, or not ours to read
    }
  }
  return found;
}

/** The pids of `pid`'s direct children (from /proc). */
export function childrenOf(pid: number): Set<number> {
  const children = new Set<number>();
  for (const entry of readdirSync('/proc')) {
    const child = Number(entry);
    if (!Number.isInteger(child)) continue;
    try {
      // /proc/PID/stat: "pid (comm) state ppid ..."; comm may hold spaces and parentheses.
      const stat = readFileSync(`/proc/${child}/stat`, 'latin1');
      const ppid = Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]);
      if (ppid === pid) children.add(child);
    } catch {
      // gone meanwhile
    }
  }
  return children;
}
