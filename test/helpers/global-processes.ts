// vitest globalSetup: one folder for the whole run, made TMPDIR of every process the run starts
// (test processes, gateways, worker processes and the pool's workers, which inherit TMPDIR,
// embedded PostgreSQL). At the end — the run's teardown, or the runner's exit after Ctrl-C — every
// process still carrying that folder in its environment is killed and the folder removed, so a
// failed or interrupted run leaves nothing running and no temp files behind.
import { chmodSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { childrenOf, processesOfRun, RUN_DIR_ENV } from './processes.js';

/** Set once per runner process: vitest runs this setup once per project. */
const OWNER = Symbol.for('gantry.test.runDir');
type Marked = typeof globalThis & { [OWNER]?: string };

/** Kills every process of the run but this runner and its test processes; returns what it killed. */
export function sweepRun(runDir: string): string[] {
  const spared = new Set([process.pid, ...childrenOf(process.pid)]);
  const left = processesOfRun(runDir, spared);
  for (const p of left) {
    try {
      process.kill(p.pid, 'SIGKILL');
    } catch {
      // gone meanwhile
    }
  }
  return left.map((p) => `${p.pid} ${p.command.slice(0, 160)}`);
}

export default function setup(): (() => void) | undefined {
  const marked = globalThis as Marked;
  if (marked[OWNER]) return undefined;
  const runDir = mkdtempSync(join(tmpdir(), 'gantry-test-run-'));
  // Reachable by the `postgres` user: an embedded PostgreSQL server keeps its data here.
  chmodSync(runDir, 0o755);
  marked[OWNER] = runDir;
  process.env[RUN_DIR_ENV] = runDir;
  process.env.TMPDIR = runDir;
  let done = false;
  const finish = (): void => {
    if (done) return;
    done = true;
    const left = sweepRun(runDir);
    if (left.length > 0) process.stderr.write(`gantry tests: killed ${left.length} process(es) the run left:\n  ${left.join('\n  ')}\n`);
    rmSync(runDir, { recursive: true, force: true });
  };
  process.once('exit', finish);
  return finish;
}
