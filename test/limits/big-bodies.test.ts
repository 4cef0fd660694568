// Issue 22 item 3: large bodies are parsed off the event loop. A /run, /runsync or job-done body
// of GANTRY_JSON_THREAD_MIN_BYTES or more goes to a JSON thread, and the field the gateway
// stores as text (input, output) is serialised there: the job's input and output are the same
// canonical JSON as for a small body, and the refusals are the same (not JSON, nested too deep,
// input not an object). Timings are measured in bench/big-bodies.js, not here. Real gateway
// over HTTP, both stores.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestGantry, type TestBackend, type TestGantry } from '../helpers/gantry.js';
import { call, uniqueId, workerFor } from '../http/http-helpers.js';

/** A body of about `bytes` bytes whose input is an array of small objects, with spaces the stored JSON drops. */
function bigInput(bytes: number, tag: string): { text: string; input: { tag: string; rows: { i: number; s: string }[] } } {
  const rows: { i: number; s: string }[] = [];
  for (let i = 0; rows.length * 30 < bytes; i++) rows.push({ i, s: `row ${i} é ✓` });
  const input = { tag, rows };
  return { text: `{ "input" : ${JSON.stringify(input, null, 1)} }`, input };
}

describe.each<TestBackend>(['sqlite', 'postgres'])('big bodies are parsed off the event loop (%s)', (backend) => {
  let t: TestGantry;
  let runKey: string;
  let workerKey: string;
  let ep: string;
  const threadParses = (): number => t.gantry.jsonThreads!.parsed();

  beforeAll(async () => {
    t = await startTestGantry({ jobTakeWaitMs: 1_000, jsonThreads: 1, jsonThreadMinBytes: 100_000 }, { backend });
    runKey = await t.createKey(['run', 'read']);
    workerKey = await t.createKey(['worker']);
    ep = uniqueId('big');
    await t.createEndpoint(ep);
  });
  afterAll(async () => t?.close());

  const post = async (path: string, text: string, key = runKey): Promise<{ status: number; json: Record<string, unknown> }> => {
    const res = await fetch(`${t.url}${path}`, { method: 'POST', headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' }, body: text });
    return { status: res.status, json: (await res.json()) as Record<string, unknown> };
  };

  it('stores the input of a large /run as canonical JSON, parsed on a thread; a small one stays on the event loop', async () => {
    const before = threadParses();
    const { text, input } = bigInput(2_000_000, 'run');
    const submitted = await post(`/v2/${ep}/run`, text);
    expect(submitted.status).toBe(200);
    expect(threadParses()).toBe(before + 1);
    const status = await call(t.url, 'GET', `/v2/${ep}/status/${submitted.json.id as string}`, { key: runKey });
    expect(status.text).toContain(`"input":${JSON.stringify(input)}`);
    // The worker gets the same input, and its large output is stored as canonical JSON too.
    const w = workerFor(t, ep, workerKey);
    const taken = await w.takeJob();
    expect(taken).toMatchObject({ id: submitted.json.id, input });
    const small = await post(`/v2/${ep}/run`, '{"input":{"small":true}}');
    expect(small.status).toBe(200);
    expect(threadParses()).toBe(before + 1);
    expect(await w.takeJob()).toMatchObject({ id: small.json.id, input: { small: true } });
    const output = bigInput(1_500_000, 'out').input;
    const done = await post(`/v2/${ep}/job-done/${w.id}/${submitted.json.id as string}`, `{"output": ${JSON.stringify(output, null, 2)}}`, workerKey);
    expect(done.status).toBe(200);
    expect(threadParses()).toBe(before + 2);
    const finished = await call(t.url, 'GET', `/v2/${ep}/status/${submitted.json.id as string}`, { key: runKey });
    expect(finished.json).toMatchObject({ status: 'COMPLETED' });
    expect(finished.text).toContain(`"output":${JSON.stringify(output)}`);
  }, 120_000);

  it('answers a large runsync whose job a worker finishes', async () => {
    const { text } = bigInput(3_000_000, 'sync');
    const w = workerFor(t, ep, workerKey);
    const answered = post(`/v2/${ep}/runsync`, text);
    const taken = await w.takeJob(60_000);
    expect(taken.input).toMatchObject({ tag: 'sync' });
    expect((await w.done(taken.id as string, { output: { ok: 1 } })).status).toBe(200);
    expect(await answered).toMatchObject({ status: 200, json: { status: 'COMPLETED', output: { ok: 1 } } });
  }, 120_000);

  it('refuses a large body that is not JSON, nests too deep or has an input that is no object, as a small one', async () => {
    const before = threadParses();
    const { text } = bigInput(500_000, 'bad');
    const broken = await post(`/v2/${ep}/run`, text.slice(0, -3));
    expect(broken).toMatchObject({ status: 400, json: { code: 'INVALID_JSON' } });
    const deep = `{"input":{"pad":"${'x'.repeat(200_000)}","d":${'['.repeat(5_000)}${']'.repeat(5_000)}}}`;
    expect(await post(`/v2/${ep}/run`, deep)).toMatchObject({ status: 400, json: { code: 'JSON_TOO_DEEP' } });
    const notObject = `{"input":["${'x'.repeat(200_000)}"]}`;
    expect(await post(`/v2/${ep}/run`, notObject)).toMatchObject({ status: 400, json: { code: 'INVALID_PARAMETER', field: 'input' } });
    expect(threadParses()).toBe(before + 3);
  }, 120_000);
});
