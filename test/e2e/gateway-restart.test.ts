// Issue 21 item 5: results survive a gateway restart. A real `gantry serve` (dist/: run `npm run
// build` first) on a fixed port, with jobs in flight on hand-started workers that keep running
// across its restarts: two Gantry SDK workers (`gantry worker`, a handler that writes a line per
// run) and two runpod-python 1.12 stand-ins (an `EVENT taken` line per run). Runs are counted
// per job.
// - Stopped (SIGTERM): the gateway waits for the jobs of the workers pinging it; every result
//   is taken before it exits; no job runs twice.
// - Killed (SIGKILL) and started again after an outage longer than GANTRY_WORKER_LOST_MS: the
//   SDK keeps retrying its results and posts them to the new process, which gives the workers
//   a grace to reconnect before counting them lost: no SDK job runs twice. runpod-python drops a
//   result after one refused connection (docs/worker-protocol.md): its jobs run again once the
//   reconnect grace is over, and none is lost.
// The store is GANTRY_TEST_BACKEND's (this file is in vitest.config.ts's BOTH_STORES).
import type { ChildProcess } from 'node:child_process';
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildWorkerEnv, eventually } from '../helpers/gantry.js';
import type { Job } from '../../src/sdk/client.js';
import { newEndpoint, newKey } from '../helpers/jobs.js';
import { freePort } from '../helpers/ports.js';
import { createTestSchema, type TestSchema } from '../helpers/postgres.js';
import { killOwned, spawnOwned } from '../helpers/processes.js';
import { scratchDir } from '../helpers/scratch.js';
import { CLI, startGateway, type ServeProcess } from '../helpers/serve-process.js';

const STAND_IN = fileURLToPath(new URL('./fixtures/runpod_like_worker.py', import.meta.url));
const ADMIN_KEY = 'restart-test-admin-key-0123456789';
const BACKEND = process.env.GANTRY_TEST_BACKEND === 'postgres' ? 'postgres' : 'sqlite';
const LOST_MS = 3_000;
/** How long each job runs. */
const JOB_MS = 2_500;
const HANDLER = `import { appendFileSync } from 'node:fs';
export default async function handler(job) {
  appendFileSync(process.env.RUNS_FILE, 'run ' + job.id + '\\n');
  await new Promise((resolve) => setTimeout(resolve, job.input.ms));
  appendFileSync(process.env.RUNS_FILE, 'done ' + job.id + '\\n');
  return { ran: job.id };
}
`;

interface Worker {
  proc: ChildProcess;
  out: () => string;
}

let dir: string;
let schema: TestSchema | undefined;
let port: number;
let gateway: ServeProcess | undefined;
const workers: Worker[] = [];

async function serve(): Promise<ServeProcess> {
  const env: Record<string, string> = { PORT: String(port), GANTRY_WORKER_LOST_MS: String(LOST_MS), GANTRY_REAPER_INTERVAL_MS: '250', GANTRY_JOB_TAKE_WAIT_MS: '2000' };
  if (schema) env.DATABASE_URL = schema.url;
  return startGateway({ adminKey: ADMIN_KEY, dataDir: dir, env });
}

const statuses = (jobs: { ep: string; id: string }[]): Promise<Job[]> => Promise.all(jobs.map((j) => gateway!.client().status(j.ep, j.id)));

