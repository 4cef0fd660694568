import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import type { WorkerStartSpec } from '../../src/pool/driver.js';
import { createLocalProcessDriver, workerProcessEnv } from '../../src/pool/local-process-driver.js';

const spec = (command: string, overrides: Partial<WorkerStartSpec> = {}): WorkerStartSpec => ({
  workerId: 'w1',
  endpointId: 'ep',
  command,
  env: {},
  ...overrides,
});

/** A node one-liner as a shell command (JSON quoting is valid for sh here: no $ or backticks). */
const nodeCmd = (code: string): string => `node -e ${JSON.stringify(code)}`;

function collect(): { out: string; output: (s: 'stdout' | 'stderr', t: string) => void } {
  const c = { out: '', output: (s: 'stdout' | 'stderr', t: string) => void (c.out += `${s}:${t}`) };
  return c;
}

/** True while the process runs; a zombie (dead, not yet reaped by init) counts as gone. */
function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
  } catch {
    return false;
  }
  try {
    return !/^\d+ \(.*\) Z/.test(readFileSync(`/proc/${pid}/stat`, 'utf8'));
  } catch {
    return true; // no /proc (macOS): trust kill(0)
  }
}

describe('local process driver', () => {
  const driver = createLocalProcessDriver();

  it('runs the command through the shell with its env and cwd, and reports its output and exit code', async () => {
    const c = collect();
    const handle = await driver.start(
      spec(nodeCmd("console.log(process.env.RUNPOD_POD_ID, process.cwd()); console.error('boom: missing model'); process.exit(3)"), {
        env: { RUNPOD_POD_ID: 'w1' },
        cwd: '/tmp',
      }),
      c.output,
    );
    expect(handle.pid).toBeGreaterThan(0);
    expect(await handle.exited).toEqual({ code: 3, signal: null });
    expect(c.out).toContain('stdout:w1 /tmp');
    expect(c.out).toContain('stderr:boom: missing model');
  });

  it('stop: SIGTERM lets the worker drain and exit by itself within the grace', async () => {
    const c = collect();
    const handle = await driver.start(
      spec(nodeCmd("process.on('SIGTERM', () => { console.log('draining'); setTimeout(() => { console.log('drained'); process.exit(0); }, 300); }); console.log('up'); setInterval(() => {}, 1000)")),
      c.output,
    );
    await until(() => c.out.includes('up'));
    const started = Date.now();
    await handle.stop(10_000);
    expect(Date.now() - started).toBeGreaterThanOrEqual(250);
    expect(Date.now() - started).toBeLessThan(10_000); // it exited by itself, before the grace ran out
    expect(c.out).toContain('drained'); // the shell died at once; the worker was waited for
    expect(handle.stop(10_000)).toBe(handle.stop(1)); // idempotent
  });

  it('stop: a worker that ignores SIGTERM is killed after the grace, with what it started', async () => {
    const c = collect();
    // The shell starts a grandchild (sleep) in the background; both must go.
    const handle = await driver.start(
      spec(`sleep 30 & echo child $! && ${nodeCmd("process.on('SIGTERM', () => console.log('ignored')); console.log('up'); setInterval(() => {}, 1000)")}`),
      c.output,
    );
    await until(() => c.out.includes('up'));
    const child = Number(/child (\d+)/.exec(c.out)?.[1]);
    expect(alive(child)).toBe(true);
    const started = Date.now();
    const exit = await handle.stop(300);
    expect(Date.now() - started).toBeGreaterThanOrEqual(280);
    expect(exit.signal).toMatch(/SIG(TERM|KILL)/);
    expect(c.out).toContain('ignored');
    await until(() => !alive(child));
  });

  it('killing the shell alone ends the whole worker (no unsupervised leftovers)', async () => {
    const c = collect();
    const handle = await driver.start(spec(`${nodeCmd("console.log('pid', process.pid); setInterval(() => {}, 1000)")}; echo after`), c.output);
    await until(() => c.out.includes('pid'));
    const worker = Number(/pid (\d+)/.exec(c.out)?.[1]);
    expect(worker).not.toBe(handle.pid);
    process.kill(handle.pid ?? 0, 'SIGKILL');
    const exit = await handle.exited;
    expect(exit.signal).toBe('SIGKILL');
    await until(() => !alive(worker));
  });

  it('a missing working directory fails the start', async () => {
    await expect(driver.start(spec('true', { cwd: '/no/such/dir' }), () => {})).rejects.toThrow(/ENOENT/);
  });

  it('passes the gateway environment on without its secrets or inherited RUNPOD_* variables', () => {
    const env = workerProcessEnv(
      { PATH: '/bin', GANTRY_ADMIN_KEY: 'admin', GANTRY_SECRET_KEY: 's', DATABASE_URL: 'postgres://x', RUNPOD_POD_ID: 'old', HOME: '/h' },
      { env: { RUNPOD_POD_ID: 'w1', MODEL: 'm' } },
    );
    expect(env).toEqual({ PATH: '/bin', HOME: '/h', RUNPOD_POD_ID: 'w1', MODEL: 'm' });
  });
});

async function until(check: () => boolean, timeoutMs = 5_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!check()) {
    if (Date.now() > deadline) throw new Error('timed out');
    await new Promise((r) => setTimeout(r, 10));
  }
}

describe('local process driver: workers left by a killed gateway', () => {
  it('the next driver on the same state folder stops them, and nothing else', async () => {
    const stateDir = mkdtempSync(join(tmpdir(), 'gantry-pool-state-'));
    try {
      // The first gateway starts a worker and "dies": nobody stops it.
      const first = createLocalProcessDriver({ stateDir });
      const c = collect();
      const orphan = await first.start(spec(nodeCmd("console.log('up'); setInterval(() => {}, 1000)"), { workerId: 'ep-orphan1', env: { RUNPOD_POD_ID: 'ep-orphan1' } }), c.output);
      await until(() => c.out.includes('up'));
      expect(existsSync(join(stateDir, 'ep-orphan1.pid'))).toBe(true);
      // A pid file naming a live process that is not that worker (this test process) is left alone.
      writeFileSync(join(stateDir, 'ep-impostor.pid'), String(process.pid));

      const second = createLocalProcessDriver({ stateDir });
      expect(await second.reapOrphans!(2_000)).toBe(1);
      expect(await orphan.exited).toMatchObject({ signal: expect.stringMatching(/SIGTERM|SIGKILL/) as string });
      expect(alive(orphan.pid!)).toBe(false);
      expect(alive(process.pid)).toBe(true);
      expect(await second.reapOrphans!(2_000)).toBe(0); // the files are gone
    } finally {
      rmSync(stateDir, { recursive: true, force: true });
    }
  });
});
