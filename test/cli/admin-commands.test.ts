// `gantry keys` and `gantry endpoints` run as the built CLI in a child process against a real
// test gateway. The child must be spawned asynchronously: the gateway lives in this process.
import { spawnOwned } from '../helpers/processes.js';
import { existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestGantry } from '../helpers/gantry.js';

const CLI = fileURLToPath(new URL('../../dist/src/cli/main.js', import.meta.url));

interface CliResult {
  code: number | null;
  stdout: string;
  stderr: string;
}

type TestGantry = Awaited<ReturnType<typeof startTestGantry>>;
let gantry: TestGantry;
/** Everything any CLI run printed, to check that the admin key never shows up. */
const printed: string[] = [];

function cli(args: string[], env: Record<string, string | undefined> = {}): Promise<CliResult> {
  return new Promise((resolve, reject) => {
    const child = spawnOwned(process.execPath, [CLI, ...args], {
      env: { ...process.env, GANTRY_URL: gantry.url, GANTRY_ADMIN_KEY: gantry.adminKey, ...env },
      stdio: ['ignore', 'pipe', 'pipe'],
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
  });
}

function json<T>(result: CliResult): T {
  expect(result.stderr).toBe('');
  expect(result.code).toBe(0);
  return JSON.parse(result.stdout) as T;
}

async function health(endpointId: string, key: string): Promise<number> {
  const res = await fetch(`${gantry.url}/v2/${endpointId}/health`, { headers: { authorization: `Bearer ${key}` } });
  await res.arrayBuffer();
  return res.status;
}

beforeAll(async () => {
  if (!existsSync(CLI)) throw new Error(`${CLI} is missing: run 'npm run build' first`);
  gantry = await startTestGantry();
});

afterAll(async () => {
  if (gantry) {
    const adminKey = gantry.adminKey;
    await gantry.close();
    for (const text of printed) expect(text).not.toContain(adminKey);
  }
});

describe('gantry keys', () => {
  it('creates a key that works, lists it without the secret, and deletes it', async () => {
    await gantry.createEndpoint('keys-ep');
    const created = json<{ id: string; name: string; scopes: string[]; endpoints: string[] | null; key: string }>(
      await cli(['keys', 'create', '--name', 'ci', '--scopes', 'run,read', '--endpoints', 'keys-ep', '--json']),
    );
    expect(created).toMatchObject({ name: 'ci', scopes: ['run', 'read'], endpoints: ['keys-ep'] });
    expect(created.key).toEqual(expect.any(String));
    expect(await health('keys-ep', created.key)).toBe(200);

    const listed = json<{ id: string; name: string }[]>(await cli(['keys', 'list', '--json']));
    expect(listed.map((k) => k.id)).toContain(created.id);
    const table = await cli(['keys', 'list']);
    expect(table.code).toBe(0);
    expect(table.stdout).toMatch(/^ID\s+NAME\s+SCOPES\s+ENDPOINTS\s+BUDGET \(USD\)\s+MAX JOBS\s+CREATED/);
    expect(table.stdout).toContain(created.id);
    expect(table.stdout).toContain('run,read');
    expect(table.stdout).not.toContain(created.key);

    const deleted = await cli(['keys', 'delete', created.id]);
    expect(deleted).toMatchObject({ code: 0, stdout: `deleted key ${created.id}\n` });
    expect(await health('keys-ep', created.key)).toBe(401);
    expect(json<{ id: string }[]>(await cli(['keys', 'list', '--json'])).map((k) => k.id)).not.toContain(created.id);
  });

  it('prints the key once in human form, with a warning on stderr', async () => {
    const result = await cli(['keys', 'create', '--name', 'reader', '--scopes', 'read']);
    expect(result.code).toBe(0);
    const key = /^key:\s+(\S+)$/m.exec(result.stdout)?.[1];
    const id = /^id:\s+(\S+)$/m.exec(result.stdout)?.[1];
    expect(key).toBeDefined();
    expect(id).toBeDefined();
    expect(result.stdout).toMatch(/^endpoints:\s+all$/m);
    expect(result.stderr).toContain('shown only now');
    await gantry.createEndpoint('reader-ep');
    expect(await health('reader-ep', key ?? '')).toBe(200);
  });

  it('rejects bad flags and values with exit 2 before calling the server', async () => {
    const cases: [string[], RegExp][] = [
      [['keys', 'create', '--name', 'x', '--scopes', 'run', '--bogus'], /unknown option '--bogus'/],
      [['keys', 'create', '--name', 'x', '--scopes', 'run,sudo'], /unknown scope 'sudo'/],
      [['keys', 'create', '--scopes', 'run'], /--name is required/],
      [['keys', 'create', '--name', 'x'], /--scopes is required/],
      [['keys', 'delete'], /missing ID/],
      [['keys', 'list', 'extra'], /unexpected argument 'extra'/],
      [['keys', 'rotate'], /unknown subcommand 'rotate'/],
    ];
    const results = await Promise.all(cases.map(([args]) => cli(args, { GANTRY_URL: 'http://127.0.0.1:9' })));
    for (const [i, [args, message]] of cases.entries()) {
      const result = results[i]!;
      expect(result.code, args.join(' ')).toBe(2);
      expect(result.stderr, args.join(' ')).toMatch(message);
      expect(result.stderr.trimEnd().split('\n'), args.join(' ')).toHaveLength(1);
      expect(result.stdout).toBe('');
    }
  });

  it('reports a wrong admin key with the server message and exit 1', async () => {
    const res = await fetch(`${gantry.url}/admin/v1/keys`, { headers: { authorization: 'Bearer wrong-key' } });
    expect(res.status).toBe(401);
    const { error } = (await res.json()) as { error: string };
    const result = await cli(['keys', 'list'], { GANTRY_ADMIN_KEY: 'wrong-key' });
    expect(result.code).toBe(1);
    expect(result.stderr).toBe(`gantry keys list: ${error}\n`);
    const flag = await cli(['keys', 'list', '--admin-key', 'wrong-key']);
    expect(flag.code).toBe(1);
    expect(flag.stderr).not.toContain('wrong-key');
  });

  it('needs an admin key and a reachable server', async () => {
    const missing = await cli(['keys', 'list'], { GANTRY_ADMIN_KEY: undefined });
    expect(missing.code).toBe(2);
    expect(missing.stderr).toMatch(/no admin key/);
    const unreachable = await cli(['keys', 'list', '--url', 'http://127.0.0.1:9']);
    expect(unreachable.code).toBe(1);
    expect(unreachable.stderr).toMatch(/cannot reach gantry at http:\/\/127\.0\.0\.1:9/);
  });
});

interface EndpointJson {
  id: string;
  name: string;
  workersMin: number;
  workersMax: number;
  idleTimeout: number;
  executionTimeoutMs: number;
  scalerType: string;
  scalerValue: number;
  maxAttempts: number;
  worker: { command: string; env?: Record<string, string>; cwd?: string } | null;
}

describe('gantry endpoints', () => {
  it('creates, gets, updates, lists and deletes an endpoint', async () => {
    const created = json<EndpointJson>(
      await cli([
        'endpoints', 'create', 'cli-ep', '--name', 'CLI endpoint', '--workers-min', '0', '--workers-max', '3',
        '--idle-timeout', '30', '--execution-timeout-ms', '60000', '--scaler-type', 'REQUEST_COUNT',
        '--scaler-value', '2', '--max-attempts', '4', '--worker-command', 'node worker.js',
        '--worker-env', 'A=1', '--worker-env', 'B=x=y', '--worker-cwd', '/tmp', '--json',
      ]),
    );
    const expected = {
      id: 'cli-ep',
      name: 'CLI endpoint',
      workersMin: 0,
      workersMax: 3,
      idleTimeout: 30,
      executionTimeoutMs: 60000,
      scalerType: 'REQUEST_COUNT',
      scalerValue: 2,
      maxAttempts: 4,
      worker: { command: 'node worker.js', env: { A: '1', B: 'x=y' }, cwd: '/tmp' },
    };
    expect(created).toMatchObject(expected);
    expect(json<EndpointJson>(await cli(['endpoints', 'get', 'cli-ep', '--json']))).toMatchObject(expected);

    const human = await cli(['endpoints', 'get', 'cli-ep']);
    expect(human.code).toBe(0);
    expect(human.stdout).toMatch(/^workers:\s+0\.\.3$/m);
    expect(human.stdout).toMatch(/^worker command:\s+node worker\.js$/m);

    // --worker-env alone keeps the command and cwd, and replaces the environment.
    const updated = json<EndpointJson>(
      await cli(['endpoints', 'update', 'cli-ep', '--workers-max', '5', '--worker-env', 'C=3', '--json']),
    );
    expect(updated).toMatchObject({
      ...expected,
      workersMax: 5,
      worker: { command: 'node worker.js', env: { C: '3' }, cwd: '/tmp' },
    });
    const renamed = json<EndpointJson>(await cli(['endpoints', 'update', 'cli-ep', '--name', 'renamed', '--json']));
    expect(renamed).toMatchObject({ name: 'renamed', workersMax: 5, maxAttempts: 4 });

    const unmanaged = json<EndpointJson>(await cli(['endpoints', 'update', 'cli-ep', '--no-worker', '--json']));
    expect(unmanaged.worker).toBeNull();

    const listed = json<EndpointJson[]>(await cli(['endpoints', 'list', '--json']));
    expect(listed.find((e) => e.id === 'cli-ep')).toMatchObject({ name: 'renamed', workersMax: 5 });
    const table = await cli(['endpoints', 'list']);
    expect(table.stdout).toMatch(/^ID\s+NAME\s+WORKERS/);
    expect(table.stdout).toMatch(/^cli-ep\s+renamed\s+0\.\.5\s+REQUEST_COUNT 2\s+30s\s+60000ms\s+4\s+-$/m);

    const deleted = await cli(['endpoints', 'delete', 'cli-ep']);
    expect(deleted).toMatchObject({ code: 0, stdout: 'deleted endpoint cli-ep\n' });
    const gone = await cli(['endpoints', 'get', 'cli-ep']);
    expect(gone.code).toBe(1);
    expect(gone.stderr).toMatch(/^gantry endpoints get: .+\n$/);
  });

  it('creates an endpoint with defaults and no worker command', async () => {
    const created = json<EndpointJson>(await cli(['endpoints', 'create', 'bare-ep', '--json']));
    expect(created.id).toBe('bare-ep');
    expect(created.worker ?? null).toBeNull();
    const again = await cli(['endpoints', 'create', 'bare-ep']);
    expect(again.code).toBe(1);
    expect(again.stderr).toMatch(/^gantry endpoints create: .+\n$/);
  });

  it('sets and removes a webhook signing secret without ever printing it', async () => {
    const secret = `whsec_${Buffer.from('0123456789abcdef0123456789abcdef').toString('base64')}`;
    const createdRun = await cli(['endpoints', 'create', 'signed-ep', '--webhook-secret', secret, '--json']);
    expect(createdRun.stdout).not.toContain(secret.slice(6)); // the raw --json output, not a re-serialised object
    const created = json<EndpointJson & { webhookSigning: boolean }>(createdRun);
    expect(created.webhookSigning).toBe(true);
    expect(Object.keys(created)).not.toContain('webhookSecret');
    const shown = await cli(['endpoints', 'get', 'signed-ep']);
    expect(shown.stdout).toMatch(/webhook signing:\s+on/);
    expect(shown.stdout + JSON.stringify(created)).not.toContain(secret.slice(6));
    const removed = json<{ webhookSigning: boolean }>(await cli(['endpoints', 'update', 'signed-ep', '--webhook-secret', 'none', '--json']));
    expect(removed.webhookSigning).toBe(false);
    const bad = await cli(['endpoints', 'update', 'signed-ep', '--webhook-secret', 'nope']);
    expect(bad.code).toBe(1);
    expect(bad.stderr).toContain('webhookSecret');
  });

  it('validates flags client-side with exit 2', async () => {
    const cases: [string[], RegExp][] = [
      [['endpoints', 'create', 'x', '--workers-max', '1.5'], /--workers-max must be an integer, got '1\.5'/],
      [['endpoints', 'create', 'x', '--workers-max', 'lots'], /--workers-max must be an integer/],
      [['endpoints', 'create', 'x', '--max-attempts', '0'], /--max-attempts must be at least 1/],
      [['endpoints', 'create', 'x', '--workers-min', '3', '--workers-max', '2'], /--workers-min \(3\) is more than/],
      [['endpoints', 'create', 'x', '--scaler-type', 'FASTEST'], /--scaler-type must be QUEUE_DELAY or REQUEST_COUNT/],
      [['endpoints', 'create', 'x', '--worker-command', 'w', '--worker-env', 'NOEQUALS'], /--worker-env takes KEY=VALUE/],
      [['endpoints', 'create', 'x', '--worker-env', 'A=1'], /need --worker-command/],
      [['endpoints', 'create', 'x', '--workers-max'], /argument missing/],
      [['endpoints', 'create'], /missing ID/],
      [['endpoints', 'update', 'x'], /nothing to update/],
      [['endpoints', 'update', 'x', '--no-worker', '--worker-cwd', '/'], /--no-worker cannot be combined/],
      [['endpoints', 'create', 'x', '--no-worker'], /unknown option '--no-worker'/],
      [['endpoints', 'get', 'x', 'y'], /unexpected argument 'y'/],
      [['endpoints', 'list', '--url', 'not a url'], /not a URL/],
    ];
    const results = await Promise.all(cases.map(([args]) => cli(args, { GANTRY_URL: 'http://127.0.0.1:9' })));
    for (const [i, [args, message]] of cases.entries()) {
      const result = results[i]!;
      expect(result.code, args.join(' ')).toBe(2);
      expect(result.stderr, args.join(' ')).toMatch(message);
      expect(result.stderr.trimEnd().split('\n'), args.join(' ')).toHaveLength(1);
    }
  });
});

describe('help', () => {
  it('every subcommand answers --help with exit 0', async () => {
    const commands = [
      ['keys'],
      ['keys', 'create'],
      ['keys', 'list'],
      ['keys', 'delete'],
      ['endpoints'],
      ['endpoints', 'create'],
      ['endpoints', 'list'],
      ['endpoints', 'get'],
      ['endpoints', 'update'],
      ['endpoints', 'delete'],
    ];
    const results = await Promise.all(commands.map((command) => cli([...command, '--help', '--bogus'])));
    for (const [i, command] of commands.entries()) {
      const result = results[i]!;
      expect(result.code, command.join(' ')).toBe(0);
      expect(result.stdout, command.join(' ')).toMatch(/^usage: gantry /);
    }
    const bare = await cli(['endpoints']);
    expect(bare.code).toBe(2);
    expect(bare.stderr).toMatch(/^usage: gantry endpoints/);
  });
});
