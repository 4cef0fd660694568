/**
 * The OpenAI routes under the client routes' limits, against a real gateway: a slow upload does
 * not hold one of the endpoint's `openai` concurrency slots (the body is read before the slot
 * is taken, as on /run and /runsync; docs/configuration.md).
 */
import type { IncomingMessage } from 'node:http';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { startTestGantry, type TestGantry } from '../helpers/gantry.js';
import { uniqueId, workerFor } from '../http/http-helpers.js';
import { RawConnection } from '../limits/raw-http.js';

let t: TestGantry | undefined;
const connections: RawConnection[] = [];
afterEach(async () => {
  for (const c of connections.splice(0)) c.close();
  await t?.close();
  t = undefined;
});

describe('OpenAI routes and slow uploads', () => {
  it('a slow upload holds no openai concurrency slot: another client is served, not refused 429', async () => {
    t = await startTestGantry({ rateLimits: true, bodyReadTimeoutMs: 20_000, jobTakeWaitMs: 300 });
    const id = uniqueId('oai-slow');
    // Two concurrent OpenAI requests allowed: two uploads that never finish would have taken both.
    await t.createEndpoint(id, { rateLimits: { openai: { concurrent: 2 } } });
    const runKey = await t.createKey(['run']);
    const w = workerFor(t, id, await t.createKey(['worker']));
    // The requests as the gateway's server receives them, to see when it reads their bodies.
    const received: IncomingMessage[] = [];
    t.gantry.server.on('request', (req: IncomingMessage) => {
      if (req.url?.includes('/openai/')) received.push(req);
    });
    const slow = Array.from({ length: 2 }, () => new RawConnection(t!.url));
    connections.push(...slow);
    await Promise.all(slow.map((c) => c.ready()));
    for (const c of slow) c.startPost(`/v2/${id}/openai/v1/chat/completions`, runKey, 1_000, '{"model":"m",');
    // The gateway has read both heads, authorised them, looked up the endpoint and is reading
    // both bodies (a body flows once the route reads it): each has got as far as it can.
    await vi.waitFor(() => expect(received.filter((r) => r.readableFlowing === true)).toHaveLength(2), { timeout: 10_000, interval: 20 });

    const answer = fetch(`${t.url}/v2/${id}/openai/v1/chat/completions`, {
      method: 'POST',
      headers: { authorization: `Bearer ${runKey}`, 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'm', messages: [{ role: 'user', content: 'hi' }] }),
    });
    // A refusal ends the wait for the worker at once (with the answer as the failure).
    const refused = new Promise<never>((_, reject) => {
      void answer.then(async (r) => r.status !== 200 && reject(new Error(`answered ${r.status} before a worker took its job: ${await r.clone().text()}`)));
    });
    const job = await Promise.race([w.takeJob(), refused]);
    await w.done(job.id as string, { output: { object: 'chat.completion', choices: [] } });
    const res = await answer;
    expect(res.status).toBe(200);
    expect(await res.json()).toEqual({ object: 'chat.completion', choices: [] });
    // The uploads are still being read: nothing was answered on them.
    expect(slow.every((c) => c.received === '' && !c.closed)).toBe(true);
  }, 30_000);
});
