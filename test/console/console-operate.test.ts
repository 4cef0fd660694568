// Operating Gantry from the console (issue 25, item 4), in headless Chromium (Debian
// `chromium`, driven by playwright-core) against a real gateway whose pool runs real worker
// processes (the SDK's echo worker, the toy LLM worker): an endpoint's page whose snippets,
// copied from the page and run as written (curl in bash, runpod-sdk and the OpenAI client in
// node), complete jobs; purge and delete asked for first; a job's times, a webhook resent and a
// cancel asked for first; the test editor showing the running job's worker, progress and
// elapsed time, and cancelling it; workers with their jobs done and a hand worker's first-seen
// time; managed keys; the overview; every column reachable at a phone's width (390 px).
// Screenshots go to a temp folder, or to docs/screenshots with UPDATE_SCREENSHOTS=1.
// Needs `npm run build` (the page is dist/console; the workers run dist/).
import { execFile } from 'node:child_process';
import { existsSync, mkdtempSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import type { Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { noBrowser, openBrowser, type ConsoleBrowser } from '../helpers/browser.js';
import { eventually, startTestGantry, type TestGantry } from '../helpers/gantry.js';
import { call, startReceiver, workerFor, type Receiver } from '../http/http-helpers.js';

const ROOT = fileURLToPath(new URL('../..', import.meta.url));
const CLI = join(ROOT, 'dist/src/cli/main.js');
const workerCommand = (example: string) => `exec node ${JSON.stringify(CLI)} worker ${JSON.stringify(join(ROOT, 'dist/examples', example))}`;
// Asynchronous: the gateway answering the snippet runs in this process.
const run = async (file: string, args: string[], env: NodeJS.ProcessEnv, input?: string): Promise<string> => {
  const child = promisify(execFile)(file, args, { env, encoding: 'utf8', timeout: 60_000 });
  if (input !== undefined) child.child.stdin?.end(input);
  return (await child).stdout;
};

let t: TestGantry;
let b: ConsoleBrowser;
let page: Page;
let runKey: string;
let hook: Receiver;

const shot = (name: string): Promise<void> => b.shot(name);
const statusOf = async (ep: string, id: string): Promise<string> => (await t.client().status(ep, id)).status;
const go = async (hash: string) => {
  await page.goto(`${t.url}/console/#/${hash}`);
};

/** The snippet the endpoint page shows under a tab, as text. */
async function snippet(label: string): Promise<string> {
  await page.getByRole('tab', { name: label }).click();
  return (await page.getByRole('tabpanel').locator('pre').textContent()) ?? '';
}

describe.skipIf(noBrowser)('operating Gantry from the console in headless Chromium', () => {
  beforeAll(async () => {
    if (!existsSync(CLI) || !existsSync(join(ROOT, 'dist/console/app.js'))) throw new Error('run `npm run build` first');
    t = await startTestGantry({ autoscalerIntervalMs: 50, workerStopGraceMs: 5_000, webhookRetryMs: 50, outboundAllow: ['127.0.0.1'] });
    runKey = await t.createKey(['run']);
    hook = await startReceiver();
    await t.createEndpoint('echo-op', { name: 'Echo to operate', workersMax: 1, idleTimeout: 600, worker: { command: workerCommand('echo-worker.js') } });
    await t.createEndpoint('llm-op', { workersMax: 1, idleTimeout: 600, worker: { command: workerCommand('llm-toy-worker.js') } });
    b = await openBrowser({ width: 1280, height: 900 });
    page = b.page;
    // A locator that never appears fails its step (named) well before the test's own timeout.
    page.setDefaultTimeout(15_000);
    await b.signIn(t.url, t.adminKey);
  }, 60_000);
  afterAll(async () => {
    await b?.close();
    await hook?.close();
    await t?.close();
  }, 30_000);

  it("shows an endpoint's URLs and snippets, and the snippets run as written complete a job", async () => {
    await page.getByRole('link', { name: 'echo-op' }).click();
    await page.getByRole('heading', { name: 'Endpoint echo-op' }).waitFor();
    await page.getByRole('table', { name: 'URLs' }).getByText(`${t.url}/v2/echo-op/runsync`).waitFor();
    // Times in human units: the default execution timeout is 10 min, not "600.00 s".
    expect(await page.locator('dt:text-is("Execution timeout") + dd').textContent()).toBe('10 min');
    const env = { ...process.env, GANTRY_API_KEY: runKey };

    const curl = await snippet('curl');
    expect(curl).toContain('$GANTRY_API_KEY');
    expect(curl).not.toContain(runKey);
    const byCurl = JSON.parse(await run('bash', ['-c', curl], env)) as Record<string, unknown>;
    expect(byCurl).toMatchObject({ status: 'COMPLETED', output: { hello: 'world' } });

    // The JavaScript snippets as ES modules in a folder whose node_modules is this package's (runpod-sdk, openai).
    const dir = mkdtempSync(join(tmpdir(), 'gantry-snippets-'));
    symlinkSync(join(ROOT, 'node_modules'), join(dir, 'node_modules'));
    writeFileSync(join(dir, 'run.mjs'), await snippet('runpod-sdk (JavaScript)'));
    const bySdk = JSON.parse(await run('node', [join(dir, 'run.mjs')], env)) as Record<string, unknown>;
    expect(bySdk).toMatchObject({ status: 'COMPLETED', output: { hello: 'world' } });

    // runpod-python is not installed here: its snippet is compiled by python3, not run.
    const python = await snippet('runpod-python');
    expect(python).toContain(`runpod.endpoint_url_base = "${t.url}/v2"`);
    await run('python3', ['-c', 'import ast, sys; ast.parse(sys.stdin.read())'], env, python);
    await shot('endpoint');

    // The OpenAI client against an endpoint whose worker serves the OpenAI routes.
    await go('endpoint/llm-op');
    writeFileSync(join(dir, 'openai.mjs'), await snippet('OpenAI client'));
    const byOpenAi = await run('node', [join(dir, 'openai.mjs')], env);
    expect(byOpenAi.trim().length).toBeGreaterThan(0);
    const requests = (await call(t.url, 'GET', '/v2/llm-op/requests', { key: t.adminKey })).json.requests as { status: string }[];
    expect(requests.filter((r) => r.status === 'COMPLETED').length).toBeGreaterThanOrEqual(2); // the model list, the chat completion
  }, 120_000);

  it('sets worker settings as fields, each with its default and range, a bad one refused naming the field', async () => {
    await go('endpoint/echo-op');
    await page.getByRole('button', { name: 'Edit echo-op' }).click();
    const edit = page.getByRole('form', { name: 'Edit echo-op' });
    // From the API's own schema (/openapi.json): the default, the range, the value in human units.
    await expect.poll(() => edit.locator('#hint-idleTimeout').textContent()).toBe('default 5 (5 s) · 1 to 86400 · = 10 min');
    expect(await edit.locator('#hint-executionTimeoutMs').textContent()).toBe('default 600000 (10 min) · 5001 to 604800000 · = 10 min');
    expect(await edit.getByRole('radio', { name: 'Command (a local process)' }).isChecked()).toBe(true);
    await shot('endpoint-settings');
    await edit.getByRole('button', { name: 'Cancel' }).click();

    await go('endpoints');
    await page.getByRole('button', { name: 'New endpoint' }).click();
    const form = page.getByRole('form', { name: 'New endpoint' });
    await form.getByLabel('Id', { exact: true }).fill('image-op');
    await form.getByLabel('Workers, maximum').fill('0');
    await form.getByRole('radio', { name: 'Image (a container)' }).check();
    await form.getByLabel('Image', { exact: true }).fill('registry.example:5000/team/worker:1.2');
    await form.getByLabel(/^Command \(optional/).fill('["python", "-u", "handler.py"]');
    await form.getByLabel('GPUs', { exact: true }).fill('1');
    await form.getByLabel('GPU types', { exact: true }).fill('L4, A100-80GB');
    await form.getByLabel('Memory (MiB)').fill('5');
    await form.getByLabel(/^Environment/).fill('MODEL=tiny\nLOG_LEVEL=debug');
    await form.getByLabel(/^Volumes/).fill('/srv/models:/models:ro');
    await form.getByRole('button', { name: 'Create endpoint' }).click();
    await expect.poll(() => form.getByRole('alert').textContent()).toContain('worker.memoryMb');
    await form.getByLabel('Memory (MiB)').fill('2048');
    await form.getByRole('button', { name: 'Create endpoint' }).click();
    await form.waitFor({ state: 'detached' });
    expect((await t.admin.getEndpoint('image-op')).worker).toEqual({
      image: 'registry.example:5000/team/worker:1.2',
      command: ['python', '-u', 'handler.py'],
      env: { MODEL: 'tiny', LOG_LEVEL: 'debug' },
      gpus: 1,
      gpuTypes: ['L4', 'A100-80GB'],
      memoryMb: 2048,
      volumes: ['/srv/models:/models:ro'],
    });
    await t.admin.deleteEndpoint('image-op');
  }, 30_000);

  it('purges the queue and deletes the endpoint, each only once confirmed', async () => {
    await t.createEndpoint('doomed-op');
    const ids: string[] = [];
    for (const n of [1, 2, 3]) ids.push((await t.client().run('doomed-op', { input: { n } })).id);
    await go('endpoint/doomed-op');
    const health = page.getByLabel('Health', { exact: true });
    await health.getByText('3 queued').waitFor();
    await page.getByRole('button', { name: 'Purge queue' }).click();
    // Asked first: nothing is cancelled yet; "Keep it" leaves the queue as it was.
    await page.getByRole('button', { name: 'Keep it' }).click();
    expect(await statusOf('doomed-op', ids[0]!)).toBe('IN_QUEUE');
    await page.getByRole('button', { name: 'Purge queue' }).click();
    await page.getByRole('button', { name: 'Cancel 3 queued jobs' }).click();
    await page.getByRole('status').getByText('3 queued jobs cancelled').waitFor();
    for (const id of ids) expect(await statusOf('doomed-op', id)).toBe('CANCELLED');
    await health.getByText('0 queued').waitFor();

    await page.getByRole('button', { name: 'Delete endpoint' }).click();
    const confirm = page.getByRole('button', { name: 'Delete for good' });
    expect(await confirm.isDisabled()).toBe(true);
    await page.getByLabel('Type doomed-op to confirm').fill('doomed-o');
    expect(await confirm.isDisabled()).toBe(true);
    await page.getByLabel('Type doomed-op to confirm').fill('doomed-op');
    await confirm.click();
    await page.getByRole('heading', { name: 'Endpoints', exact: true }).waitFor();
    await expect(t.admin.getEndpoint('doomed-op')).rejects.toMatchObject({ status: 404 });
  }, 60_000);

  it("shows a job's created, started and finished times, resends its webhook, and cancels a job only once confirmed", async () => {
    const { id } = await t.client(runKey).run('echo-op', { input: { n: 7 }, webhook: hook.url });
    await eventually(async () => (hook.calls.length === 1 ? true : undefined), 30_000, 'the webhook');
    await go(`job/echo-op/${id}`);
    await page.getByRole('heading', { name: 'Times' }).waitFor();
    expect(await statusOf('echo-op', id)).toBe('COMPLETED');
    const datetimes = await page.locator('#h-times + dl time').evaluateAll((els) => els.map((e) => e.getAttribute('datetime')));
    expect(datetimes).toHaveLength(3);
    const [created, started, finished] = datetimes.map((d) => Date.parse(d ?? ''));
    expect(created).toBeLessThanOrEqual(started!);
    expect(started).toBeLessThanOrEqual(finished!);
    await page.getByText('Delivered', { exact: true }).waitFor();
    await page.getByRole('button', { name: 'Resend webhook' }).click();
    await page.getByRole('status').getByText('Webhook resent').waitFor();
    await eventually(async () => (hook.calls.length === 2 ? true : undefined), 10_000, 'the resent webhook');
    expect(hook.calls[1]!.body).toMatchObject({ id, status: 'COMPLETED' });
    await page.getByRole('table', { name: 'Webhook' }).locator('tbody tr').nth(1).waitFor();
    // Open in test editor: the job's input in the editor, on its endpoint.
    await page.getByRole('button', { name: 'Open in test editor' }).click();
    await page.getByRole('heading', { name: 'Test editor' }).waitFor();
    // Chosen once the endpoint list has loaded.
    await expect.poll(() => page.getByLabel('Endpoint').inputValue()).toBe('echo-op');
    expect(JSON.parse(await page.getByLabel('Request body (JSON)').inputValue())).toEqual({ input: { n: 7 } });

    const running = (await t.client().run('echo-op', { input: { delayMs: 120_000 } })).id;
    await eventually(async () => ((await statusOf('echo-op', running)) === 'IN_PROGRESS' ? true : undefined), 30_000, 'the job to run');
    await go(`job/echo-op/${running}`);
    await page.getByText('IN_PROGRESS').first().waitFor();
    await page.getByRole('button', { name: 'Cancel job' }).click();
    await page.getByRole('button', { name: 'Keep it' }).click();
    expect(await statusOf('echo-op', running)).toBe('IN_PROGRESS');
    await page.getByRole('button', { name: 'Cancel job' }).click();
    await page.getByRole('button', { name: 'Yes, cancel it' }).click();
    await page.getByText('CANCELLED').first().waitFor();
    expect(await statusOf('echo-op', running)).toBe('CANCELLED');
    await shot('job-times');
  }, 90_000);

  it("shows the running job's worker, progress and elapsed time live in the test editor, and cancels it", async () => {
    await go('editor/echo-op');
    await page.getByLabel('Request body (JSON)').fill(JSON.stringify({ input: { progress: ['loading the model'], delayMs: 120_000 } }));
    await page.getByRole('button', { name: 'Send as run', exact: true }).click();
    const result = page.locator('[aria-label="Result"]');
    const live = result.getByLabel('Live');
    const workerId = (await t.admin.listWorkers('echo-op')).find((w) => w.state !== 'stopped')!.id;
    await live.getByText(workerId).waitFor({ timeout: 30_000 });
    await result.getByLabel('Progress').getByText('loading the model').waitFor({ timeout: 10_000 });
    const elapsed = live.getByLabel('Elapsed');
    const first = await elapsed.textContent();
    await expect.poll(() => elapsed.textContent(), { timeout: 10_000 }).not.toBe(first);
    await shot('test-editor-live');
    await live.getByRole('button', { name: 'Cancel job' }).click();
    await result.getByText('CANCELLED').first().waitFor({ timeout: 10_000 });
    const id = (await result.getByRole('heading').getByRole('link').textContent()) ?? '';
    expect(await statusOf('echo-op', id)).toBe('CANCELLED');
  }, 60_000);

  it('filters jobs by status and time', async () => {
    await go('jobs/echo-op');
    const count = page.getByText(/^Page 1 of \d+ \(/);
    await count.waitFor();
    await page.getByLabel('Status').selectOption('CANCELLED');
    await page.getByText(/\(2 jobs of \d+\)/).waitFor();
    expect(await page.getByRole('table', { name: 'Jobs' }).locator('tbody tr').count()).toBe(2);
    await page.getByLabel('Status').selectOption('COMPLETED');
    await page.getByLabel('Created').selectOption('15');
    expect(await page.getByRole('table', { name: 'Jobs' }).getByText('CANCELLED').count()).toBe(0);
    await page.getByRole('table', { name: 'Jobs' }).getByText('COMPLETED').first().waitFor();
    await shot('jobs-filtered');
  }, 30_000);

  it("lists a pool worker's jobs done and a hand worker's first-seen time", async () => {
    await t.createEndpoint('hand-op');
    const hand = workerFor(t, 'hand-op', await t.createKey(['worker']));
    expect((await hand.ping()).status).toBe(200);
    const rows = () => t.admin.listWorkers('hand-op');
    const firstSeen = (await rows())[0]!.firstSeenAt ?? '';
    // Seen again later: the first-seen time stays, the last-seen one moves.
    const later = await eventually(async () => {
      await hand.ping();
      const row = (await rows())[0]!;
      return row.lastSeenAt !== firstSeen ? row : undefined;
    }, 10_000, 'a later ping');
    expect(later.firstSeenAt).toBe(firstSeen);
    await go('workers/hand-op');
    const row = page.getByRole('table', { name: 'Workers' }).getByRole('row', { name: new RegExp(hand.id) });
    const shown = await page.evaluate((iso) => new Date(iso).toLocaleString(), firstSeen);
    await row.getByText(`first seen ${shown}`).waitFor();

    await go('workers/echo-op');
    const pool = page.getByRole('table', { name: 'Workers' });
    // The curl and runpod-sdk snippets, the job with the webhook, the two cancelled ones: none of them is "0".
    await pool.getByRole('cell', { name: /^\d+ \(2 not completed\)$/ }).waitFor();
    await shot('workers-jobs-done');
  }, 30_000);

  it("marks the pool workers' own keys as managed and asks before revoking one", async () => {
    await go('keys');
    const poolKey = page.getByRole('row', { name: /worker pool echo-op \(autoscaler\)/ });
    await poolKey.getByText('managed').waitFor();
    await poolKey.getByText(/^gk_.{5}…$/).waitFor();
    await poolKey.getByRole('button', { name: /^Revoke worker pool echo-op/ }).click();
    await poolKey.getByText(/cut off/).waitFor();
    await poolKey.getByRole('button', { name: 'Keep it' }).click();
    const named = (await t.admin.listKeys()).find((k) => k.name.startsWith('worker pool echo-op'))!;
    expect(named.managed).toBe(true);
    expect(named.lastUsedAt).not.toBeNull();
    await shot('api-keys-managed');
  });

  it('shows the overview across endpoints', async () => {
    await go('overview');
    const table = page.getByRole('table', { name: 'Endpoints overview' });
    const echo = table.getByRole('row', { name: /echo-op/ });
    await echo.waitFor();
    // The snippets' two jobs, the webhook job, the two cancelled ones at least; a worker running or idle; its cold start.
    expect(Number(await echo.getByRole('cell').nth(1).textContent())).toBeGreaterThanOrEqual(5);
    await echo.getByText(/1 (idle|running)/).waitFor();
    await echo.getByText(/^1: median /).waitFor();
    await shot('overview');
  });

  it('draws durations in the unit their largest value reads best in', async () => {
    // A job that works 2.5 s: the minute's execution p98 is seconds, not milliseconds.
    expect((await t.client().runSync('echo-op', { input: { delayMs: 2500 } })).status).toBe('COMPLETED');
    const charts = page.waitForResponse((r) => r.url().includes('/console/api/charts/echo-op'));
    await go('charts/echo-op');
    const points = ((await (await charts).json()) as { points: { delay: { p98: number | null }; execution: { p98: number | null } }[] }).points;
    const unitFor = (maxMs: number) => (maxMs < 1000 ? 'ms' : maxMs < 120_000 ? 's' : 'min');
    const largest = (kind: 'delay' | 'execution') => Math.max(0, ...points.map((p) => p[kind].p98 ?? 0));
    expect(largest('execution')).toBeGreaterThanOrEqual(1000);
    await page.locator('figure[aria-label="Execution time"] canvas').waitFor();
    expect(await page.locator('figure[aria-label="Execution time"]').getAttribute('data-unit')).toBe(unitFor(largest('execution')));
    expect(await page.locator('figure[aria-label="Delay time (queue)"]').getAttribute('data-unit')).toBe(unitFor(largest('delay')));
    expect(await page.locator('figure[aria-label="Queue depth (deepest per minute)"]').getAttribute('data-unit')).toBe('');
    await shot('charts-units');
  }, 30_000);

  it('reaches every column of every table at a phone\'s width', async () => {
    await page.setViewportSize({ width: 390, height: 844 });
    for (const hash of ['overview', 'endpoints', 'endpoint/echo-op', 'jobs/echo-op', 'workers/echo-op', 'keys']) {
      await go(hash);
      await page.locator('table tbody tr').first().waitFor();
      // The page itself does not scroll sideways; a wide table scrolls in its own box.
      const wide = await page.evaluate<string[]>(
        "[...document.querySelectorAll('body *')].filter((e) => e.getBoundingClientRect().right > 391 && !e.parentElement.closest('.scroll')).map((e) => e.tagName + '.' + e.className + ':' + Math.round(e.getBoundingClientRect().right)).slice(0, 12)",
      );
      expect(wide, `${hash}: outside a scrolling box`).toEqual([]);
      expect(await page.evaluate<number>('document.documentElement.scrollWidth'), hash).toBeLessThanOrEqual(390);
      for (const table of await page.locator('main table:not(.u-legend)').all()) {
        const last = table.locator('thead th').last();
        await last.scrollIntoViewIfNeeded();
        const box = await last.boundingBox();
        expect(box, `${hash}: a table's last column`).not.toBeNull();
        // Scrolled to, the column starts on the screen (a column wider than the screen is read by scrolling on).
        expect(box!.x, hash).toBeGreaterThanOrEqual(0);
        expect(box!.x, hash).toBeLessThan(390 - 16);
      }
      if (hash === 'endpoint/echo-op') await shot('endpoint-phone');
      if (hash === 'jobs/echo-op') await shot('jobs-phone');
    }
    await page.setViewportSize({ width: 1280, height: 900 });
    expect(b.faults).toEqual([]);
  }, 60_000);
});
