// Issue 24, item 4: dispatch within an endpoint interleaves keys. Key A queues 10,000 jobs,
// then key B one; a real worker process (`gantry worker` with the echo example) takes them:
// B's job completes before 5 % of A's have.
import { afterAll, describe, expect, it } from 'vitest';
import { eventually, startTestGantry, type TestBackend, type TestGantry } from '../helpers/gantry.js';
import { call, uniqueId } from '../http/http-helpers.js';
import { startWorkerProcess, type WorkerProcess } from '../sdk/worker-process.js';

const A_JOBS = 10_000;
/** Submissions in flight at once. */
const SUBMITTERS = 32;

describe.each<TestBackend>(['sqlite', 'postgres'])('fair dispatch between keys (%s)', (backend) => {
  let t: TestGantry | undefined;
  let worker: WorkerProcess | undefined;
  afterAll(async () => {
    await worker?.stop();
    await t?.close();
  });

  it(`key B's single job completes before 5 % of key A's ${A_JOBS} queued ahead of it`, async () => {
    t = await startTestGantry({}, { backend });
    const gw = t;
    const ep = uniqueId('fair');
    // Room for A's queue: the overload check refuses past workersMax × 500 queued.
    await gw.createEndpoint(ep, { workersMax: 50 });
    const keyA = await gw.createKey(['run', 'read'], [ep]);
    const keyB = await gw.createKey(['run', 'read'], [ep]);
    let next = 0;
    await Promise.all(
      Array.from({ length: SUBMITTERS }, async () => {
        while (next < A_JOBS) {
          const i = next++;
          const r = await call(gw.url, 'POST', `/v2/${ep}/run`, { key: keyA, body: { input: { i } } });
          expect(r.status).toBe(200);
        }
      }),
    );
    const b = await call(gw.url, 'POST', `/v2/${ep}/run`, { key: keyB, body: { input: { b: true } } });
    expect(b.status).toBe(200);
    const bId = (b.json as { id: string }).id;
    expect((await call(gw.url, 'GET', `/v2/${ep}/health`, { key: keyA })).json).toMatchObject({ jobs: { inQueue: A_JOBS + 1 } });

    worker = startWorkerProcess('echo-worker', gw.workerEnv(ep));
    // Stops as soon as B's job completes, or once 5 % of A's have completed without it.
    const completedOfA = await eventually(
      async () => {
        const health = (await call(gw.url, 'GET', `/v2/${ep}/health`, { key: keyA })).json as { jobs: { completed: number } };
        const status = (await call(gw.url, 'GET', `/v2/${ep}/status/${bId}`, { key: keyB })).json as { status: string };
        if (status.status === 'COMPLETED') return health.jobs.completed - 1;
        if (health.jobs.completed >= A_JOBS / 20) return health.jobs.completed;
        return undefined;
      },
      120_000,
      "key B's job to complete",
    );
    expect(completedOfA).toBeLessThan(A_JOBS / 20);
  }, 300_000);
});
