// `gantry registry-credentials create|list|delete` as the built CLI in a child process against a
// real test gateway: the password goes in through stdin and is never printed back.
import { existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestGantry, type TestGantry } from '../helpers/gantry.js';
import { spawnOwned } from '../helpers/processes.js';

const CLI = fileURLToPath(new URL('../../dist/src/cli/main.js', import.meta.url));
const PASSWORD = 'cli-registry-secret-987654321';

let t: TestGantry;
const printed: string[] = [];

function gantry(args: string[], stdin = ''): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve, reject) => {
    const child = spawnOwned(process.execPath, [CLI, ...args], {
      env: { ...process.env, GANTRY_URL: t.url, GANTRY_ADMIN_KEY: t.adminKey },
      stdio: ['pipe', 'pipe', 'pipe'],
    });
    let stdout = '';
    let stderr = '';
    child.stdout!.setEncoding('utf8').on('data', (d: string) => (stdout += d));
    child.stderr!.setEncoding('utf8').on('data', (d: string) => (stderr += d));
    child.on('error', reject);
    child.on('close', (code) => {
      printed.push(stdout, stderr);
      resolve({ code, stdout, stderr });
    });
    child.stdin!.end(stdin);
  });
}

const cli = (args: string[], stdin = '') => gantry(['registry-credentials', ...args], stdin);

beforeAll(async () => {
  if (!existsSync(CLI)) throw new Error(`${CLI} is missing: run 'npm run build' first`);
  t = await startTestGantry();
});
afterAll(async () => {
  await t?.close();
  for (const text of printed) expect(text).not.toContain(PASSWORD);
});

describe('gantry registry-credentials', () => {
  it('creates with --password-stdin, lists, refuses deleting one in use, deletes', async () => {
    const created = await cli(['create', '--name', 'team registry', '--username', 'deploy', '--password-stdin', '--json'], `${PASSWORD}\n`);
    expect(created.stderr).toBe('');
    expect(created.code).toBe(0);
    const { id, name } = JSON.parse(created.stdout) as { id: string; name: string };
    expect(name).toBe('team registry');
    expect(await t.gantry.gateway.registry.login(id)).toEqual({ username: 'deploy', password: PASSWORD });

    const table = await cli(['list']);
    expect(table.code).toBe(0);
    expect(table.stdout).toMatch(/ID\s+NAME\s+USERNAME\s+CREATED/);
    expect(table.stdout).toContain(id);
    expect(table.stdout).toContain('deploy');

    await t.admin.createEndpoint({ id: 'private-image', worker: { image: 'registry.example.com/team/app:1', registryCredentials: id } });
    const refused = await cli(['delete', id]);
    expect(refused.code).not.toBe(0);
    expect(refused.stderr).toContain('private-image');
    await t.admin.deleteEndpoint('private-image');
    const deleted = await cli(['delete', id]);
    expect(deleted.code).toBe(0);
    expect(deleted.stdout).toContain(`deleted registry credential ${id}`);
    expect((await cli(['list'])).stdout).toContain('no registry credentials');
  });

  it('needs a password, from one place only', async () => {
    const none = await cli(['create', '--name', 'x', '--username', 'u']);
    expect(none.code).toBe(2);
    expect(none.stderr).toContain('--password-stdin or --password is required');
    const both = await cli(['create', '--name', 'x', '--username', 'u', '--password', 'p', '--password-stdin'], 'q\n');
    expect(both.code).toBe(2);
    const empty = await cli(['create', '--name', 'x', '--username', 'u', '--password-stdin'], '\n');
    expect(empty.code).toBe(2);
    expect(empty.stderr).toContain('the password is empty');
  });

  it('endpoints take the credential and prepull as --worker-* flags, and an update keeps them', async () => {
    const { id } = await t.admin.createRegistryCredential({ name: 'flags', username: 'u', password: PASSWORD });
    const image = 'registry.example.com/team/app:1';
    const created = await gantry(['endpoints', 'create', 'flagged', '--worker-image', image, '--worker-registry-credentials', id, '--worker-prepull', 'true']);
    expect(created.stderr).toBe('');
    expect((await t.admin.getEndpoint('flagged')).worker).toEqual({ image, registryCredentials: id, prepull: true });
    await t.admin.updateEndpoint('flagged', { worker: { image, gpus: 1, gpuTypes: ['L4'], registryCredentials: id, prepull: true } });
    expect((await gantry(['endpoints', 'update', 'flagged', '--worker-gpus', '2'])).stderr).toBe('');
    expect((await t.admin.getEndpoint('flagged')).worker).toEqual({ image, gpus: 2, gpuTypes: ['L4'], registryCredentials: id, prepull: true });
    expect((await gantry(['endpoints', 'update', 'flagged', '--worker-registry-credentials', 'none', '--worker-prepull', 'false'])).stderr).toBe('');
    expect((await t.admin.getEndpoint('flagged')).worker).toEqual({ image, gpus: 2, gpuTypes: ['L4'], prepull: false });
    const bad = await gantry(['endpoints', 'update', 'flagged', '--worker-prepull', 'yes']);
    expect(bad.code).toBe(2);
    expect(bad.stderr).toContain('--worker-prepull must be true or false');
    await t.admin.deleteEndpoint('flagged');
  });
});
