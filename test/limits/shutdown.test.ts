// Issue 9 item 11: on SIGTERM / SIGINT a real `gantry serve` process stops handing out jobs at
// once, answers waiting runsync / status-sync calls with {id, status} (a wait that ran out),
// finishes requests in flight and logs the start and end of its shutdown. Runs the build
// (dist/src/cli/main.js): `npm run build` first.
//
// The reported defect was a queued job handed out during the drain. The drain lasts while the
// pool's workers finish (up to GANTRY_WORKER_STOP_GRACE_MS); the second test holds it open with a
// pool worker that ignores SIGTERM until told, sends a job-take for the endpoint whose jobs are
// queued (204, nothing handed out) and a job-done for a running job (accepted), then restarts on
// the same data and reads the jobs back.
import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterEach, describe, expect, it } from 'vitest';
import { eventually } from '../helpers/gantry.js';

const CLI = fileURLToPath(new URL('../../dist/src/cli/main.js', import.meta.url));
const ADMIN_KEY = 'shutdown-test-admin-key-0123456789';

interface Serve {
  proc: ChildProcess;
  url: string;
  log: () => { msg: string }[];
  exited: Promise<number | null>;
}

let dataDir: string | undefined;
let serve: Serve | undefined;
afterEach(() => {
  if (serve?.proc.exitCode === null) serve.proc.kill('SIGKILL');
  if (dataDir) rmSync(dataDir, { recursive: true, force: true });
  serve = dataDir = undefined;
});

async function startServe(reuse?: string): Promise<Serve> {
  dataDir = reuse ?? mkdtempSync(join(tmpdir(), 'gantry-shutdown-'));
  const env: NodeJS.ProcessEnv = { ...process.env, PORT: '0', GANTRY_HOST: '127.0.0.1', GANTRY_DATA_DIR: dataDir, GANTRY_ADMIN_KEY: ADMIN_KEY, GANTRY_LOG_FORMAT: 'json', GANTRY_LOG_LEVEL: 'info', GANTRY_IMAGE_WORKERS: 'off', GANTRY_RATE_LIMITS: 'off' };
  delete env.DATABASE_URL;
  const proc = spawn(process.execPath, [CLI, 'serve'], { env, stdio: ['ignore', 'pipe', 'pipe'] });
  let out = '';
  proc.stdout!.setEncoding('utf8').on('data', (d: string) => (out += d));
  proc.stderr!.setEncoding('utf8').on('data', (d: string) => (out += d));
  const exited = new Promise<number | null>((resolve) => proc.once('exit', (code) => resolve(code)));
  const log = (): { msg: string; url?: string }[] => out.split('\n').filter((l) => l.startsWith('{')).map((l) => JSON.parse(l) as { msg: string; url?: string });
  const url = await eventually(async () => log().find((l) => l.msg === 'gantry listening')?.url, 30_000, 'gantry serve to listen');
  return { proc, url, log, exited };
}

