// The console's job page names a traced job's trace (issue 27, docs/observability.md), in a real
// browser: headless Chromium (playwright-core) against a gateway whose tracing exports to the
// real OTLP/HTTP receiver of the tracing tests. A job submitted with a client's `traceparent`
// shows that trace's id on its page, the id its spans carry at the receiver.
import { randomBytes } from 'node:crypto';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { chromium, type Browser } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { eventually, startTestGantry, type TestGantry } from '../helpers/gantry.js';
import { call, uniqueId } from '../http/http-helpers.js';
import { startOtlpReceiver, type OtlpReceiver } from '../tracing/otlp-receiver.js';

const CHROMIUM = '/usr/bin/chromium';
const ROOT = fileURLToPath(new URL('../..', import.meta.url));

// With CI=true a missing Chromium fails the run instead of skipping (.ci/run installs it).
describe.skipIf(!existsSync(CHROMIUM) && !process.env.CI)("the job page's trace id in headless Chromium", () => {
  let t: TestGantry;
  let receiver: OtlpReceiver;
  let browser: Browser;

  beforeAll(async () => {
    if (!existsSync(join(ROOT, 'dist/console/app.js'))) throw new Error('run `npm run build` first');
    receiver = await startOtlpReceiver();
    t = await startTestGantry({}, { env: { OTEL_EXPORTER_OTLP_ENDPOINT: receiver.url, OTEL_BSP_SCHEDULE_DELAY: '50' } });
    browser = await chromium.launch({ executablePath: CHROMIUM, args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-background-networking', '--disable-component-update', '--no-first-run'] });
  }, 60_000);
  afterAll(async () => {
    await browser?.close();
    await t?.close();
    await receiver?.close();
  }, 30_000);

  it("shows the trace id of a job submitted with a client's traceparent", async () => {
    const ep = uniqueId('tr-ui');
    await t.createEndpoint(ep);
    const traceId = randomBytes(16).toString('hex');
    const submitted = await call(t.url, 'POST', `/v2/${ep}/run`, { key: t.adminKey, body: { input: {} }, headers: { traceparent: `00-${traceId}-${randomBytes(8).toString('hex')}-01` } });
    const id = submitted.json.id as string;
    const submit = await eventually(async () => receiver.spans.find((s) => s.name === 'job.submit' && s.attributes['gantry.job.id'] === id), 20_000, 'the submit span');
    expect(submit.traceId).toBe(traceId);

    const page = await browser.newPage();
    await page.goto(`${t.url}/console/`);
    await page.getByLabel('Admin API key').fill(t.adminKey);
    await page.getByRole('button', { name: 'Sign in' }).click();
    await page.getByRole('heading', { name: 'Endpoints' }).waitFor();
    await page.goto(`${t.url}/console/#/job/${ep}/${id}`);
    await page.getByRole('heading', { name: 'Trace' }).waitFor();
    expect(await page.locator('[data-trace-id]').textContent()).toBe(traceId);
    await page.close();
  }, 60_000);
});
