// Malformed and hostile requests: each gets a JSON `{error, code}` with the right status, and
// the gateway keeps serving with its stored jobs intact.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestGantry, type TestGantry } from '../helpers/gantry.js';
import { call, clientFor, isErrorBody, uniqueId, workerFor, type Client, type Reply, type Worker } from './http-helpers.js';

let t: TestGantry;
let ep: string;
let c: Client;
let w: Worker;
let workerKey: string;
let completedId: string;
let queuedId: string;
let completedBefore: string;
let queuedBefore: string;

beforeAll(async () => {
  t = await startTestGantry({ jobTakeWaitMs: 200 });
  ep = uniqueId('bad');
  await t.createEndpoint(ep);
  c = clientFor(t, ep, await t.createKey(['run']));
  workerKey = await t.createKey(['worker']);
  w = workerFor(t, ep, workerKey);
  completedId = await c.submit({ input: { keep: 'this' } });
  await w.takeJob();
  await w.done(completedId, { output: { kept: [1, 2, 3] } });
  queuedId = await c.submit({ input: { waiting: true } });
  completedBefore = (await c.status(completedId)).text;
  queuedBefore = (await c.status(queuedId)).text;
});

afterAll(async () => {
  await t?.close();
});

/** A client of a new endpoint, for tests whose accepted jobs must not join `ep`'s queue. */
async function ownClient(): Promise<Client> {
  const own = uniqueId('bad-own');
  await t.createEndpoint(own);
  return clientFor(t, own, c.key);
}

/** The one code docs/api.md gives each of these statuses; any other status names its code. */
const CODE_OF: Record<number, string> = { 401: 'UNAUTHORIZED', 405: 'METHOD_NOT_ALLOWED', 413: 'PAYLOAD_TOO_LARGE' };

/**
 * The answer is `status` with a JSON `{error, code}` body and exactly that `code` (docs/api.md).
 * With `field`: the body's `field` is that path and the message names it (spaces and case aside).
 */
function expectError(r: Reply, status: number, what: string, field?: string, code = CODE_OF[status]): void {
  expect(r.status, `${what}: ${r.text.slice(0, 200)}`).toBe(status);
  expect(isErrorBody(r), `${what}: error body is JSON {error, code}: ${r.text.slice(0, 200)}`).toBe(true);
  expect(code, `${what}: the test names the code a ${status} answers`).toBeDefined();
  expect(r.json.code, what).toBe(code);
  if (field !== undefined) {
    expect(r.json.field, what).toBe(field);
    const plain = (text: unknown) => String(text).toLowerCase().replace(/[^a-z0-9]/g, ''); // "worker id" names workerId
    expect(plain(r.json.error), `${what}: ${String(r.json.error)}`).toContain(plain(field));
  }
}

