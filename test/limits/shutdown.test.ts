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
import { existsSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { eventually } from '../helpers/gantry.js';
import { startGateway, type ServeProcess } from '../helpers/serve-process.js';
import { call, type Reply } from '../http/http-helpers.js';

const ADMIN_KEY = 'shutdown-test-admin-key-0123456789';

type Serve = ServeProcess;

/** `gantry serve` with this file's admin key, on `dataDir` (a new scratch folder by default); the test kit ends it if the test does not. */
const startServe = (dataDir?: string): Promise<Serve> => startGateway({ adminKey: ADMIN_KEY, env: { GANTRY_JOB_TAKE_WAIT_MS: '30000' }, ...(dataDir ? { dataDir } : {}) });

/** A request to `s` with `key`, as it is on the wire (the statuses are what these tests check). */
const send = (s: Serve, key: string, method: string, path: string, body?: unknown): Promise<Reply> => call(s.url, method, path, { key, body });

/** A run+read key and a worker key of `s`. */
async function keysOf(s: Serve): Promise<{ runKey: string; workerKey: string }> {
  const runKey = (await s.admin.createKey({ name: 'run', scopes: ['run', 'read'] })).key;
  const workerKey = (await s.admin.createKey({ name: 'w', scopes: ['worker'] })).key;
  return { runKey, workerKey };
}

describe('gantry serve shuts down cleanly', () => {
  it.each(['SIGTERM', 'SIGINT'] as const)('on %s: waiting calls get {id, status}, parked job-takes 204, shutdown logged', async (signal) => {
    const s = await startServe();
    for (const id of ['sd-a', 'sd-b']) await s.admin.createEndpoint({ id });
    const { runKey, workerKey } = await keysOf(s);
    const client = s.client(runKey);
    const queued = await client.run('sd-a', { input: { n: 1 } });
    // Held: a runsync and a status-sync on endpoint A (no worker), a job-take on the empty endpoint B.
    const runsync = send(s, runKey, 'POST', '/v2/sd-a/runsync?wait=60000', { input: { n: 2 } });
    const statusSync = send(s, runKey, 'GET', `/v2/sd-a/status-sync/${queued.id}?wait=60000`);
    const take = send(s, workerKey, 'GET', '/v2/sd-b/job-take/w-b');
    await eventually(async () => ((await client.health('sd-a')).jobs.inQueue === 2 ? true : undefined), 10_000, 'both jobs queued');
    s.proc.kill(signal);
    const [sync, status, taken] = await Promise.all([runsync, statusSync, take]);
    expect(sync.status).toBe(200);
    expect(sync.json).toEqual({ id: expect.any(String), status: 'IN_QUEUE' });
    expect(status.status).toBe(200);
    expect(status.json).toMatchObject({ id: queued.id, status: 'IN_QUEUE' });
    expect(taken.status).toBe(204);
    expect(await s.exited).toBe(0);
    const msgs = s.logs().map((l) => String(l.msg));
    expect(msgs.some((m) => m.startsWith('shutdown started'))).toBe(true);
    expect(msgs.some((m) => m.startsWith('shutdown finished'))).toBe(true);
  }, 60_000);

  it('during the drain: a job-take for an endpoint with queued jobs gets 204, a running job\'s job-done is accepted; after a restart the queued jobs are still IN_QUEUE', async () => {
    const s = await startServe();
    const dir = s.dataDir;
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
    await s.admin.createEndpoint({ id: 'sd-hold', workersMin: 1, workersMax: 1, worker: { command: `'${process.execPath}' '${script}'`, env: { RELEASE: release, STARTED: started } } });
    await s.admin.createEndpoint({ id: 'sd-a' });
    const { runKey, workerKey } = await keysOf(s);
    const client = s.client(runKey);
    const running = (await client.run('sd-a', { input: { n: 0 } })).id;
    const took = await send(s, workerKey, 'GET', '/v2/sd-a/job-take/w-a');
    expect(took.status).toBe(200);
    expect(took.json.id).toBe(running);
    const queued = [];
    for (const n of [1, 2]) queued.push((await client.run('sd-a', { input: { n } })).id);
    await eventually(async () => existsSync(started) || undefined, 20_000, 'the pool worker holding the drain to start');

    s.proc.kill('SIGTERM');
    await s.waitForLog((l) => l.msg?.startsWith('shutdown started') === true, 'shutdown started');
    // The drain is open (the pool worker has not exited): new requests are still served.
    const take = await send(s, workerKey, 'GET', '/v2/sd-a/job-take/w-late');
    expect(take.status).toBe(204);
    const batch = await send(s, workerKey, 'GET', '/v2/sd-a/job-take-batch/w-late?batch_size=5');
    expect(batch.status).toBe(204);
    const done = await send(s, workerKey, 'POST', `/v2/sd-a/job-done/w-a/${running}`, { output: { ok: true } });
    expect(done.status).toBe(200);
    expect(done.json).toMatchObject({ id: running, status: 'COMPLETED', accepted: true });
    expect(s.proc.exitCode, 'still draining when the requests above were answered').toBeNull();
    writeFileSync(release, '');
    expect(await s.exited).toBe(0);

    const again = await startServe(dir);
    expect((await again.client(runKey).health('sd-a')).jobs).toMatchObject({ inQueue: 2, inProgress: 0 });
    for (const id of queued) expect((await send(again, runKey, 'GET', `/v2/sd-a/status/${id}`)).json).toMatchObject({ id, status: 'IN_QUEUE' });
    expect((await send(again, runKey, 'GET', `/v2/sd-a/status/${running}`)).json).toMatchObject({ id: running, status: 'COMPLETED', output: { ok: true } });
    // The finished job is not handed out again; the two queued ones are, once each.
    const after = await send(again, workerKey, 'GET', '/v2/sd-a/job-take-batch/w-b?batch_size=5');
    expect(after.status).toBe(200);
    expect((after.json as unknown as { id: string }[]).map((j) => j.id).sort()).toEqual([...queued].sort());
    again.proc.kill('SIGTERM');
    expect(await again.exited).toBe(0);
  }, 90_000);
});
