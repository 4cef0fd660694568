// The console API's job route (GET /console/api/jobs/{endpoint}/{job}) over real HTTP: a
// running job's buffered stream chunks are shown without being taken from the client (a stream
// read afterwards still gets every one), bounded by ?chunks=, refused without a session and on
// bad input naming the field; a finished job's input is shown (which /status leaves out), up to
// a bound. The job's worker is simulated over HTTP.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { JOB_PAGE_INPUT_MAX_CHARS } from '../../src/console/job-page-route.js';
import { startTestGantry, type TestGantry } from '../helpers/gantry.js';
import { clientFor, uniqueId, workerFor } from '../http/http-helpers.js';

let t: TestGantry;
let cookie: string;

beforeAll(async () => {
  t = await startTestGantry();
  const res = await fetch(`${t.url}/console/api/session`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ key: t.adminKey }) });
  expect(res.status).toBe(200);
  cookie = (res.headers.get('set-cookie') ?? '').split(';')[0]!;
});
afterAll(async () => {
  await t.close();
});

async function jobPage(path: string, withSession = true): Promise<{ status: number; json: Record<string, unknown> }> {
  const res = await fetch(`${t.url}/console/api/jobs/${path}`, { headers: withSession ? { cookie } : {} });
  return { status: res.status, json: (await res.json()) as Record<string, unknown> };
}

describe('the job page route', () => {
  it("shows a running job's buffered chunks without draining them, bounded by ?chunks=", async () => {
    const ep = uniqueId('stream');
    await t.createEndpoint(ep);
    const c = clientFor(t, ep, await t.createKey(['run']));
    const w = workerFor(t, ep, await t.createKey(['worker']));
    const id = await c.submit({ input: {} });
    expect((await w.takeJob()).id).toBe(id);
    expect((await w.streamChunk(id, 'one')).status).toBe(200);
    expect((await w.streamChunk(id, { two: 2 })).status).toBe(200);
    expect((await w.streamChunk(id, [3])).status).toBe(200);

    const first = await jobPage(`${ep}/${id}`);
    expect(first.status).toBe(200);
    // A running job has no meter yet: its cost is nothing so far (metered when the run ends).
    const times = first.json.times as Record<string, string | null>;
    expect(first.json).toEqual({ id, status: 'IN_PROGRESS', input: {}, inputChars: 2, times, workerId: w.id, stream: { chunks: ['one', { two: 2 }, [3]], total: 3 }, webhook: null, cost: { costUsd: '0', runs: [] } });
    // Created, queued and started (ISO, in that order); not finished.
    expect(times.finishedAt).toBeNull();
    expect(Date.parse(times.createdAt!)).toBeLessThanOrEqual(Date.parse(times.queuedAt!));
    expect(Date.parse(times.queuedAt!)).toBeLessThanOrEqual(Date.parse(times.startedAt!));
    // Read twice: still all there.
    expect((await jobPage(`${ep}/${id}`)).json.stream).toEqual({ chunks: ['one', { two: 2 }, [3]], total: 3 });
    expect((await jobPage(`${ep}/${id}?chunks=2`)).json.stream).toEqual({ chunks: ['one', { two: 2 }], total: 3 });

    // The client's own read of the stream still gets every chunk; then none is buffered.
    const read = await c.stream(id, '?wait=0');
    expect(read.json).toMatchObject({ id, status: 'IN_PROGRESS', stream: [{ output: 'one' }, { output: { two: 2 } }, { output: [3] }] });
    expect((await jobPage(`${ep}/${id}`)).json.stream).toEqual({ chunks: [], total: 0 });

    expect((await w.streamChunk(id, 'last')).status).toBe(200);
    expect((await w.done(id, { output: 'finished' })).status).toBe(200);
    const done = (await jobPage(`${ep}/${id}`)).json;
    expect(done).toMatchObject({ status: 'COMPLETED', stream: { chunks: ['last'], total: 1 }, workerId: w.id });
    const finishedAt = (done.times as Record<string, string | null>).finishedAt;
    expect(Date.parse(finishedAt!)).toBeGreaterThanOrEqual(Date.parse(times.startedAt!));
  });

  it("shows a finished job's input, which the public /status leaves out, up to a bound", async () => {
    const ep = uniqueId('input');
    await t.createEndpoint(ep);
    const c = clientFor(t, ep, await t.createKey(['run']));
    const w = workerFor(t, ep, await t.createKey(['worker']));
    const input = { prompt: 'kept for the job page', n: [1, 2] };
    const id = await c.submit({ input });
    expect((await w.takeJob()).id).toBe(id);
    expect((await w.done(id, { output: 'done' })).status).toBe(200);
    const page = await jobPage(`${ep}/${id}`);
    expect(page.json).toMatchObject({ id, status: 'COMPLETED', input, inputChars: JSON.stringify(input).length });
    // The RunPod shape of /status is unchanged: a finished job's input is not there.
    const status = await c.status(id);
    expect(status.json).toMatchObject({ id, status: 'COMPLETED', output: 'done' });
    expect(status.json).not.toHaveProperty('input');

    // Longer than the bound: left out, its length given.
    const big = { text: 'x'.repeat(JOB_PAGE_INPUT_MAX_CHARS) };
    const bigId = await c.submit({ input: big });
    const bigPage = await jobPage(`${ep}/${bigId}`);
    expect(bigPage.status).toBe(200);
    expect(bigPage.json).not.toHaveProperty('input');
    expect(bigPage.json.inputChars).toBe(JSON.stringify(big).length);
  });

  it('refuses without a session, on a bad ?chunks= naming the field, and for unknown endpoints and jobs', async () => {
    const ep = uniqueId('refusals');
    await t.createEndpoint(ep);
    const id = await clientFor(t, ep, await t.createKey(['run'])).submit({ input: {} });
    expect((await jobPage(`${ep}/${id}`, false)).status).toBe(401);
    for (const bad of ['0', '501', 'x']) {
      const r = await jobPage(`${ep}/${id}?chunks=${bad}`);
      expect(r.status, bad).toBe(400);
      expect(r.json).toMatchObject({ code: 'INVALID_PARAMETER', field: 'chunks' });
    }
    expect((await jobPage(`${ep}/nope`)).json).toMatchObject({ code: 'JOB_NOT_FOUND' });
    expect((await jobPage(`nope-${ep}/${id}`)).json).toMatchObject({ code: 'ENDPOINT_NOT_FOUND' });
    // A job of another endpoint is not found under this one.
    const other = uniqueId('other');
    await t.createEndpoint(other);
    expect((await jobPage(`${other}/${id}`)).status).toBe(404);
    const post = await fetch(`${t.url}/console/api/jobs/${ep}/${id}`, { method: 'POST', headers: { cookie } });
    // The route table answers GET only: 405 before any session or CSRF check (nothing runs).
    expect([post.status, post.headers.get('allow')]).toEqual([405, 'GET']);
  });
});
