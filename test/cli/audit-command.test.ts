// `gantry audit` against a real gateway: the table (who, from where, what changed), --json,
// the filters, --all paging through every page, a bad flag named, and never a secret printed.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestGantry, type TestGantry } from '../helpers/gantry.js';
import { runCli } from './run-cli.js';

const ENV_SECRET = 'cli-env-value-SECRET-93d1';

describe('gantry audit', () => {
  let t: TestGantry;
  const cli = (args: string[]) => runCli(args, { GANTRY_URL: t.url, GANTRY_ADMIN_KEY: t.adminKey });

  beforeAll(async () => {
    t = await startTestGantry();
    await t.admin.createEndpoint({ id: 'cli-audited', worker: { command: 'node w.js', env: { SECRET_TOKEN: ENV_SECRET } } } as never);
    await t.admin.updateEndpoint('cli-audited', { workersMax: 7 });
    await t.admin.deleteEndpoint('cli-audited');
  }, 30_000);
  afterAll(async () => {
    await t?.close();
  });

  it('prints the entries newest first with who, from where and what changed, never a secret', async () => {
    const r = await cli(['audit', '--action', 'endpoint.']);
    expect(r.code, r.stderr).toBe(0);
    const lines = r.stdout.trim().split('\n');
    expect(lines[0]).toMatch(/^TIME\s+ACTION\s+OUTCOME\s+WHO\s+FROM\s+TARGET\s+DETAIL$/);
    expect(lines.slice(1).map((l) => l.split(/\s+/)[1])).toEqual(['endpoint.delete', 'endpoint.update', 'endpoint.create']);
    expect(lines[2]).toContain('admin (GANTRY_ADMIN_KEY)');
    expect(lines[2]).toContain('127.0.0.1');
    expect(lines[2]).toContain('fields workersMax');
    expect(lines[3]).toContain('env added SECRET_TOKEN');
    expect(r.stdout).not.toContain(ENV_SECRET);
    expect(r.stdout).not.toContain(t.adminKey);
  });

  it('answers JSON with --json, pages with --limit and --all, and names a bad flag', async () => {
    const json = await cli(['audit', '--json', '--target', 'cli-audited']);
    expect(json.code).toBe(0);
    const parsed = JSON.parse(json.stdout) as { entries: { action: string }[]; nextCursor: string | null };
    expect(parsed.entries.map((e) => e.action)).toEqual(['endpoint.delete', 'endpoint.update', 'endpoint.create']);
    const firstPage = await cli(['audit', '--limit', '1', '--target', 'cli-audited']);
    expect(firstPage.stdout).toMatch(/more: gantry audit --cursor \d+/);
    const all = await cli(['audit', '--json', '--limit', '1', '--all', '--target', 'cli-audited']);
    expect((JSON.parse(all.stdout) as { entries: unknown[] }).entries).toHaveLength(3);
    const bad = await cli(['audit', '--limit', '0']);
    expect(bad.code).toBe(2);
    expect(bad.stderr).toMatch(/--limit must be an integer from 1 to 1000/);
    const help = await cli(['audit', '--help']);
    expect(help.code).toBe(0);
    expect(help.stdout).toMatch(/^usage: gantry audit/);
  });
});
