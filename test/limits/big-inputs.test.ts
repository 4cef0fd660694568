// Issue 22 item 3: a job's input is kept apart from the row the state machine rewrites
// (job_inputs, migration 0020) and read only where it is shown. Over real HTTP on both stores: a
// large input still reaches the worker intact at every hand-out (a retry's too), /status and
// /status-sync show it while the job is queued or running and not once it has ended, and a
// 19 MB runsync's answer carries the output without it. The store side (claims carry the input,
// transitions do not; SQLite's claim and result write no input to the WAL) is in
// test/conformance. Timings are measured in bench/big-bodies.js, not here.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestGantry, type TestBackend, type TestGantry } from '../helpers/gantry.js';
import { call, uniqueId, workerFor } from '../http/http-helpers.js';

/** An input of about `bytes` bytes (UTF-8) of compact JSON (small objects, non-ASCII text), and that JSON. */
function bigInput(bytes: number, tag: string): { input: { tag: string; rows: { i: number; s: string }[] }; json: string } {
  const rows: { i: number; s: string }[] = [];
  for (let i = 0, size = 0; size < bytes; i++) {
    const row = { i, s: `r${i} é ✓` };
    rows.push(row);
    size += Buffer.byteLength(JSON.stringify(row)) + 1;
  }
  const input = { tag, rows };
  return { input, json: JSON.stringify(input) };
}

describe.each<TestBackend>(['sqlite', 'postgres'])('a large input kept apart from the job row (%s)', (backend) => {
  let t: TestGantry;
  let runKey: string;
  let workerKey: string;
  let ep: string;

  beforeAll(async () => {
    t = await startTestGantry({ jobTakeWaitMs: 1_000 }, { backend });
    runKey = await t.createKey(['run', 'read']);
    workerKey = await t.createKey(['worker']);
    ep = uniqueId('inputs');
    await t.createEndpoint(ep);
  });
  afterAll(async () => t?.close());

  const post = async (path: string, text: string): Promise<{ status: number; text: string }> => {
    const res = await fetch(`${t.url}/v2/${ep}/${path}`, { method: 'POST', headers: { authorization: `Bearer ${runKey}`, 'content-type': 'application/json' }, body: text });
    return { status: res.status, text: await res.text() };
  };
  const status = async (id: string, path = 'status', query = ''): Promise<string> => {
    const r = await call(t.url, 'GET', `/v2/${ep}/${path}/${id}${query}`, { key: runKey });
    expect(r.status).toBe(200);
    return r.text;
  };

  it('shows a 9 MB input while queued and running, hands it out intact at each run, and leaves it out once ended', async () => {
    const { json } = bigInput(9_000_000, 'run');
    const submitted = await post('run', `{"input":${json}}`);
    expect(submitted.status).toBe(200);
    const id = (JSON.parse(submitted.text) as { id: string }).id;
    expect((await status(id)).includes(`"status":"IN_QUEUE","retries":0,"attempts":0,"input":${json}}`)).toBe(true);

    const w = workerFor(t, ep, workerKey);
    const taken = await w.take();
    expect(taken.status).toBe(200);
    expect(taken.text.startsWith(`{"id":"${id}","input":${json},`)).toBe(true);
    expect((await status(id)).includes(`"input":${json}`)).toBe(true);
    expect((await status(id, 'status-sync', '?wait=1000')).includes(`"input":${json}`)).toBe(true); // still running after its wait: shown as /status shows it
    expect((await w.done(id, { error: 'boom' })).status).toBe(200);
    const failed = await status(id);
    expect(failed).toContain('"status":"FAILED"');
    expect(failed).not.toContain('"input"');

    // A retry hands the same input out again.
    expect((await call(t.url, 'POST', `/v2/${ep}/retry/${id}`, { key: runKey })).status).toBe(200);
    expect((await status(id)).includes(`"input":${json}`)).toBe(true);
    const again = await w.take();
    expect(again.text.startsWith(`{"id":"${id}","input":${json},`)).toBe(true);
    expect((await w.done(id, { output: { ok: 2 } })).status).toBe(200);
    const completed = await status(id);
    expect(completed).toContain('"status":"COMPLETED"');
    expect(completed).toContain('"output":{"ok":2}');
    expect(completed).not.toContain('"input"');
  }, 120_000);

  it('answers a 19 MB runsync with its output and no input, the worker having had the input intact', async () => {
    const { json } = bigInput(19_000_000, 'sync');
    const body = `{"input":${json}}`;
    expect(Buffer.byteLength(body)).toBeGreaterThan(19_000_000);
    const answered = post('runsync', body);
    const w = workerFor(t, ep, workerKey);
    let taken = await w.take();
    for (let i = 0; taken.status === 204 && i < 60; i++) taken = await w.take();
    expect(taken.status).toBe(200);
    const id = (taken.json as { id: string }).id;
    expect(taken.text.startsWith(`{"id":"${id}","input":${json},`)).toBe(true);
    expect((await w.done(id, { output: { rows: 1 } })).status).toBe(200);
    const answer = await answered;
    expect(answer.status).toBe(200);
    expect(JSON.parse(answer.text)).toMatchObject({ id, status: 'COMPLETED', output: { rows: 1 } });
    expect(answer.text).not.toContain('"input"');
  }, 180_000);
});
