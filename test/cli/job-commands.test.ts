// `gantry run|runsync|status|stream|cancel|retry|purge|health|usage`, `--help` and `--version`,
// run as the built CLI against a real gateway with real worker processes.
import { spawnSync } from 'node:child_process';
import { spawnOwned } from '../helpers/processes.js';
import { mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { INTEGER_FIELDS } from '../../src/jobs/endpoint-settings.js';
import { POLICY_LIMITS } from '../../src/jobs/policy.js';
import { startTestGantry, type TestGantry } from '../helpers/gantry.js';
import { uniqueId } from '../http/http-helpers.js';
import { startWorkerProcess, type WorkerProcess } from '../sdk/worker-process.js';
import { CLI, printed, runCli, type CliResult } from './run-cli.js';

let t: TestGantry;
let runKey: string;
let dir: string;
const echo = uniqueId('cli-echo');
const words = uniqueId('cli-words');
const idle = uniqueId('cli-idle');
const workers: WorkerProcess[] = [];

const cli = (args: string[], env: Record<string, string | undefined> = {}, stdin?: string) =>
  runCli(args, { GANTRY_URL: t.url, GANTRY_API_KEY: runKey, GANTRY_ADMIN_KEY: t.adminKey, ...env }, stdin);

function json<T>(result: CliResult, code = 0): T {
  expect(result.code, result.stderr).toBe(code);
  return JSON.parse(result.stdout) as T;
}

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), 'gantry-cli-'));
  t = await startTestGantry({ jobTakeWaitMs: 500 });
  runKey = await t.createKey(['run']);
  for (const id of [echo, words, idle]) await t.createEndpoint(id);
  workers.push(startWorkerProcess('echo-worker', t.workerEnv(echo)), startWorkerProcess('stream-worker', t.workerEnv(words)));
});

afterAll(async () => {
  await Promise.all(workers.map((w) => w.stop()));
  if (t) {
    await t.close();
    for (const text of printed) {
      expect(text).not.toContain(t.adminKey);
      expect(text).not.toContain(runKey);
    }
  }
  rmSync(dir, { recursive: true, force: true });
});

describe('gantry runsync / run / status', () => {
  it('runsync prints the output, the status line on stderr, and exits 0', async () => {
    const result = await cli(['runsync', echo, '--input', '{"greeting":"hi"}']);
    expect(result.code).toBe(0);
    expect(JSON.parse(result.stdout)).toEqual({ greeting: 'hi' });
    expect(result.stderr).toMatch(/^sync-\S+ COMPLETED in \d+(\.\d)? m?s \(queued \d+(\.\d)? m?s\) on \S+\n$/);
    // No progress line when stderr is not a terminal.
    expect(result.stderr).not.toMatch(/[\r⠋⠙]/);
  });

  it('runsync --json prints the job; a failed job exits 3 with its error', async () => {
    expect(json<{ status: string; output: unknown }>(await cli(['runsync', echo, '--input', '{"n":2}', '--json']))).toMatchObject({ status: 'COMPLETED', output: { n: 2 } });
    const failed = await cli(['runsync', echo, '--input', '{"fail":"boom"}']);
    expect(failed.code).toBe(3);
    expect(failed.stdout).toBe('');
    expect(failed.stderr).toMatch(/FAILED: .*boom/);
  });

  it('run prints the id; status shows the job; --wait follows it; input from a file and from stdin', async () => {
    const file = join(dir, 'input.json');
    writeFileSync(file, JSON.stringify({ from: 'file', delayMs: 300 }));
    const submitted = await cli(['run', echo, '--input', `@${file}`]);
    expect(submitted.code).toBe(0);
    const [id, status] = submitted.stdout.trim().split(' ');
    expect(status).toBe('IN_QUEUE');
    const shown = await cli(['status', echo, id!]);
    expect(shown.code).toBe(0);
    expect(shown.stdout).toMatch(new RegExp(`^id:\\s+${id!}$`, 'm'));
    expect(shown.stdout).toMatch(/^status:\s+(IN_QUEUE|IN_PROGRESS|COMPLETED)$/m);
    expect(json<{ status: string; output: unknown }>(await cli(['status', echo, id!, '--wait', '--json']))).toMatchObject({ status: 'COMPLETED', output: { from: 'file' } });
    const waited = await cli(['run', echo, '--input', '-', '--wait'], {}, '{"from":"stdin"}');
    expect(waited.code).toBe(0);
    expect(JSON.parse(waited.stdout)).toEqual({ from: 'stdin' });
  });

  it('--timeout stops waiting with exit 4 while the job goes on', async () => {
    const result = await cli(['run', idle, '--wait', '--timeout', '1']);
    expect(result.code).toBe(4);
    expect(result.stderr).toMatch(new RegExp(`is still IN_QUEUE \\(gantry status ${idle} \\S+ --wait`));
  });

  it('refuses bad flags before sending (exit 2) and reports server refusals (exit 1)', async () => {
    const cases: [string[], RegExp][] = [
      [['run', echo, '--input', 'not json'], /--input is not valid JSON/],
      [['run', echo, '--input', '[1,2]'], /--input must be a JSON object/],
      [['run', echo, '--input', '@/no/such/file'], /cannot read the file \(ENOENT\)/],
      [['run', echo, '--ttl', '5'], new RegExp(`--ttl must be at least ${POLICY_LIMITS.minTtlMs}`)],
      [['run', echo, '--execution-timeout', '5000'], /--execution-timeout must be at least 5001/],
      [['run'], /missing ENDPOINT/],
      [['status', echo], /missing JOB_ID/],
      [['cancel', echo, 'a', 'b'], /unexpected argument 'b'/],
      [['run', echo, '--bogus'], /unknown option '--bogus'/],
      [['usage', '--group-by', 'model'], /--group-by must be key, endpoint, day or several of them/],
      [['health', echo], /no API key/],
    ];
    const results = await Promise.all(cases.map(([args], i) => cli(args, i === cases.length - 1 ? { GANTRY_API_KEY: '', GANTRY_ADMIN_KEY: '' } : { GANTRY_URL: 'http://127.0.0.1:9' })));
    for (const [i, [args, message]] of cases.entries()) {
      expect(results[i]!.code, args.join(' ')).toBe(2);
      expect(results[i]!.stderr, args.join(' ')).toMatch(message);
      expect(results[i]!.stderr.trimEnd().split('\n'), args.join(' ')).toHaveLength(1);
    }
    const missing = await cli(['runsync', 'no-such-endpoint']);
    expect(missing).toMatchObject({ code: 1, stdout: '', stderr: 'gantry runsync: Endpoint no-such-endpoint not found\n' });
    const badTtl = await cli(['status', echo, 'no-such-job']);
    expect(badTtl).toMatchObject({ code: 1, stderr: 'gantry status: Job no-such-job not found\n' });
  });
});