function startWorker(command: string, args: string[], env: Record<string, string>): Worker {
  const proc = spawnOwned(command, args, { env: { ...process.env, ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
  let out = '';
  proc.stdout!.setEncoding('utf8').on('data', (d: string) => (out += d));
  proc.stderr!.setEncoding('utf8').on('data', (d: string) => (out += d));
  const worker = { proc, out: () => out };
  workers.push(worker);
  return worker;
}

const sdkLines = (): string => {
  const file = join(dir, 'runs-sdk.log');
  return existsSync(file) ? readFileSync(file, 'utf8') : '';
};

/** How many times each job ran: SDK runs from the handler's file, stand-in runs from their `EVENT taken` lines. */
function runs(): Map<string, number> {
  const count = new Map<string, number>();
  const add = (id: string): void => void count.set(id, (count.get(id) ?? 0) + 1);
  for (const m of sdkLines().matchAll(/^run (\S+)$/gm)) add(m[1]!);
  for (const w of workers) for (const m of w.out().matchAll(/^EVENT taken (\S+)$/gm)) add(m[1]!);
  return count;
}

/** Submits two jobs to each endpoint and waits until all four are IN_PROGRESS. */
async function fourJobsRunning(): Promise<{ ep: string; id: string }[]> {
  const jobs: { ep: string; id: string }[] = [];
  for (const n of [1, 2]) {
    jobs.push({ ep: 'sdk', id: (await gateway!.client().run('sdk', { input: { ms: JOB_MS, n } })).id });
    jobs.push({ ep: 'py', id: (await gateway!.client().run('py', { input: { seconds: JOB_MS / 1000, n } })).id });
  }
  await eventually(async () => ((await statuses(jobs)).every((j) => j.status === 'IN_PROGRESS') ? true : undefined), 20_000, 'four jobs in progress');
  return jobs;
}

beforeAll(async () => {
  dir = scratchDir('restart');
  if (BACKEND === 'postgres') schema = await createTestSchema('restart');
  port = await freePort();
  gateway = await serve();
  for (const ep of ['sdk', 'py']) await newEndpoint(gateway, { id: ep });
  const key = await newKey(gateway, ['worker']);
  const handler = join(dir, 'handler.mjs');
  writeFileSync(handler, HANDLER);
  const url = `http://127.0.0.1:${port}`;
  for (const n of [1, 2]) startWorker(process.execPath, [CLI, 'worker', handler], { ...buildWorkerEnv(url, 'sdk', `sdk-${n}`, key), RUNS_FILE: join(dir, 'runs-sdk.log'), LOG_LEVEL: 'info' });
  for (const n of [1, 2]) startWorker('python3', ['-u', STAND_IN, '--handler', 'sleep'], buildWorkerEnv(url, 'py', `py-${n}`, key));
}, 60_000);

afterAll(async () => {
  killOwned();
  await schema?.drop();
});

describe(`a gateway restart with jobs in flight on SDK and runpod-python workers (${BACKEND} store)`, () => {
  it('stopped (SIGTERM): it waits for the running jobs, takes every result, and no job runs twice', async () => {
    const jobs = await fourJobsRunning();
    expect(await gateway!.stop()).toBe(0);
    expect(gateway!.output()).not.toContain('still running after the stop grace');
    gateway = await serve();
    const after = await statuses(jobs);
    expect(after.map((j) => j.status)).toEqual(['COMPLETED', 'COMPLETED', 'COMPLETED', 'COMPLETED']);
    const counted = runs();
    expect(jobs.map((j) => counted.get(j.id))).toEqual([1, 1, 1, 1]);
  }, 60_000);

  it('killed (SIGKILL) and started again after an outage past GANTRY_WORKER_LOST_MS: no SDK job runs twice, none is lost', async () => {
    const jobs = await fourJobsRunning();
    const stands = workers.filter((w) => w.out().includes('Starting Serverless Worker'));
    const pingErrors = (w: Worker): number => (w.out().match(/ping request error/g) ?? []).length;
    const before = stands.map(pingErrors);
    await gateway!.stop('SIGKILL');
    // Both kinds finished their jobs in the outage and tried to post the results: the stand-ins dropped theirs.
    const sdkIds = jobs.filter((j) => j.ep === 'sdk').map((j) => j.id);
    await eventually(async () => (sdkIds.every((id) => sdkLines().includes(`done ${id}`)) ? true : undefined), 20_000, 'the SDK handlers to finish');
    await eventually(async () => (stands.every((w) => w.out().includes('failed to return job results')) ? true : undefined), 20_000, 'the stand-ins to drop their results');
    // The outage lasts past GANTRY_WORKER_LOST_MS: four more failed pings (1 s apart) from each stand-in.
    await eventually(async () => (stands.every((w, i) => pingErrors(w) >= before[i]! + 4) ? true : undefined), 20_000, 'an outage longer than the lost-worker timeout');
    gateway = await serve();

    const ended = await eventually(async () => {
      const all = await statuses(jobs);
      return all.every((j) => j.status === 'COMPLETED') ? all : undefined;
    }, 45_000, 'every job to complete');
    expect(ended.map((j) => j.status)).toEqual(['COMPLETED', 'COMPLETED', 'COMPLETED', 'COMPLETED']);
    const counted = runs();
    const sdk = jobs.filter((j) => j.ep === 'sdk').map((j) => counted.get(j.id));
    const py = jobs.filter((j) => j.ep === 'py').map((j) => counted.get(j.id));
    // The SDK's results were taken by the new process; runpod-python's were dropped and ran again.
    expect(sdk).toEqual([1, 1]);
    expect(py).toEqual([2, 2]);
    expect(gateway.output()).not.toContain('workers lost');
  }, 90_000);
});
