// Issue 9 item 12: deeply nested JSON is a 400 naming the problem (on job-done the job ends
// instead of running on), and NUL bytes in ids, queries and a worker's error string never make
// a 500 or leave a job in progress. Real gateway over HTTP, both store backends.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestGantry, type TestBackend, type TestGantry } from '../helpers/gantry.js';

type Json = Record<string, unknown>;

const nested = (depth: number): string => `{"input":${'{"a":'.repeat(depth)}1${'}'.repeat(depth)}}`;

describe.each<TestBackend>(['sqlite', 'postgres'])('hostile JSON and NUL bytes (%s)', (backend) => {
  let gantry: TestGantry;
  let runKey: string;
  let workerKey: string;

  beforeAll(async () => {
    gantry = await startTestGantry({ jobTakeWaitMs: 2_000 }, { backend });
    runKey = await gantry.createKey(['run', 'read']);
    workerKey = await gantry.createKey(['worker']);
    await gantry.createEndpoint('deep');
  });
  afterAll(async () => gantry?.close());

  async function call(key: string, method: string, path: string, body?: string): Promise<{ status: number; json: Json }> {
    const res = await fetch(`${gantry.url}${path}`, { method, headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' }, body });
    const text = await res.text();
    return { status: res.status, json: text === '' ? {} : (JSON.parse(text) as Json) };
  }

  /** Submits a job and takes it as worker `w1`; returns its id. */
  async function heldJob(): Promise<string> {
    const { json } = await call(runKey, 'POST', '/v2/deep/run', '{"input":{"n":1}}');
    const taken = await call(workerKey, 'GET', '/v2/deep/job-take/w1');
    expect(taken.json.id).toBe(json.id);
    return json.id as string;
  }

  it('refuses a /run and a /runsync body nested 5,000 levels deep with 400 naming the nesting', async () => {
    for (const op of ['run', 'runsync']) {
      const res = await call(runKey, 'POST', `/v2/deep/${op}`, nested(5_000));
      expect(res.status).toBe(400);
      expect(res.json).toMatchObject({ code: 'JSON_TOO_DEEP' });
      expect(String(res.json.error)).toMatch(/nested deeper than/);
    }
  });

  it('accepts nesting within the limit', async () => {
    const res = await call(runKey, 'POST', '/v2/deep/run', nested(500));
    expect(res.status).toBe(200);
    await call(runKey, 'POST', '/v2/deep/cancel/' + String(res.json.id));
  });

  it('a job-done nested 5,000 levels deep is a 400 and ends the job FAILED', async () => {
    const id = await heldJob();
    const done = await call(workerKey, 'POST', `/v2/deep/job-done/w1/${id}`, `{"output":${'['.repeat(5_000)}${']'.repeat(5_000)}}`);
    expect(done.status).toBe(400);
    const job = await call(runKey, 'GET', `/v2/deep/status/${id}`);
    expect(job.json).toMatchObject({ status: 'FAILED' });
    expect(String(job.json.error)).toMatch(/nested deeper than/);
  });

  it('a NUL byte in an endpoint id, job id or query value is a 400, never a 500', async () => {
    const id = await heldJob();
    for (const [key, method, path] of [
      [runKey, 'GET', '/v2/de%00ep/status/x'],
      [runKey, 'GET', `/v2/deep/status/${id}%00`],
      [runKey, 'POST', `/v2/deep/cancel/${id}%00`],
      [workerKey, 'GET', `/v2/deep/ping/w1?job_id=${id}%00&runpod_version=1.12.0`],
      [workerKey, 'POST', `/v2/deep/job-done/w1/${id}%00`],
    ] as const) {
      const res = await call(key, method, path, method === 'POST' ? '{"output":1}' : undefined);
      expect(res.status, `${method} ${path}`).toBe(400);
      expect(res.json.code).toBe('INVALID_PATH');
    }
    expect((await call(runKey, 'GET', `/v2/deep/status/${id}`)).json.status).toBe('IN_PROGRESS');
  });

  it('stores a worker error string holding NUL bytes, with each NUL replaced', async () => {
    const id = await heldJob();
    const done = await call(workerKey, 'POST', `/v2/deep/job-done/w1/${id}`, JSON.stringify({ error: 'bad\u0000byte' }));
    expect(done.status).toBe(200);
    const job = await call(runKey, 'GET', `/v2/deep/status/${id}`);
    expect(job.json).toMatchObject({ status: 'FAILED', error: 'bad\uFFFDbyte' });
  });
});
