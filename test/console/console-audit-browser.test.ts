// The console's Audit log page in a real browser (headless Debian Chromium, playwright-core)
// against a real gateway: a wrong password, then the right one, a key created from the API keys
// page and an endpoint changed through the admin API show up with who (the console session or
// the admin key), from where and what changed; the action filter narrows the list; no secret
// (the env value, the password, the new key) is on the page, and nothing breaks the CSP. A
// screenshot goes to a temp folder, or to docs/screenshots with UPDATE_SCREENSHOTS=1.
import { existsSync } from 'node:fs';
import type { Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { noBrowser, openBrowser, type ConsoleBrowser } from '../helpers/browser.js';
import { startTestGantry, type TestGantry } from '../helpers/gantry.js';

const PASSWORD = 'browser audit console password';
const ENV_SECRET = 'browser-env-value-SECRET-5e2a';

let t: TestGantry;
let b: ConsoleBrowser;
let page: Page;

const nav = (name: string) => page.getByRole('navigation', { name: 'Console' }).getByRole('link', { name, exact: true });

describe.skipIf(noBrowser)('the console audit log page in headless Chromium', () => {
  beforeAll(async () => {
    if (!existsSync(new URL('../../dist/console/app.js', import.meta.url))) throw new Error('run `npm run build` first');
    t = await startTestGantry({ consolePassword: PASSWORD });
    await t.admin.createEndpoint({ id: 'audited-ui', worker: { command: 'node w.js', env: { API_TOKEN: ENV_SECRET } } } as never);
    b = await openBrowser();
    page = b.page;
  }, 60_000);
  afterAll(async () => {
    await b?.close();
    await t?.close();
  }, 30_000);

  it('lists sign-ins and changes with who, from where and what changed, filters by action, and shows no secret', async () => {
    await page.goto(`${t.url}/console/`);
    await page.getByLabel('Console password').fill('not the password at all');
    await page.getByRole('button', { name: 'Sign in' }).click();
    await page.getByRole('alert').waitFor();
    await page.getByLabel('Console password').fill(PASSWORD);
    await page.getByRole('button', { name: 'Sign in' }).click();
    await page.getByRole('heading', { name: 'Endpoints' }).waitFor();

    // A change made in the console: a key from the API keys page.
    await nav('API keys').click();
    const form = page.getByRole('form', { name: 'Create an API key' });
    await form.getByLabel('Name').fill('made in the console');
    await form.getByRole('button', { name: 'Create key' }).click();
    const newKey = (await page.locator('#new-key').textContent())!;
    expect(newKey).toMatch(/^gk_/);
    // And one through the admin API with the admin key.
    await t.admin.updateEndpoint('audited-ui', { workersMax: 6 });

    await nav('Audit log').click();
    await page.getByRole('heading', { name: 'Audit log' }).waitFor();
    const table = page.getByRole('table', { name: 'Audit entries' });
    const keyRow = table.getByRole('row', { name: /key\.create/ }).filter({ hasText: 'made in the console' });
    await keyRow.waitFor();
    expect(await keyRow.textContent()).toMatch(/admin \(console password\)\s*console [0-9a-f]{12}/);
    expect(await keyRow.textContent()).toContain('127.0.0.1');
    const updateRow = table.getByRole('row', { name: /endpoint\.update/ });
    expect(await updateRow.textContent()).toContain('admin (GANTRY_ADMIN_KEY)');
    expect(await updateRow.textContent()).toContain('workersMax 3 → 6');
    const createRow = table.getByRole('row', { name: /endpoint\.create/ });
    expect(await createRow.textContent()).toContain('env added: API_TOKEN');
    const signIns = table.getByRole('row', { name: /console\.sign-in/ });
    expect(await signIns.count()).toBe(2);
    expect(await signIns.nth(0).textContent()).toContain('ok');
    expect(await signIns.nth(1).textContent()).toContain('failed');
    await b.shot('audit');

    const body = (await page.locator('body').textContent())!;
    for (const secret of [ENV_SECRET, PASSWORD, newKey, t.adminKey]) expect(body).not.toContain(secret);

    await page.getByLabel('Action').selectOption('endpoint.');
    await page.getByRole('button', { name: 'Filter' }).click();
    await expect.poll(async () => (await table.getByRole('row').allTextContents()).slice(1).every((r) => r.includes('endpoint.'))).toBe(true);
    expect(await table.getByRole('row').count()).toBe(3);
    expect(b.problems.filter((p) => !p.startsWith('Failed to load resource'))).toEqual([]);
  }, 60_000);
});
