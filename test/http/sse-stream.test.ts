/**
 * GET /v2/{endpoint}/stream/{id} with `Accept: text/event-stream`, read by a real EventSource
 * against a real gateway; the worker is simulated over HTTP (runpod-python's requests) so the
 * test decides when each chunk is posted. The JSON answer stays the default.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestGantry, type TestGantry } from '../helpers/gantry.js';
import { call, clientFor, uniqueId, workerFor, type Json } from './http-helpers.js';
import { dataOf, readStream, type ReceivedEvent } from './sse-reader.js';

describe.each(['sqlite', 'postgres'] as const)('/stream as server-sent events (%s store)', (backend) => {
  let t: TestGantry;
  let runKey: string;
  let workerKey: string;

  beforeAll(async () => {
    t = await startTestGantry({ jobTakeWaitMs: 300 }, { backend });
    runKey = await t.createKey(['run']);
    workerKey = await t.createKey(['worker']);
  });
  afterAll(async () => {
    await t?.close();
  });

  async function setup() {
    const id = uniqueId('sse');
    await t.createEndpoint(id);
    return { id, c: clientFor(t, id, runKey), w: workerFor(t, id, workerKey) };
  }

  const streamUrl = (endpointId: string, jobId: string): string => `${t.url}/v2/${endpointId}/stream/${jobId}`;
  const summary = (e: ReceivedEvent): string => (e.type === 'message' ? `chunk ${JSON.stringify(dataOf(e).output)}` : `${e.type} ${dataOf(e).status as string}`);

  it('pushes each status, each chunk as the worker posts it, and the finished job', async () => {
    const { id, c, w } = await setup();
    const jobId = await c.submit({ input: { prompt: 'hi' } });
    const reader = readStream(streamUrl(id, jobId), runKey);
    try {
      await reader.waitFor((e) => e.type === 'status', 'the first status');
      expect((await w.takeJob()).id).toBe(jobId);
      await reader.waitFor((e) => e.type === 'status' && dataOf(e).status === 'IN_PROGRESS', 'IN_PROGRESS');
      // Each chunk reaches the reader while the job is still running: the next post waits for it.
      expect((await w.streamChunk(jobId, 'tok1')).status).toBe(200);
      await reader.waitFor((e) => e.type === 'message', 'the first chunk');
      expect((await w.streamChunk(jobId, { n: 2 })).status).toBe(200);
      await reader.waitFor((e) => e.type === 'message' && dataOf(e).output !== 'tok1', 'the second chunk');
      expect((await w.done(jobId, { output: { text: 'tok1 2' } })).status).toBe(200);
      const done = await reader.waitFor((e) => e.type === 'done', 'the end');
      expect(reader.events.map(summary)).toEqual(['status IN_QUEUE', 'status IN_PROGRESS', 'chunk "tok1"', 'chunk {"n":2}', 'done COMPLETED']);
      expect(dataOf(done)).toMatchObject({ id: jobId, status: 'COMPLETED', output: { text: 'tok1 2' }, workerId: w.id });
      expect(done.lastEventId).toBe('end');
    } finally {
      reader.close();
    }
  });

  it('tells a reader that reconnects after the end to stop (204), and keeps the JSON answer the default', async () => {
    const { id, c, w } = await setup();
    const jobId = await c.submit();
    await w.takeJob();
    await w.streamChunk(jobId, 'a');
    const json = await c.stream(jobId);
    expect(json.headers.get('content-type')).toMatch(/^application\/json/);
    expect(json.json).toEqual({ id: jobId, status: 'IN_PROGRESS', attempt: 1, stream: [{ output: 'a' }] });
    await w.done(jobId, { output: 'a' });
    const again = await call(t.url, 'GET', `/v2/${id}/stream/${jobId}`, { key: runKey, headers: { accept: 'text/event-stream', 'last-event-id': 'end' } });
    expect(again.status).toBe(204);
    const late = readStream(streamUrl(id, jobId), runKey);
    try {
      // A reader arriving after the end gets the final job at once.
      expect(dataOf(await late.waitFor((e) => e.type === 'done', 'the end'))).toMatchObject({ status: 'COMPLETED', output: 'a' });
      expect(late.events.map((e) => e.type)).toEqual(['done']);
    } finally {
      late.close();
    }
  });

  it('answers an unknown job with the JSON 404, which an EventSource reports and does not retry', async () => {
    const { id } = await setup();
    const r = await call(t.url, 'GET', `/v2/${id}/stream/no-such-job`, { key: runKey, headers: { accept: 'text/event-stream' } });
    expect(r.status).toBe(404);
    expect(r.json).toMatchObject({ code: 'JOB_NOT_FOUND' });
    const reader = readStream(streamUrl(id, 'no-such-job'), runKey);
    expect(await reader.failed).toMatchObject({ code: 404 });
    reader.close();
  });

  it('serves many concurrent streams, each with its own chunks in order', async () => {
    const { id, c, w } = await setup();
    const n = 100;
    const jobIds = await Promise.all(Array.from({ length: n }, (_, i) => c.submit({ input: { i } })));
    const readers = new Map(jobIds.map((jobId) => [jobId, readStream(streamUrl(id, jobId), runKey)]));
    try {
      await Promise.all([...readers.values()].map((r) => r.waitFor((e) => e.type === 'status', 'a status')));
      const taken: string[] = [];
      while (taken.length < n) {
        const r = await w.takeBatch(n - taken.length);
        if (r.status === 200) taken.push(...(r.json as unknown as Json[]).map((job) => job.id as string));
      }
      for (const k of [0, 1, 2]) {
        const posts = await Promise.all(jobIds.map((jobId) => w.streamChunk(jobId, `${jobId}:${k}`)));
        expect(posts.every((p) => p.status === 200)).toBe(true);
      }
      await Promise.all(jobIds.map((jobId) => w.done(jobId, { output: 'ok' })));
      const dones = await Promise.all([...readers.values()].map((r) => r.waitFor((e) => e.type === 'done', 'the end')));
      expect(dones.every((e) => dataOf(e).status === 'COMPLETED')).toBe(true);
      for (const [jobId, reader] of readers) {
        const chunks = reader.events.filter((e) => e.type === 'message').map((e) => dataOf(e).output);
        expect(chunks).toEqual([`${jobId}:0`, `${jobId}:1`, `${jobId}:2`]);
      }
    } finally {
      for (const reader of readers.values()) reader.close();
    }
  });
});

describe('/stream server-sent events under the rate limits', () => {
  let t: TestGantry;
  beforeAll(async () => {
    t = await startTestGantry({ rateLimits: true });
  });
  afterAll(async () => {
    await t?.close();
  });

  it('counts each open stream among the held long-polls (400 per endpoint), not among plain reads', async () => {
    const id = uniqueId('sse-limit');
    await t.createEndpoint(id);
    const c = clientFor(t, id, t.adminKey);
    const jobId = await c.submit();
    const others = Array.from({ length: 399 }, () => t.gantry.gateway.http.rateLimiter.enter(id, 'long-poll'));
    const held = async (): Promise<Response> => fetch(`${t.url}/v2/${id}/status-sync/${jobId}?wait=1000`, { headers: { authorization: `Bearer ${t.adminKey}` } });
    const reader = readStream(`${t.url}/v2/${id}/stream/${jobId}`, t.adminKey);
    try {
      await reader.waitFor((e) => e.type === 'status', 'the first status');
      const refused = await held();
      expect(refused.status).toBe(429);
      expect(await refused.json()).toMatchObject({ code: 'TOO_MANY_CONCURRENT' });
      // Plain reads have their own concurrency: the open stream does not crowd them out.
      expect((await c.status(jobId)).status).toBe(200);
    } finally {
      reader.close();
    }
    // The closed stream gives its slot back (the gateway notices the client left).
    for (;;) {
      const r = await held();
      await r.arrayBuffer();
      if (r.status === 200) break;
      expect(r.status).toBe(429);
      await new Promise((resolve) => setImmediate(resolve));
    }
    for (const leave of others) leave();
  });
});
