// Issue 9, item 19: any worker id a RunPod worker may send is accepted (URL-encoded or not,
// up to 256 characters); an id Gantry cannot use is answered so that runpod-python backs off
// (429 with Retry-After on job-take: it waits 5 s) instead of re-polling at once on a 400.
// The protocol-exact Python stand-in worker (test/e2e/fixtures) runs a job under such an id.
import type { ChildProcess } from 'node:child_process';
import { spawnOwned } from '../helpers/processes.js';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { eventually, startTestGantry, type TestBackend, type TestGantry } from '../helpers/gantry.js';
import { call, uniqueId } from '../http/http-helpers.js';

const WORKER_SCRIPT = fileURLToPath(new URL('../e2e/fixtures/runpod_like_worker.py', import.meta.url));

describe.each<TestBackend>(['sqlite', 'postgres'])('worker ids (%s)', (backend) => {
  let t: TestGantry;
  let ep: string;
  let run: string;
  let worker: string;
  const procs: ChildProcess[] = [];

  beforeAll(async () => {
    t = await startTestGantry({ jobTakeWaitMs: 1_000 }, { backend });
    ep = uniqueId('ids');
    await t.createEndpoint(ep);
    run = await t.createKey(['run', 'read'], [ep]);
    worker = await t.createKey(['worker'], [ep]);
  });
  afterAll(async () => {
    for (const p of procs) {
      const exited = new Promise((r) => p.once('exit', r));
      p.kill('SIGTERM');
      await exited;
    }
    await t?.close();
  });

  it('a runpod-python worker whose pod id has characters outside letters, digits and ._:@- runs jobs', async () => {
    const podId = `pod+gpu~0!(a,b);x=1*${Math.random().toString(36).slice(2, 6)}`;
    const env = t.workerEnv(ep, podId);
    const base = Object.fromEntries(Object.entries(process.env).filter(([k]) => !k.startsWith('RUNPOD_')));
    const proc = spawnOwned('python3', ['-u', WORKER_SCRIPT, '--handler', 'echo'], { env: { ...base, ...env }, stdio: 'ignore' });
    procs.push(proc);
    const id = (await call(t.url, 'POST', `/v2/${ep}/run`, { key: run, body: { input: { hello: 'pod' } } })).json.id as string;
    const done = await eventually(async () => {
      const s = await call(t.url, 'GET', `/v2/${ep}/status/${id}`, { key: run });
      return s.json.status === 'COMPLETED' ? s.json : undefined;
    }, 20_000, 'the job to complete');
    expect(done.output).toEqual({ hello: 'pod' });
    const workers = (await call(t.url, 'GET', `/admin/v1/endpoints/${ep}/workers`, { key: t.adminKey })).json.workers as { id: string }[];
    expect(workers.map((w) => w.id)).toContain(podId);
  }, 30_000);

  it('accepts URL-encoded ids (spaces, slashes, non-ASCII) on every operation', async () => {
    const podId = `pod é/ü ${Math.random().toString(36).slice(2, 6)}`;
    const path = encodeURIComponent(podId);
    expect((await call(t.url, 'GET', `/v2/${ep}/ping/${path}`, { key: worker, rawAuth: true })).status).toBe(200);
    expect((await call(t.url, 'GET', `/v2/${ep}/job-take/${path}`, { key: worker, rawAuth: true })).status).toBe(204);
    const workers = (await call(t.url, 'GET', `/admin/v1/endpoints/${ep}/workers`, { key: t.adminKey })).json.workers as { id: string }[];
    expect(workers.map((w) => w.id)).toContain(podId);
  });

  it('answers an unusable id with 429 + Retry-After on job-take, 400 naming workerId elsewhere', async () => {
    // A NUL cannot come from a RunPod worker (its id is an environment variable): %00 anywhere in
    // a path is refused before routing, 400 INVALID_PATH (test/limits/hostile-json.test.ts).
    const nul = await call(t.url, 'GET', `/v2/${ep}/job-take/pod%00nul`, { key: worker });
    expect(nul.status).toBe(400);
    expect(nul.json).toMatchObject({ code: 'INVALID_PATH' });
    for (const bad of ['x'.repeat(257), 'pod%0Aline', 'pod%1Bescape']) {
      const take = await call(t.url, 'GET', `/v2/${ep}/job-take/${bad}`, { key: worker });
      expect(take.status, bad).toBe(429);
      expect(take.headers.get('retry-after')).toBe('5');
      expect(take.json).toMatchObject({ code: 'INVALID_WORKER_ID', field: 'workerId' });
      const ping = await call(t.url, 'GET', `/v2/${ep}/ping/${bad}`, { key: worker });
      expect(ping.status, bad).toBe(400);
      expect(ping.json).toMatchObject({ field: 'workerId' });
    }
    expect((await call(t.url, 'GET', `/v2/${ep}/ping/${'y'.repeat(256)}`, { key: worker })).status).toBe(200);
  });
});
