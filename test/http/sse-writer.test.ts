/**
 * The SSE writer and the job-stream follow loop (src/http/sse.ts) on real HTTP servers: the
 * wire format, headers held back until the first write, heartbeats on an idle stream (with the
 * real job service of a real gateway), a client leaving, a client that stops reading, and the
 * follow loop waking on a chunk posted while it reads.
 */
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import { connect, type AddressInfo } from 'node:net';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pino } from 'pino';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { createJobWaiters, type JobWaiters } from '../../src/dispatch/job-waiters.js';
import { openSse, sendJobEvents, type SseWriter } from '../../src/http/sse.js';
import { createJobService } from '../../src/jobs/job-service.js';
import { createJobTransitions, initialJob } from '../../src/jobs/transitions.js';
import { createLocalNotifier } from '../../src/store/local-notifier.js';
import { createSqliteStore } from '../../src/store/sqlite/sqlite-store.js';
import type { Store } from '../../src/store/store.js';
import { startTestGantry, type TestGantry } from '../helpers/gantry.js';
import { clientFor, uniqueId } from './http-helpers.js';

type Handler = (req: IncomingMessage, res: ServerResponse, signal: AbortSignal) => Promise<void>;

const servers: Server[] = [];
afterEach(async () => {
  await Promise.all(servers.splice(0).map((s) => new Promise((resolve) => {
    s.closeAllConnections();
    s.close(resolve);
  })));
});

/** A server on port 0 running `handler` with a signal that aborts when the client goes away; `ended` settles with each handler. */
async function serve(handler: Handler): Promise<{ url: string; port: number; ended: Promise<void>[] }> {
  const ended: Promise<void>[] = [];
  const server = createServer((req, res) => {
    const controller = new AbortController();
    res.once('close', () => {
      if (!res.writableFinished) controller.abort();
    });
    ended.push(handler(req, res, controller.signal));
  });
  servers.push(server);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = (server.address() as AddressInfo).port;
  return { url: `http://127.0.0.1:${port}`, port, ended };
}

/** A streamed body read bit by bit: `until` reads on until `holds` is true of the text so far (or the body ends). */
function bodyOf(res: Response): { until(holds: (text: string) => boolean): Promise<string> } {
  const reader = res.body!.getReader();
  const decoder = new TextDecoder();
  let text = '';
  return {
    async until(holds) {
      for (;;) {
        if (holds(text)) return text;
        const { value, done } = await reader.read();
        if (done) return text;
        text += decoder.decode(value, { stream: true });
      }
    },
  };
}

describe('SSE writer', () => {
  it('writes events, comments and ready-made text in the event-stream format', async () => {
    const { url } = await serve(async (_req, res) => {
      const sse = openSse(res, { headers: { 'x-request-id': 'r1' } });
      await sse.event('{"a":1}');
      await sse.event('line one\nline two\r\nline three', { event: 'status', id: '7' });
      await sse.comment('keep-alive');
      await sse.raw('data: ready-made\n\n');
      sse.end();
    });
    const res = await fetch(url);
    expect(res.headers.get('content-type')).toBe('text/event-stream; charset=utf-8');
    expect(res.headers.get('cache-control')).toBe('no-cache, no-transform');
    expect(res.headers.get('x-request-id')).toBe('r1');
    expect(await res.text()).toBe('data: {"a":1}\n\nevent: status\nid: 7\ndata: line one\ndata: line two\ndata: line three\n\n: keep-alive\n\ndata: ready-made\n\n');
  });

  it('holds the headers back until the first write, so a route can still answer an error', async () => {
    let writer: SseWriter | undefined;
    const { url } = await serve(async (_req, res) => {
      writer = openSse(res);
      expect(writer.started).toBe(false);
      res.writeHead(409, { 'content-type': 'application/json' });
      res.end('{"error":"too late"}');
    });
    const res = await fetch(url);
    expect(res.status).toBe(409);
    expect(await res.json()).toEqual({ error: 'too late' });
    expect(writer?.open).toBe(false);
  });

  it('cuts off a client that stops reading, instead of holding its events in memory', async () => {
    let writes = 0;
    let sse: SseWriter | undefined;
    const { port, ended } = await serve(async (_req, res) => {
      sse = openSse(res, { stallMs: 100 });
      const event = 'x'.repeat(64 * 1024);
      while (sse.open) {
        await sse.event(event);
        writes++;
      }
    });
    const socket = connect(port, '127.0.0.1');
    socket.pause(); // reads nothing
    socket.write('GET / HTTP/1.1\r\nhost: localhost\r\n\r\n');
    try {
      while (ended.length === 0) await new Promise((resolve) => setImmediate(resolve));
      await ended[0];
      expect(sse?.open).toBe(false);
      // The socket buffers filled up, then the writer gave up: it did not keep on buffering.
      expect(writes).toBeGreaterThan(0);
      expect(writes).toBeLessThan(10_000);
    } finally {
      socket.destroy();
    }
  });
});

