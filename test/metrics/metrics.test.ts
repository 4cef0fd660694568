// /metrics scraped and parsed with a Prometheus text-format parser after a known sequence of
// jobs (a real echo worker process, real HTTP, a real webhook receiver), on both store
// backends: every number checked against what the test did.
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { eventually, startTestGantry, type TestGantry } from '../helpers/gantry.js';
import { call, uniqueId, type Json } from '../http/http-helpers.js';
import { startWorkerProcess, type WorkerProcess } from '../sdk/worker-process.js';
import { histogram, labelValues, scrape, value } from './scrape.js';

/** A webhook receiver that answers `status` and resolves `calls(n)` once n calls arrived. */
function webhookReceiver(status: number) {
  let count = 0;
  const waiting: { n: number; resolve: () => void }[] = [];
  const server: Server = createServer((req, res) => {
    req.resume();
    req.on('end', () => {
      count++;
      res.writeHead(status).end();
      for (const w of waiting.filter((w) => count >= w.n)) w.resolve();
    });
  });
  return {
    listen: () => new Promise<string>((resolve) => server.listen(0, '127.0.0.1', () => resolve(`http://127.0.0.1:${(server.address() as AddressInfo).port}/hook`))),
    calls: (n: number) => (count >= n ? Promise.resolve() : new Promise<void>((resolve) => waiting.push({ n, resolve }))),
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}

describe.each(['sqlite', 'postgres'] as const)('/metrics (%s store)', (backend) => {
  let t: TestGantry;
  let key: string;
  let worker: WorkerProcess | undefined;
  const ok = webhookReceiver(200);
  const refusing = webhookReceiver(500);

  beforeAll(async () => {
    t = await startTestGantry({ rateLimits: true, webhookRetryMs: 0, jobTakeWaitMs: 500, outboundAllow: ['127.0.0.1'] }, { backend });
    key = await t.createKey(['run']);
  });

  afterAll(async () => {
    await worker?.stop();
    await t?.close();
    await Promise.all([ok.close(), refusing.close()]);
  });

  const v2 = (endpoint: string, path: string, body?: unknown) => call(t.url, body === undefined ? 'GET' : 'POST', `/v2/${endpoint}/${path}`, { key, ...(body === undefined ? {} : { body }) });

  it('counts jobs by final state, their delay and execution, queue depth, workers, webhooks and requests', async () => {
    const echo = uniqueId('m-echo');
    const idle = uniqueId('m-idle');
    await t.createEndpoint(echo);
    await t.createEndpoint(idle);
    worker = startWorkerProcess('echo-worker', t.workerEnv(echo));
    const [okHook, refusingHook] = await Promise.all([ok.listen(), refusing.listen()]);

    // 3 completed (one with a webhook answered 200, one with a webhook answered 500), 1 failed and retried (fails again).
    for (const input of [{ n: 1 }, { n: 2 }, { n: 3 }]) expect((await v2(echo, 'runsync', { input })).json.status).toBe('COMPLETED');
    const failed = await v2(echo, 'runsync', { input: { fail: 'boom' } });
    expect(failed.json.status).toBe('FAILED');
    expect((await v2(echo, `retry/${String(failed.json.id)}`, {})).status).toBe(200);
    expect((await v2(echo, `status-sync/${String(failed.json.id)}?wait=20000`)).json.status).toBe('FAILED');
    expect((await v2(echo, 'runsync', { input: { hooked: 1 }, webhook: okHook })).json.status).toBe('COMPLETED');
    expect((await v2(echo, 'runsync', { input: { hooked: 2 }, webhook: refusingHook })).json.status).toBe('COMPLETED');
    // 1 cancelled while running.
    const long = await v2(echo, 'run', { input: { delayMs: 60_000 } });
    await eventually(async () => ((await v2(echo, `status/${String(long.json.id)}`)).json.status === 'IN_PROGRESS' ? true : undefined), 20_000, 'the long job to start');
    expect((await v2(echo, `cancel/${String(long.json.id)}`, {})).json.status).toBe('CANCELLED');
    // 2 queued on an endpoint without workers, seen as queue depth, then purged.
    for (const n of [1, 2]) expect((await v2(idle, 'run', { input: { n } })).status).toBe(200);
    const before = await scrape(t.url, t.adminKey);
    expect(value(before, 'gantry_queue_depth', { endpoint: idle })).toBe(2);
    expect((await v2(idle, 'purge-queue', {})).json.removed).toBe(2);
    await Promise.all([ok.calls(1), refusing.calls(3)]);
    // The /requests route allows 10 calls per 10 s: the 11th is refused.
    for (let i = 0; i < 10; i++) expect((await v2(echo, 'requests')).status).toBe(200);
    expect((await v2(echo, 'requests')).status).toBe(429);

    const m = await scrape(t.url, t.adminKey);
    expect(value(m, 'gantry_jobs_submitted_total', { endpoint: echo })).toBe(7);
    expect(value(m, 'gantry_jobs_submitted_total', { endpoint: idle })).toBe(2);
    const finished = (endpoint: string, status: string) => value(m, 'gantry_jobs_finished_total', { endpoint, status });
    expect([finished(echo, 'completed'), finished(echo, 'failed'), finished(echo, 'cancelled'), finished(echo, 'timed_out')]).toEqual([5, 2, 1, 0]);
    expect(finished(idle, 'cancelled')).toBe(2);
    expect(value(m, 'gantry_jobs_requeued_total', { endpoint: echo, reason: 'retry' })).toBe(1);
    // Every job of the echo endpoint was taken once per run (8 runs); each ended once it had started.
    const delay = histogram(m, 'gantry_job_delay_seconds', { endpoint: echo });
    const execution = histogram(m, 'gantry_job_execution_seconds', { endpoint: echo });
    expect(delay.count).toBe(8);
    expect(delay.buckets['+Inf']).toBe(8);
    expect(execution.count).toBe(8);
    expect(execution.sum).toBeGreaterThan(0);
    expect(histogram(m, 'gantry_job_execution_seconds', { endpoint: idle }).count).toBe(0);
    expect(value(m, 'gantry_queue_depth', { endpoint: idle })).toBe(0);
    expect(value(m, 'gantry_jobs_in_progress', { endpoint: echo })).toBe(0);
    await eventually(async () => (value(await scrape(t.url, t.adminKey), 'gantry_workers', { endpoint: echo, state: 'idle' }) === 1 ? true : undefined), 20_000, 'the worker to show idle');
    expect(value(m, 'gantry_webhook_deliveries_total', { outcome: 'delivered' })).toBe(1);
    expect(value(m, 'gantry_webhook_deliveries_total', { outcome: 'rejected' })).toBe(3);
    expect(value(m, 'gantry_http_requests_total', { route: '/v2/{endpoint}/runsync', status: '200' })).toBe(6);
    expect(value(m, 'gantry_http_requests_total', { route: '/v2/{endpoint}/requests', status: '429' })).toBe(1);
    expect(value(m, 'gantry_rate_limited_total', { route: '/v2/{endpoint}/requests', code: 'RATE_LIMITED' })).toBe(1);
    expect(histogram(m, 'gantry_store_call_duration_seconds', { operation: 'insertJob' }).count).toBeGreaterThan(0);
    expect(value(m, 'gantry_leader')).toBe(1);
    // Route labels are patterns: no endpoint or job id ever becomes a label value.
    for (const route of labelValues(m, 'gantry_http_requests_total', 'route')) {
      expect(route).not.toContain(echo);
      expect(route).not.toContain(String(failed.json.id));
    }
  });

  it('a deleted endpoint leaves /metrics at the next scrape', async () => {
    const gone = uniqueId('m-gone');
    await t.createEndpoint(gone);
    expect((await v2(gone, 'run', { input: {} })).status).toBe(200);
    expect(value(await scrape(t.url, t.adminKey), 'gantry_jobs_submitted_total', { endpoint: gone })).toBe(1);
    const res = await call(t.url, 'DELETE', `/admin/v1/endpoints/${gone}`, { key: t.adminKey });
    expect(res.status).toBe(200);
    const m = await scrape(t.url, t.adminKey);
    expect(labelValues(m, 'gantry_jobs_submitted_total', 'endpoint')).not.toContain(gone);
    expect(labelValues(m, 'gantry_queue_depth', 'endpoint')).not.toContain(gone);
  });
});

describe('X-Request-ID and /readyz', () => {
  let t: TestGantry;
  beforeAll(async () => {
    t = await startTestGantry();
  });
  afterAll(async () => {
    await t?.close();
  });

  it('echoes a safe X-Request-ID, replaces an unsafe one, and makes one up when there is none', async () => {
    const id = async (given?: string) => (await call(t.url, 'GET', '/healthz', given === undefined ? {} : { headers: { 'x-request-id': given } })).headers.get('x-request-id');
    expect(await id('trace-42.a:b_c')).toBe('trace-42.a:b_c');
    for (const unsafe of ['x'.repeat(65), 'has space', 'new\u00e9line', '<script>']) {
      const replaced = await id(unsafe);
      expect(replaced).toMatch(/^[0-9a-f]{12}-[0-9a-z]+$/);
    }
    const a = await id();
    const b = await id();
    expect(a).toMatch(/^[0-9a-f]{12}-[0-9a-z]+$/);
    expect(a).not.toBe(b);
    // Errors carry it too.
    const missing = await call(t.url, 'GET', '/nowhere', { headers: { 'x-request-id': 'err-1' } });
    expect(missing.status).toBe(404);
    expect(missing.headers.get('x-request-id')).toBe('err-1');
  });

  it('/readyz reports the store reachable and the migrations applied, without a key', async () => {
    const res = await call(t.url, 'GET', '/readyz');
    expect(res.status).toBe(200);
    expect(res.json).toEqual({ ready: true, checks: { migrations: 'applied', store: 'reachable', disk: 'ok', shutdown: 'no' } } satisfies Json);
  });
});
