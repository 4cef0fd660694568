// `gantry endpoints create|update` with the fleet's settings (--priority, --share-weight,
// --preemptible, --flashboot) against a real gateway, and `gantry endpoints workers` printing an
// endpoint's cold starts under its workers. Needs `npm run build` (the CLI runs from dist/).
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { formatWorkerListing } from '../../src/cli/endpoint-commands.js';
import { startTestGantry, type TestGantry } from '../helpers/gantry.js';
import { runCli } from './run-cli.js';

describe('fleet settings on the command line', () => {
  let t: TestGantry;
  const cli = (...args: string[]) => runCli(args, { GANTRY_URL: t.url, GANTRY_ADMIN_KEY: t.adminKey });

  beforeAll(async () => {
    t = await startTestGantry();
  });
  afterAll(async () => {
    await t?.close();
  });

  it('sets priority, share weight, preemptible and flashboot, and refuses bad values before sending', async () => {
    const created = await cli('endpoints', 'create', 'fleet', '--priority', '80', '--share-weight', '3', '--preemptible', 'true', '--flashboot', 'true', '--json');
    expect(created.code).toBe(0);
    expect(JSON.parse(created.stdout)).toMatchObject({ id: 'fleet', priority: 80, shareWeight: 3, preemptible: true, flashboot: true });
    const updated = await cli('endpoints', 'update', 'fleet', '--flashboot', 'false', '--json');
    expect(JSON.parse(updated.stdout)).toMatchObject({ priority: 80, preemptible: true, flashboot: false });
    const bad = await cli('endpoints', 'update', 'fleet', '--flashboot', 'yes');
    expect(bad.code).toBe(2);
    expect(bad.stderr).toContain("--flashboot must be true or false, got 'yes'");
    const tooHigh = await cli('endpoints', 'update', 'fleet', '--priority', '101');
    expect(tooHigh.code).toBe(2);
    expect(tooHigh.stderr).toMatch(/--priority/);
    expect((await t.admin.getEndpoint('fleet')).priority).toBe(80);
  });

  it('prints the cold starts under the workers', () => {
    const summary = (count: number, ms: number | null) => ({ count, window: count, p70Ms: ms, p90Ms: ms, p98Ms: ms, lastMs: ms });
    const text = formatWorkerListing({ workers: [], hosts: [], coldStarts: { ...summary(3, 900), start: summary(1, 1500), resume: summary(2, 24) } });
    expect(text.split('\n').map((l) => l.trimEnd())).toEqual([
      'no workers',
      '',
      'COLD STARTS  COUNT  P70      P90      P98      LAST',
      'all          3      900 ms   900 ms   900 ms   900 ms',
      'start        1      1500 ms  1500 ms  1500 ms  1500 ms',
      'resume       2      24 ms    24 ms    24 ms    24 ms',
    ]);
    expect(formatWorkerListing({ workers: [], hosts: [], coldStarts: { ...summary(0, null), start: summary(0, null), resume: summary(0, null) } })).toBe('no workers');
  });
});