describe('submit bodies', () => {
  it('malformed JSON → 400', async () => {
    for (const body of ['{', '{"input": {}', "{'input': {}}", 'input=1', '{"input":{}}}']) {
      expectError(await c.call('POST', 'run', { body }), 400, body, undefined, 'INVALID_JSON');
    }
  });

  it('a body that is not an object → 400', async () => {
    for (const body of ['[]', '"input"', '42', 'null', 'true', '[{"input":{}}]']) {
      expectError(await c.call('POST', 'run', { body }), 400, body, undefined, 'INVALID_BODY');
    }
  });

  it('input missing, an array, a string, a number or null → 400 naming input', async () => {
    for (const body of [{}, { input: [] }, { input: 'text' }, { input: 3 }, { input: null }, { webhook: 'http://x.test/' }]) {
      expectError(await c.run(body), 400, JSON.stringify(body), 'input', 'INVALID_PARAMETER');
      expectError(await c.runsync(body, '?wait=1000'), 400, `runsync ${JSON.stringify(body)}`, 'input', 'INVALID_PARAMETER');
    }
  });

  it('an unknown top-level field or policy field → 400 naming it', async () => {
    expectError(await c.run({ input: {}, inputs: {} }), 400, 'inputs', 'inputs', 'INVALID_PARAMETER');
    expectError(await c.run({ input: {}, policy: { timeout: 6000 } }), 400, 'policy.timeout', 'policy.timeout', 'INVALID_PARAMETER');
    expectError(await c.run({ input: {}, s3Config: { accessId: 'a', accessSecret: 'b', bucketName: 'c', endpointUrl: 'https://s3.test', region: 'x' } }), 400, 's3Config.region', 's3Config.region', 'INVALID_PARAMETER');
  });

  it('wrong types in policy, webhook and s3Config → 400 naming the field', async () => {
    const s3 = { accessId: 'a', accessSecret: 'b', bucketName: 'c', endpointUrl: 'https://s3.test' };
    const cases: [unknown, string][] = [
      [{ input: {}, policy: 'fast' }, 'policy'],
      [{ input: {}, policy: [] }, 'policy'],
      [{ input: {}, policy: { executionTimeout: '6000' } }, 'policy.executionTimeout'],
      [{ input: {}, policy: { executionTimeout: 6000.5 } }, 'policy.executionTimeout'],
      [{ input: {}, policy: { ttl: '20000' } }, 'policy.ttl'],
      [{ input: {}, policy: { ttl: null } }, 'policy.ttl'],
      [{ input: {}, policy: { lowPriority: 1 } }, 'policy.lowPriority'],
      [{ input: {}, policy: { lowPriority: 'false' } }, 'policy.lowPriority'],
      [{ input: {}, webhook: 42 }, 'webhook'],
      [{ input: {}, webhook: { url: 'http://x.test' } }, 'webhook'],
      [{ input: {}, webhook: 'not a url' }, 'webhook'],
      [{ input: {}, webhook: 'ftp://files.test/hook' }, 'webhook'],
      [{ input: {}, s3Config: 'secret' }, 's3Config'],
      [{ input: {}, s3Config: { ...s3, accessId: 1 } }, 's3Config.accessId'],
      [{ input: {}, s3Config: { ...s3, bucketName: undefined } }, 's3Config.bucketName'],
      [{ input: {}, s3Config: { ...s3, endpointUrl: '' } }, 's3Config.endpointUrl'],
    ];
    for (const [body, field] of cases) expectError(await c.run(body), 400, JSON.stringify(body), field, 'INVALID_PARAMETER');
  });

  it('a body over 10 MB on /run → 413', async () => {
    const body = JSON.stringify({ input: { blob: 'x'.repeat(11_000_000) } });
    expectError(await c.call('POST', 'run', { body }), 413, '11 MB /run');
  });

  it('a chunked body (no Content-Length) over 10 MB on /run → 413', async () => {
    const piece = Buffer.alloc(1_000_000, 'a');
    let sent = 0;
    const body = new ReadableStream<Uint8Array>({
      pull(controller) {
        if (sent === 0) controller.enqueue(Buffer.from('{"input":{"blob":"'));
        if (sent >= 12) {
          controller.enqueue(Buffer.from('"}}'));
          controller.close();
          return;
        }
        sent++;
        controller.enqueue(piece);
      },
    });
    let status: number;
    let text = '';
    try {
      const res = await fetch(`${t.url}/v2/${ep}/run`, {
        method: 'POST',
        headers: { authorization: `Bearer ${c.key}`, 'content-type': 'application/json' },
        body,
        duplex: 'half',
      } as RequestInit);
      status = res.status;
      text = await res.text();
    } catch (err) {
      throw new Error(`no response to an oversized chunked body: ${String((err as Error).cause ?? err)}`);
    }
    expect(status, text).toBe(413);
    expect(JSON.parse(text)).toMatchObject({ code: 'PAYLOAD_TOO_LARGE', error: expect.any(String) });
  });

  it('15 MB on /runsync is accepted; 21 MB → 413', async () => {
    const c = await ownClient(); // the accepted job stays on an endpoint of its own
    const ok = await c.call('POST', 'runsync?wait=1000', { body: JSON.stringify({ input: { blob: 'y'.repeat(15_000_000) } }) });
    expect(ok.status, ok.text.slice(0, 200)).toBe(200);
    expect(ok.json.status).toBe('IN_QUEUE');
    expect(ok.json.id).toMatch(/^sync-/);
    expectError(await c.call('POST', 'runsync?wait=1000', { body: JSON.stringify({ input: { blob: 'z'.repeat(21_000_000) } }) }), 413, '21 MB /runsync');
  });

  it('exactly 10 MB on /run is accepted', async () => {
    const overhead = JSON.stringify({ input: { blob: '' } }).length;
    const body = JSON.stringify({ input: { blob: 'q'.repeat(10_000_000 - overhead) } });
    expect(body.length).toBe(10_000_000);
    const r = await (await ownClient()).call('POST', 'run', { body });
    expect(r.status, r.text.slice(0, 200)).toBe(200);
  });
});

