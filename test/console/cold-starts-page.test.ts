// The endpoint's cold starts on the console's Workers page, in headless Chromium (the Debian
// package, driven by playwright-core) against a real gateway whose pool runs the SDK's echo
// worker as a local process: a job sent to an endpoint with no worker makes one cold start,
// which the page shows with its count and quantiles, as the admin API answers them.
// Needs `npm run build` (the page is dist/console; the worker runs dist/).
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { noBrowser, openBrowser, type ConsoleBrowser } from '../helpers/browser.js';
import { eventually, startTestGantry, type TestGantry } from '../helpers/gantry.js';

const ROOT = fileURLToPath(new URL('../..', import.meta.url));
const CLI = join(ROOT, 'dist/src/cli/main.js');
const ECHO = `exec node ${JSON.stringify(CLI)} worker ${JSON.stringify(join(ROOT, 'dist/examples/echo-worker.js'))}`;

describe.skipIf(noBrowser)('cold starts on the Workers page', () => {
  let t: TestGantry;
  let b: ConsoleBrowser;

  beforeAll(async () => {
    if (!existsSync(CLI) || !existsSync(join(ROOT, 'dist/console/app.js'))) throw new Error('run `npm run build` first');
    t = await startTestGantry({ autoscalerIntervalMs: 50, workerStopGraceMs: 5_000 });
    b = await openBrowser();
  }, 60_000);
  afterAll(async () => {
    await b?.close();
    await t?.close();
  }, 30_000);

  it('shows the count and p70/p90/p98 of the endpoint’s cold starts', async () => {
    await t.createEndpoint('cold-ui', { workersMax: 1, idleTimeout: 60, worker: { command: ECHO } });
    const job = await t.client().runSync('cold-ui', { input: { hello: 'cold' } }, { timeoutMs: 60_000 });
    expect(job.status).toBe('COMPLETED');
    const listing = await eventually(async () => {
      const l = await t.admin.workerListing('cold-ui');
      return l.coldStarts?.count === 1 ? l : undefined;
    }, 20_000, 'the cold start to be counted');
    const p90 = listing.coldStarts!.p90Ms!;

    await b.signIn(t.url, t.adminKey);
    const { page } = b;
    await page.goto(`${t.url}/console/#/workers/cold-ui`);
    const table = page.getByRole('table', { name: 'Cold starts' });
    const shown = p90 < 1000 ? `${p90} ms` : `${(p90 / 1000).toFixed(1)} s`;
    // All: one, its p70, p90 and p98 the same duration; New worker: the same; Resumed: none.
    await table.getByRole('row', { name: `All 1 ${shown} ${shown} ${shown} ${shown}` }).waitFor();
    await table.getByRole('row', { name: `New worker 1 ${shown} ${shown} ${shown} ${shown}` }).waitFor();
    await table.getByRole('row', { name: 'Resumed (flashboot) 0 – – – –' }).waitFor();
    expect(b.faults).toEqual([]);
  }, 90_000);
});