async function call(s: Serve, key: string, method: string, path: string, body?: unknown): Promise<{ status: number; json: Record<string, unknown> }> {
  const res = await fetch(`${s.url}${path}`, { method, headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' }, body: body === undefined ? undefined : JSON.stringify(body) });
  const text = await res.text();
  return { status: res.status, json: text === '' ? {} : (JSON.parse(text) as Record<string, unknown>) };
}

describe('gantry serve shuts down cleanly', () => {
  it.each(['SIGTERM', 'SIGINT'] as const)('on %s: waiting calls get {id, status}, parked job-takes 204, shutdown logged', async (signal) => {
    const s = (serve = await startServe());
    for (const id of ['sd-a', 'sd-b']) expect((await call(s, ADMIN_KEY, 'POST', '/admin/v1/endpoints', { id })).status).toBe(200);
    const runKey = (await call(s, ADMIN_KEY, 'POST', '/admin/v1/keys', { name: 'run', scopes: ['run', 'read'] })).json.key as string;
    const workerKey = (await call(s, ADMIN_KEY, 'POST', '/admin/v1/keys', { name: 'w', scopes: ['worker'] })).json.key as string;
    const queued = await call(s, runKey, 'POST', '/v2/sd-a/run', { input: { n: 1 } });
    // Held: a runsync and a status-sync on endpoint A (no worker), a job-take on the empty endpoint B.
    const runsync = call(s, runKey, 'POST', '/v2/sd-a/runsync?wait=60000', { input: { n: 2 } });
    const statusSync = call(s, runKey, 'GET', `/v2/sd-a/status-sync/${String(queued.json.id)}?wait=60000`);
    const take = call(s, workerKey, 'GET', '/v2/sd-b/job-take/w-b');
    await eventually(async () => ((await call(s, runKey, 'GET', '/v2/sd-a/health')).json as { jobs?: { inQueue?: number } }).jobs?.inQueue === 2 || undefined, 10_000, 'both jobs queued');
    s.proc.kill(signal);
    const [sync, status, taken] = await Promise.all([runsync, statusSync, take]);
    expect(sync.status).toBe(200);
    expect(sync.json).toEqual({ id: expect.any(String), status: 'IN_QUEUE' });
    expect(status.status).toBe(200);
    expect(status.json).toMatchObject({ id: queued.json.id, status: 'IN_QUEUE' });
    expect(taken.status).toBe(204);
    expect(await s.exited).toBe(0);
    const msgs = s.log().map((l) => l.msg);
    expect(msgs.some((m) => m.startsWith('shutdown started'))).toBe(true);
    expect(msgs.some((m) => m.startsWith('shutdown finished'))).toBe(true);
  }, 60_000);

  it('during the drain: a job-take for an endpoint with queued jobs gets 204, a running job\'s job-done is accepted; after a restart the queued jobs are still IN_QUEUE', async () => {
    const s = (serve = await startServe());
    const dir = dataDir!;
    const release = join(dir, 'release-holder');
    const started = join(dir, 'holder-started');
    // A pool worker that keeps the drain open: it ignores SIGTERM until `release` exists.
    const holder = [
      "const fs = require('node:fs');",
      "fs.writeFileSync(process.env.STARTED, String(process.pid));",
      'let termed = false;',
      "process.on('SIGTERM', () => { termed = true; });",
      // It also goes when the test's data folder does (a failed test SIGKILLs the gateway).
      "setInterval(() => { if ((termed && fs.existsSync(process.env.RELEASE)) || !fs.existsSync(process.env.STARTED)) process.exit(0); }, 50);",
    ].join('\n');
    const script = join(dir, 'holder.cjs');
    writeFileSync(script, holder);
    const holderSettings = { id: 'sd-hold', workersMin: 1, workersMax: 1, worker: { command: `'${process.execPath}' '${script}'`, env: { RELEASE: release, STARTED: started } } };
    expect((await call(s, ADMIN_KEY, 'POST', '/admin/v1/endpoints', holderSettings)).status).toBe(200);
    expect((await call(s, ADMIN_KEY, 'POST', '/admin/v1/endpoints', { id: 'sd-a' })).status).toBe(200);
    const runKey = (await call(s, ADMIN_KEY, 'POST', '/admin/v1/keys', { name: 'run', scopes: ['run', 'read'] })).json.key as string;
    const workerKey = (await call(s, ADMIN_KEY, 'POST', '/admin/v1/keys', { name: 'w', scopes: ['worker'] })).json.key as string;
    const running = String((await call(s, runKey, 'POST', '/v2/sd-a/run', { input: { n: 0 } })).json.id);
    const took = await call(s, workerKey, 'GET', '/v2/sd-a/job-take/w-a');
    expect(took.status).toBe(200);
    expect(took.json.id).toBe(running);
    const queued = [];
    for (const n of [1, 2]) queued.push(String((await call(s, runKey, 'POST', '/v2/sd-a/run', { input: { n } })).json.id));
    await eventually(async () => existsSync(started) || undefined, 20_000, 'the pool worker holding the drain to start');

    s.proc.kill('SIGTERM');
    await eventually(async () => s.log().some((l) => l.msg.startsWith('shutdown started')) || undefined, 10_000, 'shutdown to start');
    // The drain is open (the pool worker has not exited): new requests are still served.
    const take = await call(s, workerKey, 'GET', '/v2/sd-a/job-take/w-late');
    expect(take.status).toBe(204);
    const batch = await call(s, workerKey, 'GET', '/v2/sd-a/job-take-batch/w-late?batch_size=5');
    expect(batch.status).toBe(204);
    const done = await call(s, workerKey, 'POST', `/v2/sd-a/job-done/w-a/${running}`, { output: { ok: true } });
    expect(done.status).toBe(200);
    expect(done.json).toMatchObject({ id: running, status: 'COMPLETED', accepted: true });
    expect(s.proc.exitCode, 'still draining when the requests above were answered').toBeNull();
    writeFileSync(release, '');
    expect(await s.exited).toBe(0);

    const again = (serve = await startServe(dir));
    const health = await call(again, runKey, 'GET', '/v2/sd-a/health');
    expect(health.json).toMatchObject({ jobs: { inQueue: 2, inProgress: 0 } });
    for (const id of queued) expect((await call(again, runKey, 'GET', `/v2/sd-a/status/${id}`)).json).toMatchObject({ id, status: 'IN_QUEUE' });
    expect((await call(again, runKey, 'GET', `/v2/sd-a/status/${running}`)).json).toMatchObject({ id: running, status: 'COMPLETED', output: { ok: true } });
    // The finished job is not handed out again; the two queued ones are, once each.
    const after = await call(again, workerKey, 'GET', '/v2/sd-a/job-take-batch/w-b?batch_size=5');
    expect(after.status).toBe(200);
    expect((after.json as unknown as { id: string }[]).map((j) => j.id).sort()).toEqual([...queued].sort());
    again.proc.kill('SIGTERM');
    expect(await again.exited).toBe(0);
  }, 90_000);
});
