// `gantry logs` and `gantry endpoints logs` (docs/cli.md), run as the built CLI against a real
// gateway whose pool runs a real worker: time, level and message first; by job; followed.
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { eventually, startTestGantry, type TestGantry } from '../helpers/gantry.js';
import { spawnOwned } from '../helpers/processes.js';
import { CLI, printed, runCli } from './run-cli.js';

const ROOT = fileURLToPath(new URL('../..', import.meta.url));
const LOG_WORKER = `exec node ${JSON.stringify(CLI)} worker ${JSON.stringify(join(ROOT, 'test/e2e/fixtures/log-worker.mjs'))}`;
const TIME = '\\d{4}-\\d\\d-\\d\\dT\\d\\d:\\d\\d:\\d\\d\\.\\d{3}Z';

let t: TestGantry;
const env = (): Record<string, string> => ({ GANTRY_URL: t.url, GANTRY_ADMIN_KEY: t.adminKey });

beforeAll(async () => {
  t = await startTestGantry({ autoscalerIntervalMs: 50, workerStopGraceMs: 5_000 });
  await t.createEndpoint('cli-logs', { workersMax: 1, idleTimeout: 30, worker: { command: LOG_WORKER } });
});

afterAll(async () => {
  await t?.close();
  expect(printed.join('\n')).not.toContain(t.adminKey);
});

describe('gantry logs', () => {
  it("prints a job's lines as time, level and message, and the worker's log the same way", async () => {
    const { id } = await t.client().run('cli-logs', { input: { marker: 'cli' } });
    const job = await t.client().wait('cli-logs', id, { timeoutMs: 30_000 });
    const out = await eventually(async () => {
      const r = await runCli(['logs', 'cli-logs', '--job', id], env());
      return r.stdout.includes('runpod line of cli') ? r : undefined;
    }, 15_000, 'the job lines');
    expect(out.code).toBe(0);
    const lines = out.stdout.trim().split('\n');
    expect(lines).toContainEqual(expect.stringMatching(new RegExp(`^${TIME} WARN   ${job.workerId} runpod line of cli$`)));
    expect(lines).toContainEqual(expect.stringMatching(new RegExp(`^${TIME} -      ${job.workerId} plain line of cli$`)));
    expect(lines).toContainEqual(expect.stringMatching(new RegExp(`^${TIME} INFO   ${job.workerId} job started$`)));

    const own = await runCli(['endpoints', 'logs', 'cli-logs', job.workerId as string, '--lines', '500'], env());
    expect(own.code).toBe(0);
    expect(own.stdout).toMatch(new RegExp(`^${TIME} WARN   runpod line of cli$`, 'm'));
    expect(own.stdout).toMatch(new RegExp(`^${TIME} GANTRY started: pid \\d+`, 'm'));

    const json = await runCli(['logs', 'cli-logs', '--job', id, '--json'], env());
    const parsed = JSON.parse(json.stdout) as { jobId: string; line: string }[];
    expect(parsed.every((l) => l.jobId === id)).toBe(true);
    expect(parsed.some((l) => l.line.startsWith('{"requestId"'))).toBe(true);
  }, 60_000);

  it('--follow prints a new line as it is stored', async () => {
    const child = spawnOwned(process.execPath, [CLI, 'logs', 'cli-logs', '--follow', '--grep', 'followed-by-cli'], { env: { ...process.env, ...env() }, stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    child.stdout?.setEncoding('utf8').on('data', (d: string) => (stdout += d));
    const exited = new Promise<number | null>((resolve) => child.on('close', resolve));
    try {
      // The follow is open once the gateway counts it.
      await eventually(async () => (hasFollower() ? true : undefined), 10_000, 'the follow to open');
      await t.client().run('cli-logs', { input: { marker: 'followed-by-cli' } });
      await eventually(async () => (stdout.includes('plain line of followed-by-cli') ? true : undefined), 20_000, 'the followed line');
    } finally {
      child.kill('SIGINT');
    }
    expect(await exited).toBe(0);
    printed.push(stdout);
  }, 60_000);

  it('refuses a bad flag with exit 2', async () => {
    const r = await runCli(['logs', 'cli-logs', '--since', 'yesterday'], env());
    expect(r.code).toBe(2);
    expect(r.stderr).toMatch(/--since must be epoch milliseconds or an ISO 8601 time/);
  });
});

/** Whether a follow of the logs is open on the gateway (its HTTP layer's follow poller). */
function hasFollower(): boolean {
  return t.gantry.gateway.http.logFeed.followers > 0;
}
