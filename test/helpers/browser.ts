// Headless Chromium for the console tests: the Debian package driven by playwright-core, one
// launch with the same flags everywhere, a page that records what goes wrong on it, the sign-in
// with the admin key, and screenshots (a temp folder, or docs/screenshots with UPDATE_SCREENSHOTS=1).
import { existsSync, mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { chromium, type Browser, type Page } from 'playwright-core';
import { scratchDir } from './scratch.js';

const CHROMIUM = '/usr/bin/chromium';
const ARGS = ['--headless', '--no-sandbox', '--disable-gpu', '--disable-background-networking', '--disable-component-update', '--no-first-run'];
const SHOTS = process.env.UPDATE_SCREENSHOTS === '1' ? fileURLToPath(new URL('../../docs/screenshots', import.meta.url)) : undefined;

/** Whether to skip the browser tests: Chromium is missing (with CI=true that fails the run instead). */
export const noBrowser = !existsSync(CHROMIUM) && !process.env.CI;

export interface ConsoleBrowser {
  browser: Browser;
  page: Page;
  /** The page's console errors and its uncaught errors, as they come. */
  problems: string[];
  /** Its uncaught errors alone. */
  faults: string[];
  /** Opens `${url}/console/`, signs in with the admin key (typed, then Enter), waits for the Endpoints page. */
  signIn(url: string, adminKey: string): Promise<void>;
  /** A full-page screenshot `name`.png. */
  shot(name: string): Promise<void>;
  close(): Promise<void>;
}

/**
 * Launches Chromium with one page.
 *
 * @example
 * const b = await openBrowser();
 * await b.signIn(t.url, t.adminKey);
 * expect(b.problems).toEqual([]);
 * await b.close();
 */
export async function openBrowser(viewport = { width: 1280, height: 800 }): Promise<ConsoleBrowser> {
  const browser = await chromium.launch({ executablePath: CHROMIUM, args: ARGS });
  const page = await browser.newPage({ viewport });
  const problems: string[] = [];
  const faults: string[] = [];
  page.on('console', (m) => {
    if (m.type() === 'error') problems.push(m.text());
  });
  page.on('pageerror', (err) => {
    problems.push(err.message);
    faults.push(err.message);
  });
  let shots = SHOTS;
  return {
    browser,
    page,
    problems,
    faults,
    async signIn(url, adminKey) {
      await page.goto(`${url}/console/`);
      await page.getByLabel('Admin API key').fill(adminKey);
      await page.keyboard.press('Enter');
      await page.getByRole('heading', { name: 'Endpoints' }).waitFor();
    },
    async shot(name) {
      shots ??= scratchDir('shots');
      mkdirSync(shots, { recursive: true });
      await page.screenshot({ path: join(shots, `${name}.png`), fullPage: true });
    },
    close: () => browser.close(),
  };
}
