// Issue 9 item 17: a result the gateway refuses (413 on job-done) ends the job FAILED at once,
// and a job its worker loses (never listed in its pings) counts the hand-out toward maxAttempts,
// so neither loops forever. Real gateway over HTTP, protocol-exact runpod-python worker, both backends.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { eventually, startTestGantry, type TestBackend, type TestGantry } from '../helpers/gantry.js';
import { PyWorker } from './py-worker.js';

type Json = Record<string, unknown>;

describe.each<TestBackend>(['sqlite', 'postgres'])('refused and lost results (%s)', (backend) => {
  let gantry: TestGantry;
  let runKey: string;
  const workers: PyWorker[] = [];

  beforeAll(async () => {
    gantry = await startTestGantry({}, { backend });
    runKey = await gantry.createKey(['run', 'read']);
  });
  afterAll(async () => {
    await Promise.all(workers.map((w) => w.stop()));
    await gantry?.close();
  });

  async function api(method: string, path: string, body?: unknown): Promise<Json> {
    const res = await fetch(`${gantry.url}/v2/${path}`, {
      method,
      headers: { authorization: `Bearer ${runKey}`, 'content-type': 'application/json' },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    return (await res.json()) as Json;
  }

  async function endedJob(endpointId: string, handler: string, maxAttempts: number, input: Json, timeoutMs: number): Promise<Json> {
    await gantry.createEndpoint(endpointId, { maxAttempts });
    workers.push(new PyWorker(gantry.workerEnv(endpointId, `${endpointId}-w`), ['--handler', handler]));
    const { id } = (await api('POST', `${endpointId}/run`, { input })) as { id: string };
    return eventually(
      async () => {
        const job = await api('GET', `${endpointId}/status/${id}`);
        return job.status === 'FAILED' || job.status === 'COMPLETED' ? job : undefined;
      },
      timeoutMs,
      `job ${id} to end`,
    );
  }

  it('a result over the 20 MB limit ends the job FAILED with an error saying so', async () => {
    const job = await endedJob(`big-${backend}`, 'big', 3, { bytes: 21_000_000 }, 20_000);
    expect(job.status).toBe('FAILED');
    expect(String(job.error)).toMatch(/result refused.*larger than 20 MB/);
  });

  it('a job its worker forgets is failed once it has been handed out maxAttempts times', async () => {
    const job = await endedJob(`lost-${backend}`, 'forget', 2, {}, 45_000);
    expect(job.status).toBe('FAILED');
    expect(String(job.error)).toMatch(/handed to a worker 2 time/);
  }, 60_000);
});
