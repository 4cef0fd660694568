/**
 * A gateway shutting down (its `close()`, what SIGTERM runs) with OpenAI requests open, over
 * HTTP: it no longer treats them as clients that left. A job that ends within the shutdown's
 * grace is answered as usual; one that does not is answered 503 `gateway_closing` with
 * `x-should-retry: true` (an in-stream error and [DONE] once a stream has begun) just before the
 * grace ends: a running job is left to run, a job still queued is cancelled (its client sends
 * the request again). The worker is simulated over HTTP up to the
 * shutdown; during it, its writes go straight to the store, as they would through another gateway.
 */
import { rmSync } from 'node:fs';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { startTestGantry, type TestGantry } from '../helpers/gantry.js';
import { uniqueId, workerFor } from '../http/http-helpers.js';

const started: TestGantry[] = [];
afterEach(async () => {
  for (const t of started.splice(0)) await t.gantry.close();
});

const chat = { model: 'm', messages: [{ role: 'user', content: 'hi' }] };

describe('OpenAI requests during a gateway shutdown', () => {
  it('answers the jobs that end within the grace, and 503 with x-should-retry: true for those that do not, cancelling only the one still queued', async () => {
    const t = await startTestGantry({ jobTakeWaitMs: 300 });
    started.push(t);
    const id = uniqueId('oai-sd');
    await t.createEndpoint(id);
    const runKey = await t.createKey(['run']);
    const w = workerFor(t, id, await t.createKey(['worker']));
    // `send` resolves once the answer's headers arrive; `read` with the whole answer.
    const send = (body: unknown): Promise<Response> =>
      fetch(`${t.url}/v2/${id}/openai/v1/chat/completions`, {
        method: 'POST',
        headers: { authorization: `Bearer ${runKey}`, 'content-type': 'application/json' },
        body: JSON.stringify(body),
      });
    const read = (answer: Promise<Response>): Promise<{ status: number; headers: Headers; text: string }> =>
      answer.then(async (r) => ({ status: r.status, headers: r.headers, text: await r.text() }));
    const post = (body: unknown): Promise<{ status: number; headers: Headers; text: string }> => read(send(body));
    // Four requests, each job taken by the worker: two finish during the shutdown, two never.
    const finishing = post(chat);
    const finishingJob = (await w.takeJob()).id as string;
    const finishingStreamHeads = send({ ...chat, stream: true });
    const finishingStream = read(finishingStreamHeads);
    const finishingStreamJob = (await w.takeJob()).id as string;
    await w.streamChunk(finishingStreamJob, { n: 1 });
    const unfinished = post(chat);
    const unfinishedJob = (await w.takeJob()).id as string;
    const unfinishedStreamHeads = send({ ...chat, stream: true });
    const unfinishedStream = read(unfinishedStreamHeads);
    const unfinishedStreamJob = (await w.takeJob()).id as string;
    await w.streamChunk(unfinishedStreamJob, { n: 1 });
    // A fifth whose job no worker takes.
    const queued = post(chat);
    await vi.waitFor(async () => expect((await t.gantry.gateway.jobs.health(id)).jobs.inQueue).toBe(1), { timeout: 10_000, interval: 50 });
    const queuedJob = (await t.gantry.gateway.jobs.listRequests(id, 10)).find((j) => j.status === 'IN_QUEUE')?.id;
    // Both streams have begun before the shutdown: their headers (sent with the first chunk) have arrived.
    await Promise.all([finishingStreamHeads, unfinishedStreamHeads]);
    const cancel = vi.spyOn(t.gantry.gateway.jobs, 'cancel');

    const closing = t.gantry.close();
    const transitions = t.gantry.gateway.transitions;
    const write = { workerId: w.id, endpointId: id };
    // The shutdown has closed the waits and stopped listening, and in the same step told the
    // OpenAI requests of it: the jobs below end during the shutdown, not before it.
    await vi.waitFor(() => expect(t.gantry.server.listening).toBe(false), { timeout: 10_000, interval: 10 });
    await transitions.finish({ ...write, id: finishingJob, status: 'COMPLETED', outputJson: '[{"object":"chat.completion","choices":[]}]', error: null });
    await transitions.appendStream({ ...write, id: finishingStreamJob, chunks: ['{"n":2}'], bytes: 7, maxBytes: 1_000_000 });
    await transitions.finish({ ...write, id: finishingStreamJob, status: 'COMPLETED', outputJson: '[]', error: null });

    const done = await finishing;
    expect(done.status).toBe(200);
    expect(JSON.parse(done.text)).toEqual({ object: 'chat.completion', choices: [] });
    expect((await finishingStream).text).toBe('data: {"n":1}\n\ndata: {"n":2}\n\ndata: [DONE]\n\n');

    const refused = await unfinished;
    expect(refused.status).toBe(503);
    expect(refused.headers.get('x-should-retry')).toBe('true');
    expect(refused.headers.get('x-request-id')).toBe(unfinishedJob);
    expect(JSON.parse(refused.text)).toEqual({
      error: { message: 'The gateway is shutting down before the job finished; send the request again', type: 'server_error', param: null, code: 'gateway_closing' },
    });
    const cut = await unfinishedStream;
    expect(cut.status).toBe(200);
    expect(cut.text).toBe(
      'data: {"n":1}\n\ndata: {"error":{"message":"The gateway is shutting down before the job finished; send the request again","type":"server_error","param":null,"code":"gateway_closing"}}\n\ndata: [DONE]\n\n',
    );
    const notTaken = await queued;
    expect(notTaken.status).toBe(503);
    expect(notTaken.headers.get('x-request-id')).toBe(queuedJob);
    await closing;
    // Only the job no worker had taken was cancelled: both unfinished running ones go on.
    expect(cancel.mock.calls).toEqual([[id, queuedJob]]);
    started.pop();
    const again = await startTestGantry({}, { dataDir: t.dataDir });
    started.push(again);
    const statusOf = async (job: string): Promise<unknown> => (await again.gantry.gateway.jobs.status(id, job, null))?.status;
    expect(await statusOf(unfinishedJob)).toBe('IN_PROGRESS');
    expect(await statusOf(unfinishedStreamJob)).toBe('IN_PROGRESS');
    expect(await statusOf(finishingJob)).toBe('COMPLETED');
    expect(await statusOf(queuedJob as string)).toBe('CANCELLED');
    await again.gantry.close();
    started.pop();
    rmSync(t.dataDir, { recursive: true, force: true });
  }, 40_000);
});