describe('following a job over SSE with the real job service', () => {
  let t: TestGantry;
  beforeAll(async () => {
    t = await startTestGantry();
  });
  afterAll(async () => {
    await t?.close();
  });

  it('writes a heartbeat comment while the job is idle, then the end', async () => {
    const id = uniqueId('sse-idle');
    await t.createEndpoint(id);
    const c = clientFor(t, id, t.adminKey);
    const jobId = await c.submit();
    const { url, ended } = await serve(async (req, res, signal) => {
      await sendJobEvents(t.gantry.gateway.jobs, req, res, id, jobId, signal, 30);
    });
    const body = bodyOf(await fetch(url));
    // Nobody takes the job: heartbeats keep the connection alive.
    const idle = await body.until((text) => text.split(': keep-alive\n\n').length > 3);
    expect(idle.startsWith(`event: status\ndata: {"id":"${jobId}","status":"IN_QUEUE","attempt":0}\n\n: keep-alive\n\n`)).toBe(true);
    expect((await c.cancel(jobId)).status).toBe(200);
    const rest = await body.until(() => false);
    expect(rest).toMatch(new RegExp(`event: done\nid: end\ndata: \\{"id":"${jobId}","status":"CANCELLED"`));
    await ended[0];
  });

  it('ends the loop when the client goes away', async () => {
    const id = uniqueId('sse-leave');
    await t.createEndpoint(id);
    const jobId = await clientFor(t, id, t.adminKey).submit();
    const { url, ended } = await serve(async (req, res, signal) => {
      await sendJobEvents(t.gantry.gateway.jobs, req, res, id, jobId, signal);
    });
    const controller = new AbortController();
    const res = await fetch(url, { signal: controller.signal });
    await bodyOf(res).until((text) => text.includes('IN_QUEUE'));
    controller.abort();
    await ended[0]; // the follow loop returned although the job is still queued
    expect((await t.gantry.gateway.jobs.getJob(id, jobId))?.status).toBe('IN_QUEUE');
  });
});

describe('the follow loop', () => {
  let dir: string;
  let store: Store;
  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'gantry-sse-'));
    store = createSqliteStore({ file: join(dir, 'gantry.db') });
    await store.migrate();
  });
  afterAll(async () => {
    await store.close();
    rmSync(dir, { recursive: true, force: true });
  });

  it('is woken by a chunk posted while it reads (it listens before it reads)', async () => {
    const notifier = createLocalNotifier();
    const transitions = createJobTransitions({ store, notifier, meterOf: async () => null, logger: pino({ level: 'silent' }), now: Date.now });
    const real = createJobWaiters();
    const outcomes: boolean[] = [];
    const waiters: JobWaiters = { ...real, wait: async (...args) => { const woken = await real.wait(...args); outcomes.push(woken); return woken; } };
    notifier.subscribe((event) => event.type === 'job-updated' && waiters.wake(event.jobId));
    const job = initialJob({ id: uniqueId('job'), endpointId: 'ep', inputBytes: 2, webhook: null, s3Config: null, executionTimeoutMs: 60_000, lowPriority: false, ttlMs: 60_000, retentionMs: 60_000, maxAttempts: 1, sync: false, keyId: null, now: Date.now() });
    await transitions.submit(job, '{}');
    await transitions.claim('ep', [{ workerId: 'w1', limit: 1 }]);
    // The worker's chunk lands while the follower's first read is in flight.
    let first = true;
    const racing = new Proxy(store, {
      get(target, name, receiver) {
        if (name !== 'readStream') return Reflect.get(target, name, receiver) as unknown;
        return async (args: Parameters<typeof store.readStream>[0]) => {
          const page = await target.readStream(args);
          if (first) {
            first = false;
            await transitions.appendStream({ id: args.id, workerId: 'w1', endpointId: 'ep', chunks: ['"late"'], bytes: 6, maxBytes: 1_000_000 });
          }
          return page;
        };
      },
    });
    const jobs = createJobService({
      store: racing,
      transitions,
      waiters,
      endpoints: { hooksOf: () => undefined },
      config: { syncRetentionMs: 60_000, asyncRetentionMs: 60_000, workerLostMs: 30_000 },
      now: Date.now,
      // Not used by watchStream:
      gauge: undefined as never,
      pool: undefined as never,
      secrets: undefined as never,
    });
    const read = await jobs.watchStream('ep', job.id, { status: 'IN_PROGRESS', run: 1 }, 0, 60_000, new AbortController().signal);
    expect(read?.chunks).toEqual(['"late"']);
    // The wait after the empty drain was ended by the chunk's wake-up, not by its timeout.
    expect(outcomes[0]).toBe(true);
  });
});