describe('unknown things', () => {
  it('an unknown job id → 404 on every job route', async () => {
    const id = '11111111-2222-4333-8444-555555555555';
    for (const [method, op] of [
      ['GET', 'status'],
      ['POST', 'status'],
      ['GET', 'status-sync'],
      ['GET', 'stream'],
      ['POST', 'cancel'],
      ['POST', 'retry'],
    ] as const) {
      expectError(await c.call(method, `${op}/${id}?wait=1000`), 404, `${method} ${op}`, undefined, 'JOB_NOT_FOUND');
    }
    expectError(await c.status('sync-nothing'), 404, 'sync id', undefined, 'JOB_NOT_FOUND');
  });

  it('a job of another endpoint is not found here', async () => {
    const other = uniqueId('bad-other');
    await t.createEndpoint(other);
    const elsewhere = clientFor(t, other, c.key);
    expectError(await elsewhere.status(completedId), 404, 'foreign job', undefined, 'JOB_NOT_FOUND');
    expectError(await elsewhere.cancel(queuedId), 404, 'foreign cancel', undefined, 'JOB_NOT_FOUND');
  });

  it('an unknown endpoint → 404', async () => {
    const none = clientFor(t, 'no-such-endpoint', t.adminKey);
    expectError(await none.run(), 404, 'run', undefined, 'ENDPOINT_NOT_FOUND');
    expectError(await none.status(completedId), 404, 'status', undefined, 'ENDPOINT_NOT_FOUND');
    expectError(await none.health(), 404, 'health', undefined, 'ENDPOINT_NOT_FOUND');
    expectError(await none.purge(), 404, 'purge', undefined, 'ENDPOINT_NOT_FOUND');
  });

  it('unknown routes → 404 JSON, wrong methods → 405 JSON', async () => {
    const key = { key: c.key };
    // `/` itself redirects to the console (test/console/).
    for (const path of ['/v1/x/run', `/v2/${ep}/nope`, `/v2/${ep}/status`, `/v2/${ep}/status/a/b`, '/v2', `/v2/${ep}`, '/admin/v2/keys', '/favicon.ico']) {
      expectError(await call(t.url, 'GET', path, key), 404, `GET ${path}`, undefined, 'NOT_FOUND');
    }
    expectError(await call(t.url, 'POST', `/v2/${ep}/run/extra`, { ...key, body: { input: {} } }), 404, 'POST run/extra', undefined, 'NOT_FOUND');
    expectError(await call(t.url, 'POST', `/v2/${ep}/purge-queue/x`, key), 404, 'POST purge-queue/x', undefined, 'NOT_FOUND');
    for (const [method, op] of [
      ['GET', 'run'],
      ['GET', 'runsync'],
      ['PUT', 'run'],
      ['DELETE', `status/${completedId}`],
      ['PUT', `cancel/${completedId}`],
      ['GET', `cancel/${completedId}`],
      ['POST', 'health'],
      ['DELETE', 'purge-queue'],
    ] as const) {
      expectError(await call(t.url, method, `/v2/${ep}/${op}`, key), 405, `${method} ${op}`);
    }
  });

  it('malformed percent-encoding in the path → 400 JSON', async () => {
    for (const path of [`/v2/${ep}/status/%E0%A4%A`, `/v2/${ep}/status/%zz`, `/v2/%/run`, `/v2/${ep}/status/abc%`]) {
      expectError(await call(t.url, 'GET', path, { key: c.key }), 400, path, undefined, 'INVALID_PATH');
    }
  });

  it('bad query values → 400 JSON', async () => {
    expectError(await c.status(completedId, '?ttl=abc'), 400, 'ttl=abc', 'ttl', 'INVALID_PARAMETER');
    expectError(await c.status(completedId, '?ttl=-5'), 400, 'ttl=-5', 'ttl', 'INVALID_PARAMETER');
    expectError(await c.runsync({ input: {} }, '?wait=soon'), 400, 'wait=soon', 'wait', 'INVALID_PARAMETER');
    expectError(await c.requests('?limit=0'), 400, 'limit=0', 'limit', 'INVALID_PARAMETER');
  });

  it('no key, an unknown key, and an empty Bearer → 401 JSON', async () => {
    expectError(await call(t.url, 'POST', `/v2/${ep}/run`, { body: { input: {} } }), 401, 'no key');
    expectError(await call(t.url, 'POST', `/v2/${ep}/run`, { key: 'gk_unknown', body: { input: {} } }), 401, 'unknown key');
    expectError(await call(t.url, 'POST', `/v2/${ep}/run`, { headers: { authorization: 'Bearer ' }, body: { input: {} } }), 401, 'empty bearer');
    expectError(await call(t.url, 'GET', `/v2/${ep}/status/${completedId}`, { key: 'k'.repeat(5000) }), 401, 'huge key');
  });
});

