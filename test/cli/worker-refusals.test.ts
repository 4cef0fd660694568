// `gantry worker` fails fast on what cannot succeed (issue 21.6): the built CLI in a child
// process against a real gateway. A worker the gateway refuses before ever accepting it (no key,
// a key without the `worker` scope, an unknown endpoint) exits 2 with one line on stderr; a
// gateway that is not there yet (network errors) is waited for, and a worker refused after it
// was accepted (its key deleted) goes on retrying. Needs `npm run build`.
import type { ChildProcess } from 'node:child_process';
import { existsSync } from 'node:fs';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { isPermanentRefusal, START_REFUSAL_CONFIRM_MS } from '../../src/sdk/worker-refusal.js';
import { eventually, startTestGantry, type TestGantry } from '../helpers/gantry.js';
import { freePort } from '../helpers/ports.js';
import { spawnOwned } from '../helpers/processes.js';
import { uniqueId } from '../http/http-helpers.js';
import { CLI } from './run-cli.js';

const ECHO_WORKER = 'dist/examples/echo-worker.js';
/** Generous on a busy machine: the refusal must last START_REFUSAL_CONFIRM_MS, then the process exits. */
const EXIT_MS = 60_000;

/** One `gantry worker` process: what it printed, and its exit. */
interface CliWorker {
  child: ChildProcess;
  stdout(): string;
  stderr(): string;
  /** Resolves with the exit code, or null when it is still running after `ms` (then it is killed). */
  exit(ms: number): Promise<number | null>;
  alive(): boolean;
}

const started: CliWorker[] = [];

function worker(args: string[]): CliWorker {
  if (!existsSync(CLI) || !existsSync(ECHO_WORKER)) throw new Error('run `npm run build` first: the test spawns the built CLI');
  // Nothing of this test process's environment may name a key or endpoint for it.
  const env = Object.fromEntries(Object.entries(process.env).filter(([k]) => !k.startsWith('RUNPOD_') && !k.startsWith('GANTRY_')));
  const child = spawnOwned(process.execPath, [CLI, 'worker', ECHO_WORKER, ...args], { env: { ...env, LOG_LEVEL: 'info' }, stdio: ['ignore', 'pipe', 'pipe'] });
  let out = '';
  let err = '';
  child.stdout?.setEncoding('utf8').on('data', (d: string) => (out += d));
  child.stderr?.setEncoding('utf8').on('data', (d: string) => (err += d));
  const closed = new Promise<number | null>((resolve) => child.on('close', (code) => resolve(code)));
  const w: CliWorker = {
    child,
    stdout: () => out,
    stderr: () => err,
    alive: () => child.exitCode === null && child.signalCode === null,
    async exit(ms) {
      let timer: NodeJS.Timeout | undefined;
      const late = new Promise<'late'>((resolve) => (timer = setTimeout(() => resolve('late'), ms)));
      const code = await Promise.race([closed, late]);
      clearTimeout(timer);
      if (code !== 'late') return code;
      child.kill('SIGKILL');
      await closed;
      return null;
    },
  };
  started.push(w);
  return w;
}

/** The JSON log lines a worker wrote to stdout. */
function logLines(w: CliWorker): { msg?: string; level?: number; status?: number }[] {
  return w.stdout().split('\n').filter((l) => l.startsWith('{')).map((l) => JSON.parse(l) as { msg?: string });
}

afterEach(async () => {
  await Promise.all(started.splice(0).map((w) => w.exit(0)));
});