describe('gantry stream / cancel / retry / purge / health / usage', () => {
  it('stream follows the chunks live: one a line, --raw, or NDJSON with --json', async () => {
    const submit = async () => json<{ id: string }>(await cli(['run', words, '--input', '{"text":"alpha beta gamma","delayMs":100}', '--json'])).id;
    const lines = await cli(['stream', words, await submit()]);
    expect(lines).toMatchObject({ code: 0, stdout: 'alpha\nbeta\ngamma\n' });
    expect(lines.stderr).toMatch(/ COMPLETED\n$/);
    expect((await cli(['stream', words, await submit(), '--raw'])).stdout).toBe('alphabetagamma\n');
    const ndjson = await cli(['stream', words, await submit(), '--json']);
    expect(ndjson.stdout.trim().split('\n').map((l) => JSON.parse(l) as unknown)).toEqual([{ output: 'alpha' }, { output: 'beta' }, { output: 'gamma' }]);
  });

  it('cancel and retry', async () => {
    const long = json<{ id: string }>(await cli(['run', echo, '--input', '{"delayMs":60000}', '--json'])).id;
    expect(await cli(['cancel', echo, long])).toMatchObject({ code: 0, stdout: `${long} CANCELLED\n` });
    const again = await cli(['retry', echo, long]);
    expect(again.code).toBe(1);
    expect(again.stderr).toMatch(/is CANCELLED: only FAILED or TIMED_OUT jobs can be retried/);
    const failed = json<{ id: string }>(await cli(['runsync', echo, '--input', '{"fail":"x"}', '--json'], {}), 3).id;
    expect(json<{ id: string; status: string }>(await cli(['retry', echo, failed, '--json']))).toEqual({ id: failed, status: 'IN_QUEUE' });
  });

  it('purge cancels the queued jobs; health shows jobs and workers', async () => {
    await cli(['run', idle]);
    await cli(['run', idle]);
    const health = json<{ jobs: { inQueue: number } }>(await cli(['health', idle, '--json']));
    expect(health.jobs.inQueue).toBeGreaterThanOrEqual(2);
    const purged = await cli(['purge', idle]);
    expect(purged.code).toBe(0);
    expect(purged.stdout).toMatch(new RegExp(`^cancelled ${health.jobs.inQueue} queued jobs of ${idle}\\n$`));
    const human = await cli(['health', echo]);
    expect(human.stdout).toMatch(/^jobs:\s+0 queued, \d+ in progress, \d+ completed/m);
    expect(human.stdout).toMatch(/^workers:\s+1 ready \(/m);
  });

  it('usage sums cost by endpoint or key (admin key)', async () => {
    const report = json<{ groupBy: string; usage: unknown[]; total: { jobs: number; costUsd: string } }>(await cli(['usage', '--group-by', 'key', '--from', '2020-01-01', '--json']));
    expect(report).toMatchObject({ groupBy: 'key', total: { costUsd: '0' } });
    const human = await cli(['usage', '--group-by', 'day,endpoint']);
    expect(human.code).toBe(0);
    expect(human.stdout).toMatch(/^DAY\s+ENDPOINT\s+JOBS\s+EXEC \(S\)\s+WORKER \(S\)\s+GPU \(S\)\s+MEGAPIXELS\s+COST \(USD\)$/m);
    expect(human.stdout).toMatch(/^total\s+\d+\s+[\d.]+\s+[\d.]+\s+0\.000\s+0\.000000\s+0$/m);
    const csv = await cli(['usage', '--group-by', 'key', '--csv']);
    expect(csv.stdout.split('\r\n')[0]).toBe('key,keyName,jobs,executionSeconds,workerSeconds,gpuSeconds,megapixels,costUsd');
    expect((await cli(['usage'], { GANTRY_ADMIN_KEY: runKey })).code).toBe(1);
  });
});

describe('help and version', () => {
  it('--version prints the package version and the schema version (the number of migrations)', async () => {
    const pkg = JSON.parse(readFileSync(new URL('../../package.json', import.meta.url), 'utf8')) as { version: string };
    const migrations = readdirSync(new URL('../../migrations/sqlite/', import.meta.url)).filter((f) => f.endsWith('.sql')).length;
    expect(await cli(['--version'])).toMatchObject({ code: 0, stdout: `gantry ${pkg.version} (schema version ${migrations})\n` });
  });

  it('--help lists every command; each command shows the server ranges of its options', async () => {
    const names = ['serve', 'worker', 'keys', 'endpoints', 'run', 'runsync', 'status', 'stream', 'cancel', 'retry', 'purge', 'health', 'usage', 'backup', 'restore'];
    const main = await cli(['--help']);
    expect(main.code).toBe(0);
    for (const name of names) expect(main.stdout).toMatch(new RegExp(`^  ${name}\\b`, 'm'));
    const results = await Promise.all(names.map((name) => cli([name, '--help'])));
    for (const [i, name] of names.entries()) {
      expect(results[i]!.code, name).toBe(0);
      expect(results[i]!.stdout, name).toMatch(/^usage: gantry /);
    }
    expect((await cli(['run', '--help'])).stdout).toContain(`${POLICY_LIMITS.minTtlMs}–${POLICY_LIMITS.maxTtlMs} (default ${POLICY_LIMITS.defaultTtlMs})`);
    const create = (await cli(['endpoints', 'create', '--help'])).stdout;
    for (const [setting, [min, max]] of Object.entries(INTEGER_FIELDS)) expect(create, setting).toContain(`${min}–${max}`);
    expect((await cli(['help', 'purge'])).stdout).toMatch(/^usage: gantry purge ENDPOINT/);
    expect(await cli(['frobnicate'])).toMatchObject({ code: 2, stderr: "gantry: unknown command 'frobnicate' (see 'gantry --help')\n" });
  });

  const hasScript = spawnSync('script', ['--version']).status === 0;
  it.skipIf(!hasScript)('on a terminal, a long wait shows a progress line that is cleared at the end', async () => {
    // `script` runs the CLI on a pseudo-terminal, as a person's shell would.
    const command = [process.execPath, CLI, 'run', idle, '--wait', '--timeout', '1'].map((a) => `'${a}'`).join(' ');
    const result = await onTerminal(command, { GANTRY_URL: t.url, GANTRY_API_KEY: runKey });
    expect(result.stdout).toMatch(/⠋ \S+: IN_QUEUE \(\ds\)/);
    expect(result.stdout).toContain('\r\x1b[2K');
    expect(result.code).toBe(4);
  });
});

/** Runs a shell command on a pseudo-terminal (util-linux `script`); its terminal output comes back as stdout. */
function onTerminal(command: string, env: Record<string, string>): Promise<CliResult> {
  return new Promise<CliResult>((resolve) => {
    const child = spawnOwned('script', ['-qec', command, '/dev/null'], { env: { ...process.env, ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    child.stdout!.setEncoding('utf8').on('data', (d: string) => (stdout += d));
    child.on('close', (code) => resolve({ code, stdout, stderr: '' }));
  });
}