describe('worker routes', () => {
  it('bad worker requests → 4xx JSON', async () => {
    expectError(await w.call('POST', `job-done/${w.id}/${completedId}`, { body: '{oops', contentType: 'application/x-www-form-urlencoded' }), 400, 'malformed job-done', undefined, 'INVALID_JSON');
    expectError(await w.call('POST', `job-done/${w.id}/${completedId}`, { body: '[1,2]' }), 400, 'array job-done', undefined, 'INVALID_BODY');
    expectError(await w.call('POST', `job-stream/${w.id}/${completedId}`, { body: '"chunk"' }), 400, 'bare stream chunk', undefined, 'INVALID_BODY');
    // NUL cannot come from a RunPod worker (its id is an environment variable): refused before routing.
    expectError(await w.call('GET', 'job-take/bad%00worker%00id'), 400, 'worker id with NUL', undefined, 'INVALID_PATH');
    const backOff = await w.call('GET', 'job-take/bad%0Aworker');
    expectError(backOff, 429, 'worker id with a newline (429: runpod-python backs off)', 'workerId', 'INVALID_WORKER_ID');
    expect(Number(backOff.headers.get('retry-after'))).toBeGreaterThan(0);
    expectError(await w.call('GET', `job-take/${'w'.repeat(300)}`), 429, 'long worker id', 'workerId', 'INVALID_WORKER_ID');
    expectError(await w.call('GET', 'job-take'), 400, 'no worker id', 'workerId', 'INVALID_PARAMETER');
    expectError(await w.call('POST', `job-take/${w.id}`), 405, 'POST job-take');
    expectError(await w.call('GET', `job-done/${w.id}/${completedId}`), 405, 'GET job-done');
    expectError(await w.call('POST', `job-done/${w.id}`, { body: { output: 1 } }), 404, 'job-done without job id', undefined, 'NOT_FOUND');
  });

  it('a result or a chunk for a queued job the worker does not hold → 409 JOB_NOT_HELD, the job untouched', async () => {
    const ownEp = uniqueId('bad-held');
    await t.createEndpoint(ownEp);
    const own = clientFor(t, ownEp, c.key);
    const id = await own.submit({ input: { mine: false } });
    const stranger = workerFor(t, ownEp, workerKey);
    const done = await stranger.call('POST', `job-done/${stranger.id}/${id}`, { body: { output: 'not mine' } });
    expectError(done, 409, 'job-done of a queued job', undefined, 'JOB_NOT_HELD');
    expect(done.json).toMatchObject({ id, status: 'IN_QUEUE' });
    expectError(await stranger.call('POST', `job-stream/${stranger.id}/${id}`, { body: { output: 'c' } }), 409, 'job-stream of a queued job', undefined, 'JOB_NOT_HELD');
    expect((await own.status(id)).json).toMatchObject({ id, status: 'IN_QUEUE', input: { mine: false } });
  });
});

describe('admin routes', () => {
  const admin = (method: string, path: string, body?: unknown): Promise<Reply> => call(t.url, method, `/admin/v1/${path}`, { key: t.adminKey, ...(body === undefined ? {} : { body }) });

  it('creating an endpoint that exists → 409 ENDPOINT_EXISTS, the endpoint unchanged', async () => {
    const id = uniqueId('bad-exists');
    expect((await admin('POST', 'endpoints', { id, workersMax: 2 })).status).toBe(200);
    const again = await admin('POST', 'endpoints', { id, workersMax: 7 });
    expectError(again, 409, 'second create', undefined, 'ENDPOINT_EXISTS');
    expect(again.json.id).toBe(id);
    expect((await admin('GET', `endpoints/${id}`)).json).toMatchObject({ id, workersMax: 2 });
  });

  it('revoking an unknown key → 404 KEY_NOT_FOUND; an unknown endpoint → 404 ENDPOINT_NOT_FOUND', async () => {
    expectError(await admin('DELETE', 'keys/no-such-key'), 404, 'unknown key', undefined, 'KEY_NOT_FOUND');
    expectError(await admin('GET', 'endpoints/no-such-endpoint'), 404, 'unknown endpoint', undefined, 'ENDPOINT_NOT_FOUND');
    expectError(await admin('POST', 'endpoints', { id: 'Bad Id!' }), 400, 'bad endpoint id', 'id', 'INVALID_PARAMETER');
  });
});

describe('afterwards', () => {
  it('the server still answers and stored jobs are intact', async () => {
    expect((await call(t.url, 'GET', '/healthz')).status).toBe(200);
    expect((await c.status(completedId)).text).toBe(completedBefore);
    expect((await c.status(queuedId)).text).toBe(queuedBefore);
    expect(JSON.parse(completedBefore)).toMatchObject({ status: 'COMPLETED', output: { kept: [1, 2, 3] } });
    expect(JSON.parse(queuedBefore)).toMatchObject({ status: 'IN_QUEUE', input: { waiting: true } });
    const id = await c.submit({ input: { after: true } });
    const job = await w.takeJob();
    expect(job.id).toBe(queuedId); // the older job first
    await w.done(queuedId, { output: 'q' });
    expect((await w.takeJob()).id).toBe(id);
    await w.done(id, { output: 'fine' });
    expect((await c.status(id)).json).toMatchObject({ status: 'COMPLETED', output: 'fine' });
  });
});
