/**
 * The SDK's wire format against a scripted server: URLs, query strings, headers and bodies
 * as runpod-python 1.12 sends them (docs/worker-protocol.md), retries, stop signals, drain, refresh.
 */
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { resolveWorkerConfig, startWorker, type Handler, type WorkerHandle, type WorkerLogger, type WorkerOptions } from '../../src/sdk/worker.js';
import { withQuery } from '../../src/sdk/worker-config.js';
import { shapeOutput } from '../../src/sdk/worker-job.js';
import { startFakeWorkerServer, waitFor, type FakeWorkerServer } from './fake-worker-server.js';

const silent: WorkerLogger = { debug() {}, info() {}, warn() {}, error() {} };

let server: FakeWorkerServer;
let worker: WorkerHandle | undefined;

beforeEach(async () => {
  server = await startFakeWorkerServer();
});

afterEach(async () => {
  await worker?.stop();
  worker = undefined;
  await server.close();
});

function start(handler: Handler, options: Partial<WorkerOptions> = {}): WorkerHandle {
  worker = startWorker({
    handler,
    url: server.url,
    endpointId: 'ep',
    apiKey: 'worker-key',
    workerId: 'w1',
    pingIntervalMs: 100,
    logger: silent,
    env: {},
    ...options,
  });
  return worker;
}

function deferred(): { promise: Promise<void>; resolve: () => void } {
  let resolve = (): void => {};
  const promise = new Promise<void>((r) => (resolve = r));
  return { promise, resolve };
}

