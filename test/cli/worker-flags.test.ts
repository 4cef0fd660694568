// `gantry endpoints create|update` with the --worker-* flags of container workers, as the built
// CLI in a child process against a real test gateway: what reaches the server, what an update
// keeps, and what is refused before anything is sent.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestGantry, type TestGantry } from '../helpers/gantry.js';
import { runCli, type CliResult } from './run-cli.js';

let gantry: TestGantry;
const cli = (args: string[]): Promise<CliResult> => runCli(args, { GANTRY_URL: gantry.url, GANTRY_ADMIN_KEY: gantry.adminKey });

function json<T>(result: CliResult): T {
  expect(result.stderr).toBe('');
  expect(result.code).toBe(0);
  return JSON.parse(result.stdout) as T;
}

interface EndpointJson {
  worker: Record<string, unknown> | null;
}

beforeAll(async () => {
  gantry = await startTestGantry();
});

afterAll(async () => {
  await gantry?.close();
});

describe('gantry endpoints --worker-image', () => {
  it('creates an image worker with GPUs, memory, volumes, env and a CMD override', async () => {
    const created = json<EndpointJson>(
      await cli([
        'endpoints', 'create', 'img', '--worker-image', 'me/sd:1', '--worker-gpus', '2', '--worker-memory-mb', '4096',
        '--worker-volume', 'models:/models:ro', '--worker-volume', '/srv/cache:/cache', '--worker-env', 'MODEL=tiny',
        '--worker-command', 'python3 -u handler.py', '--json',
      ]),
    );
    expect(created.worker).toEqual({ image: 'me/sd:1', gpus: 2, memoryMb: 4096, volumes: ['models:/models:ro', '/srv/cache:/cache'], env: { MODEL: 'tiny' }, command: 'python3 -u handler.py' });
    const human = await cli(['endpoints', 'get', 'img']);
    expect(human.stdout).toMatch(/^worker image:\s+image me\/sd:1 gpus=2 memory=4096MiB$/m);
    expect(human.stdout).toMatch(/^worker volumes:\s+models:\/models:ro \/srv\/cache:\/cache$/m);
    const list = await cli(['endpoints', 'list']);
    expect(list.stdout).toMatch(/^img .* image me\/sd:1 gpus=2 memory=4096MiB\s*$/m);
  });

  it('an update keeps what its flags leave out; a new image starts from the flags alone', async () => {
    json(await cli(['endpoints', 'create', 'upd', '--worker-image', 'me/llm:1', '--worker-gpus', 'device=0,1', '--worker-env', 'A=1', '--json']));
    const gpus = json<EndpointJson>(await cli(['endpoints', 'update', 'upd', '--worker-memory-mb', '512', '--json']));
    expect(gpus.worker).toEqual({ image: 'me/llm:1', gpus: ['0', '1'], env: { A: '1' }, memoryMb: 512 });
    const same = json<EndpointJson>(await cli(['endpoints', 'update', 'upd', '--worker-image', 'me/llm:1', '--worker-gpus', '1', '--json']));
    expect(same.worker).toEqual({ image: 'me/llm:1', gpus: 1, env: { A: '1' }, memoryMb: 512 });
    const other = json<EndpointJson>(await cli(['endpoints', 'update', 'upd', '--worker-image', 'me/llm:2', '--json']));
    expect(other.worker).toEqual({ image: 'me/llm:2' });
    const cmd = json<EndpointJson>(await cli(['endpoints', 'update', 'upd', '--worker-command', 'serve --port 1', '--json']));
    expect(cmd.worker).toEqual({ image: 'me/llm:2', command: 'serve --port 1' });
  });

  it('a command worker refuses container flags; the server refuses a bad image reference', async () => {
    json(await cli(['endpoints', 'create', 'proc', '--worker-command', 'node w.js', '--json']));
    const refused: [string[], RegExp][] = [
      [['endpoints', 'update', 'proc', '--worker-gpus', '1'], /--worker-gpus needs --worker-image/],
      [['endpoints', 'create', 'x', '--worker-image', 'me/a:1', '--worker-cwd', '/srv'], /--worker-cwd is for command workers/],
      [['endpoints', 'create', 'x', '--worker-image', 'me/a:1', '--worker-memory-mb', '5'], /--worker-memory-mb must be/],
      [['endpoints', 'create', 'x', '--worker-image', 'me/a:1', '--worker-gpus', 'device=0,0'], /distinct device ids/],
      [['endpoints', 'create', 'x', '--worker-volume', 'a:/b'], /need --worker-command or --worker-image/],
      [['endpoints', 'update', 'proc', '--no-worker', '--worker-image', 'me/a:1'], /--no-worker cannot be combined/],
    ];
    for (const [args, message] of refused) {
      const result = await cli(args);
      expect(result.code, args.join(' ')).toBe(2);
      expect(result.stderr).toMatch(message);
    }
    const bad = await cli(['endpoints', 'create', 'x', '--worker-image', 'Not An Image!']);
    expect(bad.code).toBe(1);
    expect(bad.stderr).toMatch(/worker\.image/);
    expect((await cli(['endpoints', 'get', 'x'])).code).toBe(1);
  });
});
