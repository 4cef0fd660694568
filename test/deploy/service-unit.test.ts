// deploy/gantry.service (issue 26.6): systemd's own check passes with nothing to say, and the
// stop timeout outlasts the gateway's shutdown with the default settings (the pool's stop grace
// for the jobs in flight, then the wait for requests in flight).
import { spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { loadConfig, poolStopGraceMs } from '../../src/config/config.js';
import { SHUTDOWN_GRACE_MS } from '../../src/server.js';

const UNIT = fileURLToPath(new URL('../../deploy/gantry.service', import.meta.url));
const hasSystemd = spawnSync('systemd-analyze', ['--version']).status === 0;

/** The value of `key` in the unit (the last one set wins, as in systemd). */
function setting(key: string): string | undefined {
  const lines = readFileSync(UNIT, 'utf8').split('\n').filter((l) => l.startsWith(`${key}=`));
  return lines.at(-1)?.slice(key.length + 1);
}

describe('deploy/gantry.service', () => {
  it.runIf(hasSystemd || process.env.CI === 'true')('passes systemd-analyze verify without a warning', () => {
    const r = spawnSync('systemd-analyze', ['verify', UNIT], { encoding: 'utf8' });
    expect(r.stderr + r.stdout).toBe('');
    expect(r.status).toBe(0);
  });

  it('waits longer than the shutdown grace, restarts on failure, runs as its user on its data folder', () => {
    const shutdownMs = poolStopGraceMs(loadConfig({})) + SHUTDOWN_GRACE_MS;
    expect(Number(setting('TimeoutStopSec')) * 1000).toBeGreaterThan(shutdownMs + 10_000);
    expect(setting('KillMode')).toBe('mixed');
    expect(setting('Restart')).toBe('on-failure');
    expect(setting('User')).toBe('gantry');
    expect(setting('StateDirectory')).toBe('gantry');
    expect(setting('Environment=GANTRY_DATA_DIR')).toBe('/var/lib/gantry');
    expect(setting('EnvironmentFile')).toBe('-/etc/gantry/gantry.env');
    expect(setting('ExecStart')).toMatch(/ dist\/src\/cli\/main\.js serve$|\/main\.js serve$/);
  });
});