describe('worker protocol', () => {
  it('takes a job and posts its output the way runpod-python does', async () => {
    start((job) => ({ echo: job.input }));
    server.enqueue({ id: 'J1', input: { a: 1 } });
    const [done] = await waitFor(() => server.posts('job-done').length > 0 && server.posts('job-done'));
    expect(done).toEqual({ path: '/v2/ep/job-done/w1/J1', query: '?&isStream=false', body: { output: { echo: { a: 1 } } } });

    const take = server.requests.find((r) => r.path === '/v2/ep/job-take/w1');
    expect(take?.url).toBe('/v2/ep/job-take/w1?&job_in_progress=0');
    expect(take?.headers.authorization).toBe('worker-key');
    expect(server.requests.some((r) => r.url === '/v2/ep/job-stop/w1')).toBe(true);
    const post = server.requests.find((r) => r.path === '/v2/ep/job-done/w1/J1');
    expect(post?.headers['content-type']).toBe('application/json');
  });

  it('sends a thrown error as a string and undefined output as null', async () => {
    start((job) => {
      if (job.input === 'fail') throw new Error('boom');
      return undefined;
    });
    server.enqueue({ id: 'J1', input: 'fail' }, { id: 'J2', input: 'ok' });
    const posts = await waitFor(() => server.posts('job-done').length === 2 && server.posts('job-done'));
    expect(posts.map((p) => p.body)).toEqual([{ error: 'boom' }, { output: null }]);
  });

  it('posts progress as IN_PROGRESS job-done before the result', async () => {
    start(async (_job, ctx) => {
      void ctx.progress({ step: 1 });
      await ctx.progress({ step: 2 });
      return 'end';
    });
    server.enqueue({ id: 'J1', input: {} });
    const posts = await waitFor(() => server.posts('job-done').length === 3 && server.posts('job-done'));
    expect(posts.map((p) => p.body)).toEqual([
      { status: 'IN_PROGRESS', output: { step: 1 } },
      { status: 'IN_PROGRESS', output: { step: 2 } },
      { output: 'end' },
    ]);
    expect(posts.every((p) => p.query === '?&isStream=false')).toBe(true);
  });

  it('streams yielded chunks, then ends with isStream=true', async () => {
    start(async function* () {
      yield 'a';
      yield { b: 2 };
    });
    server.enqueue({ id: 'J1', input: {} });
    const [done] = await waitFor(() => server.posts('job-done').length > 0 && server.posts('job-done'));
    expect(server.posts('job-stream')).toEqual([
      { path: '/v2/ep/job-stream/w1/J1', query: '?&isStream=false', body: { output: 'a' } },
      { path: '/v2/ep/job-stream/w1/J1', query: '?&isStream=false', body: { output: { b: 2 } } },
    ]);
    // runpod-python's body when it does not aggregate
    expect(done).toEqual({ path: '/v2/ep/job-done/w1/J1', query: '?&isStream=true', body: { output: [] } });
  });

  it('aggregates chunks when asked, and fails a stream on a thrown error or a yielded {error}', async () => {
    start(async function* (job) {
      yield 1;
      if (job.input === 'throw') throw new Error('bad chunk');
      if (job.input === 'yield') yield { error: 'said no' };
      yield 2;
    }, { returnAggregateStream: true });
    server.enqueue({ id: 'J1', input: 'ok' }, { id: 'J2', input: 'throw' }, { id: 'J3', input: 'yield' });
    const posts = await waitFor(() => server.posts('job-done').length === 3 && server.posts('job-done'));
    expect(posts.map((p) => p.body)).toEqual([{ output: [1, 2] }, { error: 'bad chunk' }, { error: 'said no' }]);
  });

  it('takes batches of free slots with concurrency > 1 and runs them at once', async () => {
    const release = deferred();
    let running = 0;
    let peak = 0;
    server.enqueue(...['J1', 'J2', 'J3'].map((id) => ({ id, input: id })));
    start(async (job) => {
      peak = Math.max(peak, ++running);
      await release.promise;
      running--;
      return job.input;
    }, { concurrency: 3 });
    await waitFor(() => running === 3, 5000, 'three jobs running');
    release.resolve();
    await waitFor(() => server.posts('job-done').length === 3);
    expect(peak).toBe(3);
    const first = server.requests.find((r) => r.path.includes('/job-take'));
    expect(first?.url).toBe('/v2/ep/job-take-batch/w1?&batch_size=3&job_in_progress=0');
    expect(server.requests.some((r) => r.path.includes('/job-take/'))).toBe(false);
  });

  it('never polls for jobs while its only slot is busy', async () => {
    const release = deferred();
    start(async () => {
      await release.promise;
      return 1;
    });
    server.enqueue({ id: 'J1', input: {} });
    await waitFor(() => server.requests.some((r) => r.path.includes('/ping/') && r.url.includes('job_id=J1')));
    const takesBefore = server.requests.filter((r) => r.path.includes('/job-take/')).length;
    await waitFor(() => server.requests.filter((r) => r.path.includes('/ping/') && r.url.includes('job_id=J1')).length >= 3);
    expect(server.requests.filter((r) => r.path.includes('/job-take/')).length).toBe(takesBefore);
    release.resolve();
    await waitFor(() => server.posts('job-done').length === 1);
  });

  it('pings with the held job ids and its version', async () => {
    const release = deferred();
    start(async () => {
      await release.promise;
      return 1;
    }, { concurrency: 2 });
    server.enqueue({ id: 'J1', input: {} }, { id: 'J2', input: {} });
    const ping = await waitFor(() => server.requests.find((r) => r.path === '/v2/ep/ping/w1' && r.url.includes('J2')));
    expect(ping.url).toMatch(/^\/v2\/ep\/ping\/w1\?job_id=J1%2CJ2&runpod_version=\d+\.\d+\.\d+/);
    expect(ping.headers.authorization).toBe('worker-key');
    release.resolve();
    await waitFor(() => server.posts('job-done').length === 2);
    const after = server.requests.length;
    await waitFor(() => server.requests.slice(after).some((r) => r.path === '/v2/ep/ping/w1' && !r.url.includes('job_id')));
  });

  it('aborts a stopped job, posts nothing for it, and frees its slot', async () => {
    let aborted = false;
    start((job, ctx) => {
      if (job.id === 'J2') return 'second';
      ctx.signal.addEventListener('abort', () => (aborted = true));
      return new Promise(() => {}); // ignores the signal on purpose
    });
    server.enqueue({ id: 'J1', input: {} });
    await waitFor(() => server.requests.some((r) => r.url.includes('job_id=J1')));
    server.stopJobs('J1');
    await waitFor(() => aborted, 5000, 'abort');
    server.enqueue({ id: 'J2', input: {} });
    const posts = await waitFor(() => server.posts('job-done').length > 0 && server.posts('job-done'));
    expect(posts).toEqual([{ path: '/v2/ep/job-done/w1/J2', query: '?&isStream=false', body: { output: 'second' } }]);
  });

  it('retries job-done on 5xx, never on 4xx', async () => {
    server.doneStatuses = [503, 200, 400];
    start((job) => job.id);
    server.enqueue({ id: 'J1', input: {} });
    await waitFor(() => server.posts('job-done').length === 2, 5000);
    server.enqueue({ id: 'J2', input: {} });
    await waitFor(() => server.posts('job-done').some((p) => p.path.endsWith('/J2')));
    await worker?.stop();
    expect(server.posts('job-done').map((p) => p.path.split('/').pop())).toEqual(['J1', 'J1', 'J2']);
  });

  it('keeps retrying a result on 5xx and 429, past three tries, while the job can still be accepted, and holds the job meanwhile', async () => {
    server.doneStatuses = [503, 429, 502, 200];
    start((job) => job.id);
    server.enqueue({ id: 'J1', input: {}, policy: { executionTimeout: 600_000 } });
    await waitFor(() => server.posts('job-done').length === 4, 15_000, 'four posts of the result');
    // While it retried, its pings still named the job (the gateway keeps it IN_PROGRESS under this worker).
    const retrying = server.requests.filter((r) => r.path.includes('/ping/') && r.at > server.requests.find((q) => q.path.includes('/job-done/'))!.at);
    expect(retrying.some((r) => r.url.includes('job_id=J1'))).toBe(true);
    await worker?.stop();
    expect(server.posts('job-done').map((p) => p.body)).toEqual(Array.from({ length: 4 }, () => ({ output: 'J1' })));
  }, 20_000);

  it('gives a result up once the job\'s execution timeout has passed since it was taken (the server would refuse it)', async () => {
    server.doneStatuses = Array.from({ length: 50 }, () => 503);
    const logged: string[] = [];
    const logger: WorkerLogger = { ...silent, error: (_fields, msg) => void logged.push(String(msg)) };
    start((job) => job.id, { logger });
    server.enqueue({ id: 'J1', input: {}, policy: { executionTimeout: 1_200 } });
    await waitFor(() => logged.includes('job result rejected'), 10_000, 'the result to be given up');
    const posts = server.posts('job-done').length;
    // 0.5 s doubling (±25%): the tries at about 0, 0.5 and 1.5 s fit in 1.2 s, no more.
    expect(posts).toBeGreaterThanOrEqual(2);
    expect(posts).toBeLessThanOrEqual(3);
  }, 20_000);

  it('fails a job whose output cannot be sent: not JSON, or over the server limit', async () => {
    server.doneStatuses = [413];
    start((job) => (job.input === 'big' ? { big: 'x'.repeat(10) } : { n: 1n }));
    server.enqueue({ id: 'J1', input: 'big' });
    await waitFor(() => server.posts('job-done').length === 2);
    server.enqueue({ id: 'J2', input: 'bigint' });
    const posts = await waitFor(() => server.posts('job-done').length === 3 && server.posts('job-done'));
    expect(posts.map((p) => p.body)).toEqual([
      { output: { big: 'x'.repeat(10) } },
      { error: expect.stringMatching(/over the server's limit/) as unknown },
      { error: expect.stringMatching(/cannot be sent as JSON/) as unknown },
    ]);
  });

  it('stop() lets the running job finish and post, then resolves done', async () => {
    const release = deferred();
    const w = start(async () => {
      await release.promise;
      return 'finished';
    });
    server.enqueue({ id: 'J1', input: {} });
    await waitFor(() => server.requests.some((r) => r.url.includes('job_id=J1')));
    const stopping = w.stop();
    let stopped = false;
    void stopping.then(() => (stopped = true));
    server.enqueue({ id: 'J2', input: {} });
    release.resolve();
    await w.done;
    expect(stopped).toBe(true);
    expect(server.posts('job-done').map((p) => p.body)).toEqual([{ output: 'finished' }]);
  });

  it('stop() runs the jobs a job-take already in flight brings back, then resolves done', async () => {
    // The take is held until a job comes, as a gateway does: stop() must not cut its answer off.
    await server.close();
    server = await startFakeWorkerServer({ holdMs: 60_000 });
    const w = start(async (job) => ({ ran: job.id }));
    await waitFor(() => server.requests.some((r) => r.path.includes('/job-take/')));
    const stopping = w.stop();
    server.enqueue({ id: 'J1', input: {} });
    await stopping;
    await w.done;
    expect(server.posts('job-done').map((p) => p.body)).toEqual([{ output: { ran: 'J1' } }]);
  });

  it('refresh sets stopPod and stops the worker by itself', async () => {
    const w = start((job, ctx) => {
      if (job.input === 'ctx') ctx.refresh();
      return job.input === 'flag' ? { text: 'x', refresh_worker: true } : 'r';
    });
    server.enqueue({ id: 'J1', input: 'ctx' });
    await w.done;
    expect(server.posts('job-done').map((p) => p.body)).toEqual([{ output: 'r', stopPod: true }]);
  });

  it('backs off while the server refuses job-take', async () => {
    server.takeStatus = 503;
    start(() => 1);
    const takes = (): number[] => server.requests.filter((r) => r.path.includes('/job-take/')).map((r) => r.at);
    const at = await waitFor(() => (takes().length >= 3 ? takes() : undefined), 10_000, 'three refused takes');
    // 0.5 s doubling, ±25% jitter: the pauses are at least 375 ms, then 750 ms (lower bounds only).
    expect(at[1]! - at[0]!).toBeGreaterThanOrEqual(375);
    expect(at[2]! - at[1]!).toBeGreaterThanOrEqual(750);
  });
});

describe('resolveWorkerConfig', () => {
  it('reads the RUNPOD_* templates Gantry hands its workers', () => {
    const base = 'http://gw:8080/v2/ep';
    const config = resolveWorkerConfig({}, {
      RUNPOD_WEBHOOK_GET_JOB: `${base}/job-take/$ID?`,
      RUNPOD_WEBHOOK_POST_OUTPUT: `${base}/job-done/$RUNPOD_POD_ID/$ID?`,
      RUNPOD_WEBHOOK_POST_STREAM: `${base}/job-stream/$RUNPOD_POD_ID/$ID?`,
      RUNPOD_WEBHOOK_PING: `${base}/ping/$RUNPOD_POD_ID`,
      RUNPOD_POD_ID: 'pod-7',
      RUNPOD_AI_API_KEY: 'k',
      RUNPOD_PING_INTERVAL: '2500',
    });
    expect(config).toEqual({
      workerId: 'pod-7',
      apiKey: 'k',
      jobTakeUrl: `${base}/job-take/pod-7?`,
      jobTakeBatchUrl: `${base}/job-take-batch/pod-7?`,
      jobStopUrl: `${base}/job-stop/pod-7?`,
      jobDoneTemplate: `${base}/job-done/pod-7/$ID?`,
      jobStreamTemplate: `${base}/job-stream/pod-7/$ID?`,
      pingUrl: `${base}/ping/pod-7`,
      pingIntervalMs: 2500,
    });
  });

  it('builds the same URLs from url and endpointId, and lets them override the environment', () => {
    const config = resolveWorkerConfig(
      { url: 'http://h:1/v2/', endpointId: 'ep', workerId: 'w', apiKey: 'k' },
      { RUNPOD_WEBHOOK_GET_JOB: 'http://other/v2/x/job-take/$ID?', RUNPOD_WEBHOOK_POST_OUTPUT: 'http://other/' },
    );
    expect(config.jobTakeUrl).toBe('http://h:1/v2/ep/job-take/w?');
    expect(config.jobDoneTemplate).toBe('http://h:1/v2/ep/job-done/w/$ID?');
    expect(config.pingUrl).toBe('http://h:1/v2/ep/ping/w');
    expect(config.pingIntervalMs).toBe(10_000);
  });

  it('refuses to start without a server or with a bad interval', () => {
    expect(() => resolveWorkerConfig({}, {})).toThrow(/RUNPOD_WEBHOOK_GET_JOB/);
    expect(() => resolveWorkerConfig({ url: 'http://h' }, {})).toThrow(/together/);
    expect(() => resolveWorkerConfig({ url: 'http://h', endpointId: 'e' }, { RUNPOD_PING_INTERVAL: '10s' })).toThrow(/milliseconds/);
  });
});

describe('withQuery and shapeOutput', () => {
  it('appends queries as runpod-python does', () => {
    expect(withQuery('http://h/a?', { x: '1', y: undefined, z: 'a,b' })).toBe('http://h/a?&x=1&z=a%2Cb');
    expect(withQuery('http://h/a', { x: '1' })).toBe('http://h/a?x=1');
  });

  it('reads error and refresh_worker out of returned objects', () => {
    expect(shapeOutput({ error: 'bad', detail: 1 })).toEqual({ error: 'bad', output: { detail: 1 } });
    expect(shapeOutput({ error: 'bad' })).toEqual({ error: 'bad' });
    expect(shapeOutput({ text: 'hi', refresh_worker: true })).toEqual({ output: { text: 'hi' }, stopPod: true });
    expect(shapeOutput({})).toEqual({ output: {} });
    expect(shapeOutput([1])).toEqual({ output: [1] });
    expect(shapeOutput(undefined)).toEqual({ output: null });
  });
});