describe('gantry worker refused at its start', () => {
  let t: TestGantry;
  beforeAll(async () => {
    t = await startTestGantry();
  });
  afterAll(async () => {
    await t?.close();
  });

  it('exits 2 with one line for no key, a key without the worker scope, and an unknown endpoint', async () => {
    const ep = uniqueId('refuse');
    await t.createEndpoint(ep);
    const runKey = await t.createKey(['run']);
    const workerKey = await t.createKey(['worker']);
    const noKey = worker(['--url', t.url, '--endpoint', ep]);
    const runScope = worker(['--url', t.url, '--endpoint', ep, '--key', runKey]);
    const unknown = worker(['--url', t.url, '--endpoint', 'no-such-endpoint', '--key', workerKey]);
    const codes = await Promise.all([noKey, runScope, unknown].map((w) => w.exit(EXIT_MS)));
    expect(codes, [noKey, runScope, unknown].map((w) => w.stderr()).join('\n')).toEqual([2, 2, 2]);
    const lines = [noKey, runScope, unknown].map((w) => w.stderr().trimEnd().split('\n'));
    for (const l of lines) expect(l).toHaveLength(1);
    expect(lines[0]![0]).toMatch(new RegExp(`^gantry worker: ${t.url} refused this worker: 401 UNAUTHORIZED: .*; check the key \\(--key or RUNPOD_AI_API_KEY\\)`));
    expect(lines[1]![0]).toMatch(/^gantry worker: .* refused this worker: 401 INSUFFICIENT_SCOPE: API key lacks the "worker" scope; check the key/);
    expect(lines[2]![0]).toMatch(/^gantry worker: .* refused this worker: 404 ENDPOINT_NOT_FOUND: .*no-such-endpoint.*; check the endpoint id/);
    // No key in anything it printed, and no stream of refusal logs before the line.
    for (const w of [noKey, runScope, unknown]) {
      expect(w.stdout() + w.stderr()).not.toContain(runKey);
      expect(w.stdout() + w.stderr()).not.toContain(workerKey);
      expect(logLines(w).filter((l) => /refused/.test(l.msg ?? ''))).toEqual([]);
    }
  }, EXIT_MS * 2);

  it('keeps retrying a key that stops working after the worker was accepted (it may come back)', async () => {
    const ep = uniqueId('revoked');
    await t.createEndpoint(ep);
    const created = await t.admin.createKey({ name: 'revoked later', scopes: ['worker'] });
    const w = worker(['--url', t.url, '--endpoint', ep, '--key', created.key]);
    // Accepted: its take long-poll is parked on the gateway.
    await eventually(async () => (t.gantry.gateway.takeQueue.waitingWorkers().some((x) => x.endpointId === ep) ? true : undefined), EXIT_MS, 'the worker to be accepted');
    await t.admin.deleteKey(created.id);
    await eventually(async () => (logLines(w).some((l) => l.msg === 'job-take refused; retrying' && l.status === 401) ? true : undefined), EXIT_MS, 'a refused take after the key was deleted');
    // Past the confirmation window it is still there, retrying.
    expect(await w.exit(START_REFUSAL_CONFIRM_MS + 3_000)).toBeNull();
  }, EXIT_MS * 2);
});

describe('gantry worker and a gateway that is not there yet', () => {
  it('retries network errors until the gateway is up, then runs jobs', async () => {
    const port = await freePort();
    // A gateway that made the endpoint and the key, then stopped: its data stays for the restart.
    const first = await startTestGantry({ port });
    const ep = uniqueId('later');
    await first.createEndpoint(ep);
    const key = await first.createKey(['worker']);
    const dataDir = first.dataDir;
    await first.gantry.close();
    const w = worker(['--url', `http://127.0.0.1:${port}`, '--endpoint', ep, '--key', key]);
    await eventually(async () => (logLines(w).filter((l) => l.msg === 'job-take failed; retrying').length >= 3 ? true : undefined), EXIT_MS, 'three failed takes');
    expect(w.alive()).toBe(true);
    const again = await startTestGantry({ port }, { dataDir });
    try {
      const job = await again.client().runSync(ep, { input: { hello: 'again' } }, { timeoutMs: EXIT_MS });
      expect(job).toMatchObject({ status: 'COMPLETED', output: { hello: 'again' } });
      expect(w.alive()).toBe(true);
      expect(w.stderr()).toBe('');
    } finally {
      await again.close();
    }
  }, EXIT_MS * 3);
});

describe('which answers are permanent refusals', () => {
  it('every 4xx but 408 and 429; never a 5xx', () => {
    expect([400, 401, 403, 404, 405, 409, 410].filter(isPermanentRefusal)).toEqual([400, 401, 403, 404, 405, 409, 410]);
    expect([200, 204, 408, 429, 500, 502, 503, 504].filter(isPermanentRefusal)).toEqual([]);
  });
});
