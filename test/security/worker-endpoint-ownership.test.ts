// Issue 9, item 2: a worker id belongs to the endpoint that registered it. Worker requests
// for it under another endpoint (ping, job-take, job-stop, job-done, job-stream) are refused
// with 409 WORKER_OF_OTHER_ENDPOINT and change nothing: not the job, not its stop signal,
// not the worker's row.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestGantry, type TestBackend, type TestGantry } from '../helpers/gantry.js';
import { call, uniqueId, type Json } from '../http/http-helpers.js';

describe.each<TestBackend>(['sqlite', 'postgres'])('worker ids belong to one endpoint (%s)', (backend) => {
  let t: TestGantry;
  let a: string;
  let b: string;
  let keyA: string;
  let keyB: string;
  let runB: string;

  beforeAll(async () => {
    t = await startTestGantry({ jobTakeWaitMs: 1_000 }, { backend });
    a = uniqueId('a');
    b = uniqueId('b');
    await t.createEndpoint(a);
    await t.createEndpoint(b);
    keyA = await t.createKey(['worker'], [a]);
    keyB = await t.createKey(['worker'], [b]);
    runB = await t.createKey(['run'], [b]);
  });
  afterAll(() => t?.close());

  const workersOf = async (endpointId: string) =>
    ((await call(t.url, 'GET', `/admin/v1/endpoints/${endpointId}/workers`, { key: t.adminKey })).json.workers as { id: string; jobs: number }[]).map((w) => w.id);

  it('refuses every worker operation for B’s worker under A, and B’s worker keeps its job, row and stop signal', async () => {
    const wB = uniqueId('wb');
    const submitted = await call(t.url, 'POST', `/v2/${b}/run`, { key: runB, body: { input: { n: 1 } } });
    const jobId = submitted.json.id as string;
    const taken = await call(t.url, 'GET', `/v2/${b}/job-take/${wB}?job_in_progress=0`, { key: keyB });
    expect((taken.json as Json).id).toBe(jobId);

    const foreign: [string, string, unknown?][] = [
      ['GET', `/v2/${a}/ping/${wB}?runpod_version=1.12.0`],
      ['GET', `/v2/${a}/job-take/${wB}`],
      ['GET', `/v2/${a}/job-take-batch/${wB}?batch_size=2`],
      ['POST', `/v2/${a}/job-done/${wB}/${jobId}`, { output: 'forged' }],
      ['POST', `/v2/${a}/job-stream/${wB}/${jobId}`, { output: 'forged' }],
    ];
    for (const [method, path, body] of foreign) {
      const r = await call(t.url, method, path, { key: keyA, rawAuth: true, ...(body === undefined ? {} : { body }) });
      expect(r.status, `${method} ${path}`).toBe(409);
      expect(r.json.code).toBe('WORKER_OF_OTHER_ENDPOINT');
    }
    expect(await workersOf(b)).toContain(wB);
    expect(await workersOf(a)).not.toContain(wB);
    const status = await call(t.url, 'GET', `/v2/${b}/status/${jobId}`, { key: runB });
    expect(status.json.status).toBe('IN_PROGRESS');

    // The cancel signal of B's job goes to B's worker, not to whoever asks under A.
    expect((await call(t.url, 'POST', `/v2/${b}/cancel/${jobId}`, { key: runB })).status).toBe(200);
    const stolen = await call(t.url, 'GET', `/v2/${a}/job-stop/${wB}`, { key: keyA });
    expect(stolen.status).toBe(409);
    const stop = await call(t.url, 'GET', `/v2/${b}/job-stop/${wB}`, { key: keyB });
    expect(stop.status).toBe(200);
    expect(stop.json.jobsToStop).toEqual([jobId]);
  });

  it('the owner keeps working after refused attempts, and a fresh id may register under A', async () => {
    const wB = uniqueId('wb');
    expect((await call(t.url, 'GET', `/v2/${b}/ping/${wB}`, { key: keyB })).status).toBe(200);
    expect((await call(t.url, 'GET', `/v2/${a}/ping/${wB}`, { key: keyA })).status).toBe(409);
    expect((await call(t.url, 'GET', `/v2/${b}/ping/${wB}`, { key: keyB })).status).toBe(200);
    const wA = uniqueId('wa');
    expect((await call(t.url, 'GET', `/v2/${a}/ping/${wA}`, { key: keyA })).status).toBe(200);
    expect(await workersOf(a)).toContain(wA);
  });
});
