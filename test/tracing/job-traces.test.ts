// Traces (issue 27.2, docs/observability.md) end to end: a gateway with the OTEL_* variables
// pointing at a real OTLP/HTTP receiver (otlp-receiver.ts decodes the protocol as a collector
// does: protobuf with the protocol's .proto files, or OTLP/JSON), real worker processes, both
// stores and both encodings. A client submits with its own `traceparent`; the first worker
// (the runpod-python stand-in) is killed holding the job and presumed lost, the job is
// requeued, and a second worker (the worker SDK, as `gantry worker`) finishes it; the webhook
// is delivered. The spans of that job must form one trace under the client's span.
import { randomBytes } from 'node:crypto';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createClient } from '../../src/sdk/client.js';
import { createManualClock } from '../helpers/clock.js';
import { eventually, startTestGantry, type TestGantry } from '../helpers/gantry.js';
import { spawnOwned } from '../helpers/processes.js';
import { call, uniqueId, type Json } from '../http/http-helpers.js';
import { PyWorker } from '../limits/py-worker.js';
import { startOtlpReceiver, type OtlpReceiver, type ReceivedSpan } from './otlp-receiver.js';

const MAIN = fileURLToPath(new URL('../../dist/src/cli/main.js', import.meta.url));
const TRACE_WORKER = fileURLToPath(new URL('./fixtures/trace-worker.mjs', import.meta.url));
const KIND = { internal: 1, client: 3, producer: 4, consumer: 5 };
const ERROR = 2;

describe.each([
  ['sqlite', 'http/protobuf'],
  ['postgres', 'http/json'],
] as const)('job traces over OTLP/HTTP (%s store, %s)', (backend, protocol) => {
  const clock = createManualClock();
  let receiver: OtlpReceiver;
  let t: TestGantry;
  let hooks: Server;
  const delivered: { traceparent: string | undefined }[] = [];
  const stops: (() => Promise<void>)[] = [];

  beforeAll(async () => {
    receiver = await startOtlpReceiver();
    hooks = createServer((req, res) => {
      delivered.push({ traceparent: req.headers.traceparent as string | undefined });
      req.resume();
      req.on('end', () => res.writeHead(200).end());
    });
    await new Promise<void>((resolve) => hooks.listen(0, '127.0.0.1', resolve));
    const env = { OTEL_EXPORTER_OTLP_ENDPOINT: receiver.url, OTEL_EXPORTER_OTLP_TRACES_PROTOCOL: protocol, OTEL_SERVICE_NAME: 'gantry-test', OTEL_BSP_SCHEDULE_DELAY: '50' };
    t = await startTestGantry({ jobTakeWaitMs: 1_000, webhookRetryMs: 0, outboundAllow: ['127.0.0.1'] }, { backend, clock, env });
  });
  afterAll(async () => {
    for (const stop of stops) await stop();
    await t?.close();
    await receiver?.close();
    hooks?.close();
  });

  /** The SDK worker of fixtures/trace-worker.mjs as a process of its own. */
  function sdkWorker(ep: string, workerId: string): void {
    const proc = spawnOwned(process.execPath, [MAIN, 'worker', TRACE_WORKER], { env: { ...process.env, ...t.workerEnv(ep, workerId), LOG_LEVEL: 'warn' }, stdio: ['ignore', 'ignore', 'inherit'] });
    const exited = new Promise<void>((resolve) => proc.once('exit', () => resolve()));
    stops.push(async () => {
      if (proc.exitCode === null && proc.signalCode === null) proc.kill('SIGTERM');
      await exited;
    });
  }

  it("a job requeued once is one trace under the client's span: submit, two waits, two runs (the lost one failed), the result, the webhook", async () => {
    const ep = uniqueId('tr');
    await t.createEndpoint(ep);
    const runKey = await t.createKey(['run']);
    const clientTrace = randomBytes(16).toString('hex');
    const clientSpan = randomBytes(8).toString('hex');
    const hookUrl = `http://127.0.0.1:${(hooks.address() as AddressInfo).port}/done`;
    const submitted = await call(t.url, 'POST', `/v2/${ep}/run`, { key: runKey, body: { input: { seconds: 600 }, webhook: hookUrl }, headers: { traceparent: `00-${clientTrace}-${clientSpan}-01` } });
    expect(submitted.status).toBe(200);
    const id = submitted.json.id as string;
    const status = async (): Promise<Json> => (await call(t.url, 'GET', `/v2/${ep}/status/${id}`, { key: runKey })).json;

    // The first worker takes it and is killed; past GANTRY_WORKER_LOST_MS the reaper requeues it.
    const first = new PyWorker(t.workerEnv(ep, 'w-lost'), ['--handler', 'sleep']);
    stops.push(() => first.kill());
    await first.waitFor('taken', id);
    await first.kill();
    clock.advance(40_000);
    await t.gantry.gateway.reaper.runOnce();
    expect(await status()).toMatchObject({ status: 'IN_QUEUE', attempts: 1 });
    clock.advance(2_000);

    // The second (the worker SDK) finishes it, answering with the trace context it was handed.
    sdkWorker(ep, 'w-done');
    const done = await eventually(async () => {
      const job = await status();
      return job.status === 'COMPLETED' ? job : undefined;
    }, 30_000, 'the second worker to complete the job');
    expect(done).toMatchObject({ attempts: 2, workerId: 'w-done' });
    const handed = (done.output as Json).traceparent as string;
    expect((done.output as Json).jobTraceparent).toBe(handed);

    await eventually(async () => (delivered.length > 0 ? true : undefined), 20_000, 'the webhook delivery');
    const names = ['job.submit', 'job.queued', 'job.queued', 'job.run', 'job.run', 'job.result', 'job.webhook'];
    const spans = await eventually(async () => {
      const mine = receiver.spans.filter((s) => s.attributes['gantry.job.id'] === id);
      return mine.length >= names.length ? mine : undefined;
    }, 20_000, 'the spans of the job at the receiver');
    expect(receiver.contentTypes).toContain(protocol === 'http/json' ? 'application/json' : 'application/x-protobuf');
    expect(spans.map((s) => s.name).sort()).toEqual([...names].sort());

    // One trace, the client's; the submit span a child of the client's span, the rest children of the submit span.
    for (const span of spans) expect(span.traceId).toBe(clientTrace);
    const one = (name: string): ReceivedSpan => spans.find((s) => s.name === name)!;
    const submit = one('job.submit');
    expect(submit).toMatchObject({ parentSpanId: clientSpan, kind: KIND.producer });
    expect(submit.resource['service.name']).toBe('gantry-test');
    for (const span of spans.filter((s) => s !== submit)) expect(span.parentSpanId).toBe(submit.spanId);

    // Two runs: the lost one (worker w-lost, attempt 1, an error), the completed one (w-done, attempt 2).
    const runs = spans.filter((s) => s.name === 'job.run').sort((a, b) => Number(a.attributes['gantry.job.run']) - Number(b.attributes['gantry.job.run']));
    expect(runs.map((r) => [r.attributes['gantry.worker.id'], r.attributes['gantry.job.attempt'], r.attributes['gantry.job.outcome'], r.kind])).toEqual([
      ['w-lost', 1, 'worker-lost', KIND.consumer],
      ['w-done', 2, 'completed', KIND.consumer],
    ]);
    expect(runs[0]!.statusCode).toBe(ERROR);
    expect(runs[0]!.endMs - runs[0]!.startMs).toBe(40_000);
    // The worker was handed its run's span as the parent for its own spans.
    expect(handed).toBe(`00-${clientTrace}-${runs[1]!.spanId}-01`);

    // Each wait ends where its run begins: the first from the submit, the second from the requeue.
    const waits = spans.filter((s) => s.name === 'job.queued').sort((a, b) => a.startMs - b.startMs);
    expect(waits.map((w) => w.endMs)).toEqual(runs.map((r) => r.startMs));
    expect(waits[1]!.startMs).toBe(runs[0]!.endMs);
    expect(waits[1]!.endMs - waits[1]!.startMs).toBe(2_000);

    expect(one('job.result').attributes).toMatchObject({ 'gantry.job.status': 'COMPLETED', 'gantry.job.attempts': 2 });
    // The console's job page names the trace, to look it up in the tracing backend.
    const session = await fetch(`${t.url}/console/api/session`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ key: t.adminKey }) });
    const cookie = (session.headers.get('set-cookie') ?? '').split(';')[0]!;
    const page = (await (await fetch(`${t.url}/console/api/jobs/${ep}/${id}`, { headers: { cookie } })).json()) as Json;
    expect(page.trace).toEqual({ traceId: clientTrace, sampled: true });
    // The webhook's receiver was handed the delivery span's own context.
    const webhook = one('job.webhook');
    expect(webhook).toMatchObject({ kind: KIND.client, attributes: { 'http.response.status_code': 200 } });
    expect(delivered[0]!.traceparent).toBe(`00-${clientTrace}-${webhook.spanId}-01`);
  });

  it('a preempted run gets a job.run span of its own (outcome preempted, not an error), and the wait after it starts at the preemption', async () => {
    const ep = uniqueId('tr');
    await t.createEndpoint(ep);
    const runKey = await t.createKey(['run']);
    const clientTrace = randomBytes(16).toString('hex');
    const submitted = await call(t.url, 'POST', `/v2/${ep}/run`, { key: runKey, body: { input: { seconds: 600 } }, headers: { traceparent: `00-${clientTrace}-${randomBytes(8).toString('hex')}-01` } });
    const id = submitted.json.id as string;
    const status = async (): Promise<Json> => (await call(t.url, 'GET', `/v2/${ep}/status/${id}`, { key: runKey })).json;

    // The first worker takes it; 5 s later the allocator's transition takes it back (the autoscaler's
    // call, here made directly: which worker the allocator picks is not what this test is about).
    const first = new PyWorker(t.workerEnv(ep, 'w-pre'), ['--handler', 'sleep']);
    stops.push(() => first.kill());
    await first.waitFor('taken', id);
    clock.advance(5_000);
    const preempted = await t.gantry.gateway.transitions.preempt('w-pre');
    expect(preempted.map((j) => j.id)).toEqual([id]);
    await first.kill();
    expect(await status()).toMatchObject({ status: 'IN_QUEUE', preemptions: 1 });
    clock.advance(3_000);

    sdkWorker(ep, 'w-after');
    const done = await eventually(async () => {
      const job = await status();
      return job.status === 'COMPLETED' ? job : undefined;
    }, 30_000, 'the second worker to complete the preempted job');
    expect(done).toMatchObject({ attempts: 1, workerId: 'w-after' });

    const names = ['job.submit', 'job.queued', 'job.queued', 'job.run', 'job.run', 'job.result'];
    const spans = await eventually(async () => {
      const mine = receiver.spans.filter((s) => s.attributes['gantry.job.id'] === id);
      return mine.length >= names.length ? mine : undefined;
    }, 20_000, 'the spans of the preempted job');
    expect(spans.map((s) => s.name).sort()).toEqual([...names].sort());
    const submit = spans.find((s) => s.name === 'job.submit')!;
    for (const span of spans) expect(span.traceId).toBe(clientTrace);
    for (const span of spans.filter((s) => s !== submit)) expect(span.parentSpanId).toBe(submit.spanId);
    const runs = spans.filter((s) => s.name === 'job.run').sort((a, b) => Number(a.attributes['gantry.job.run']) - Number(b.attributes['gantry.job.run']));
    expect(runs.map((r) => [r.attributes['gantry.worker.id'], r.attributes['gantry.job.run'], r.attributes['gantry.job.attempt'], r.attributes['gantry.job.outcome']])).toEqual([
      ['w-pre', 1, 1, 'preempted'],
      ['w-after', 2, 1, 'completed'],
    ]);
    expect(runs[0]!.statusCode).not.toBe(ERROR);
    expect(runs[0]!.attributes['gantry.job.run_start_unknown']).toBeUndefined();
    expect(runs[0]!.endMs - runs[0]!.startMs).toBe(5_000);
    expect(runs[0]!.spanId).not.toBe(runs[1]!.spanId);
    expect((done.output as Json).traceparent).toBe(`00-${clientTrace}-${runs[1]!.spanId}-01`);
    // The trace has no hole: the second wait runs from the preemption to the second run.
    const waits = spans.filter((s) => s.name === 'job.queued').sort((a, b) => a.startMs - b.startMs);
    expect(waits.map((w) => w.endMs)).toEqual(runs.map((r) => r.startMs));
    expect(waits[1]!.startMs).toBe(runs[0]!.endMs);
    expect(waits[1]!.endMs - waits[1]!.startMs).toBe(3_000);
  });

  it('jobs cancelled by purge-queue end with their last wait and their result', async () => {
    const ep = uniqueId('tr');
    await t.createEndpoint(ep);
    const runKey = await t.createKey(['run']);
    const clientTrace = randomBytes(16).toString('hex');
    const clientSpan = randomBytes(8).toString('hex');
    const ids: string[] = [];
    for (let i = 0; i < 3; i++) {
      const headers = i === 0 ? { traceparent: `00-${clientTrace}-${clientSpan}-01` } : undefined;
      ids.push((await call(t.url, 'POST', `/v2/${ep}/run`, { key: runKey, body: { input: { i } }, ...(headers ? { headers } : {}) })).json.id as string);
    }
    clock.advance(4_000);
    expect((await call(t.url, 'POST', `/v2/${ep}/purge-queue`, { key: runKey })).json).toMatchObject({ removed: 3 });
    const spans = await eventually(async () => {
      const mine = receiver.spans.filter((s) => ids.includes(String(s.attributes['gantry.job.id'])));
      return mine.length >= 9 ? mine : undefined;
    }, 20_000, 'the submit, wait and result spans of the three purged jobs');
    for (const id of ids) {
      const own = spans.filter((s) => s.attributes['gantry.job.id'] === id);
      expect(own.map((s) => s.name).sort()).toEqual(['job.queued', 'job.result', 'job.submit']);
      const submit = own.find((s) => s.name === 'job.submit')!;
      const wait = own.find((s) => s.name === 'job.queued')!;
      const result = own.find((s) => s.name === 'job.result')!;
      for (const span of [wait, result]) expect(span).toMatchObject({ traceId: submit.traceId, parentSpanId: submit.spanId });
      expect(wait.attributes).toMatchObject({ 'gantry.job.outcome': 'cancelled', 'gantry.job.purged': true, 'gantry.job.run': 1, 'gantry.endpoint.id': ep });
      expect(wait.endMs - wait.startMs).toBe(4_000);
      expect(result.attributes).toMatchObject({ 'gantry.job.status': 'CANCELLED', 'gantry.job.purged': true });
    }
    expect(spans.find((s) => s.name === 'job.submit' && s.attributes['gantry.job.id'] === ids[0])).toMatchObject({ traceId: clientTrace, parentSpanId: clientSpan });
  });

  it("the client SDK's traceparent (per client and per call) and the OpenAI routes' header are continued like /run's", async () => {
    const ep = uniqueId('tr');
    await t.createEndpoint(ep);
    const runKey = await t.createKey(['run']);
    const ctx = () => ({ trace: randomBytes(16).toString('hex'), span: randomBytes(8).toString('hex') });
    const [fromHook, fromCall, fromOpenAi] = [ctx(), ctx(), ctx()];
    const client = createClient({ url: t.url, apiKey: runKey, traceparent: () => `00-${fromHook.trace}-${fromHook.span}-01` });
    const hooked = (await client.run(ep, { input: { n: 1 } })).id;
    const given = (await client.run(ep, { input: { n: 2 } }, { traceparent: `00-${fromCall.trace}-${fromCall.span}-01` })).id;

    // The OpenAI route waits for its job: a worker answers with the run context it was handed.
    sdkWorker(ep, 'w-openai');
    const chat = await call(t.url, 'POST', `/v2/${ep}/openai/v1/chat/completions`, { key: runKey, body: { model: 'm', messages: [{ role: 'user', content: 'hi' }] }, headers: { traceparent: `00-${fromOpenAi.trace}-${fromOpenAi.span}-01` } });
    expect(chat.status).toBe(200);
    const chatJob = chat.headers.get('x-request-id')!;

    const submits = await eventually(async () => {
      const found = receiver.spans.filter((s) => s.name === 'job.submit' && [hooked, given, chatJob].includes(String(s.attributes['gantry.job.id'])));
      return found.length === 3 ? found : undefined;
    }, 20_000, 'the three submit spans');
    const submitOf = (id: string) => submits.find((s) => s.attributes['gantry.job.id'] === id)!;
    expect(submitOf(hooked)).toMatchObject({ traceId: fromHook.trace, parentSpanId: fromHook.span });
    expect(submitOf(given)).toMatchObject({ traceId: fromCall.trace, parentSpanId: fromCall.span });
    expect(submitOf(chatJob)).toMatchObject({ traceId: fromOpenAi.trace, parentSpanId: fromOpenAi.span });
    // The OpenAI job's worker was handed its run span in the client's trace.
    const run = await eventually(async () => receiver.spans.find((s) => s.name === 'job.run' && s.attributes['gantry.job.id'] === chatJob), 20_000, 'the run span of the OpenAI job');
    expect(chat.json.traceparent).toBe(`00-${fromOpenAi.trace}-${run.spanId}-01`);
  });

  it('a job submitted without a traceparent starts a trace of its own, and an invalid one is ignored', async () => {
    const ep = uniqueId('tr');
    await t.createEndpoint(ep);
    const runKey = await t.createKey(['run']);
    const plain = (await call(t.url, 'POST', `/v2/${ep}/run`, { key: runKey, body: { input: {} } })).json.id as string;
    const bad = (await call(t.url, 'POST', `/v2/${ep}/run`, { key: runKey, body: { input: {} }, headers: { traceparent: `00-${'0'.repeat(32)}-${'1'.repeat(16)}-01` } })).json.id as string;
    const submits = await eventually(async () => {
      const found = receiver.spans.filter((s) => s.name === 'job.submit' && (s.attributes['gantry.job.id'] === plain || s.attributes['gantry.job.id'] === bad));
      return found.length === 2 ? found : undefined;
    }, 20_000, 'the two submit spans');
    for (const span of submits) expect(span).toMatchObject({ parentSpanId: '', traceId: expect.stringMatching(/^[0-9a-f]{32}$/) });
    expect(submits[0]!.traceId).not.toBe(submits[1]!.traceId);
    // Cancelled while waiting: the wait is the job's last span, then its result.
    expect((await call(t.url, 'POST', `/v2/${ep}/cancel/${plain}`, { key: runKey })).status).toBe(200);
    const ends = await eventually(async () => {
      const found = receiver.spans.filter((s) => s.attributes['gantry.job.id'] === plain && (s.name === 'job.queued' || s.name === 'job.result'));
      return found.length === 2 ? found : undefined;
    }, 20_000, 'the wait and result spans of the cancelled job');
    const plainSubmit = submits.find((s) => s.attributes['gantry.job.id'] === plain)!;
    for (const span of ends) expect(span).toMatchObject({ traceId: plainSubmit.traceId, parentSpanId: plainSubmit.spanId });
    expect(ends.find((s) => s.name === 'job.queued')?.attributes).toMatchObject({ 'gantry.job.outcome': 'cancelled', 'gantry.job.run': 1 });
    expect(ends.find((s) => s.name === 'job.result')?.attributes).toMatchObject({ 'gantry.job.status': 'CANCELLED' });
    await call(t.url, 'POST', `/v2/${ep}/purge-queue`, { key: runKey });
  });
});

describe('job traces across two gateways on one PostgreSQL database', () => {
  let receiver: OtlpReceiver;
  let a: TestGantry;
  let b: TestGantry;
  let stop: (() => Promise<void>) | undefined;

  beforeAll(async () => {
    receiver = await startOtlpReceiver();
    const env = { OTEL_EXPORTER_OTLP_ENDPOINT: receiver.url, OTEL_BSP_SCHEDULE_DELAY: '50' };
    a = await startTestGantry({ jobTakeWaitMs: 1_000 }, { backend: 'postgres', env });
    b = await startTestGantry({ jobTakeWaitMs: 1_000 }, { backend: 'postgres', databaseUrl: a.databaseUrl!, env });
  });
  afterAll(async () => {
    await stop?.();
    await b?.close();
    await a?.close();
    await receiver?.close();
  });

  it('a job submitted on one gateway and run through the other stays one trace: the context comes from the job row', async () => {
    const ep = uniqueId('tr');
    await a.createEndpoint(ep);
    const runKey = await a.createKey(['run']);
    const clientTrace = randomBytes(16).toString('hex');
    const clientSpan = randomBytes(8).toString('hex');
    const submitted = await call(a.url, 'POST', `/v2/${ep}/run`, { key: runKey, body: { input: { n: 1 } }, headers: { traceparent: `00-${clientTrace}-${clientSpan}-01` } });
    const id = submitted.json.id as string;
    // The worker talks to gateway b only: b hands the job out and takes its result.
    const proc = spawnOwned(process.execPath, [MAIN, 'worker', TRACE_WORKER], { env: { ...process.env, ...b.workerEnv(ep, 'w-on-b'), LOG_LEVEL: 'warn' }, stdio: ['ignore', 'ignore', 'inherit'] });
    const exited = new Promise<void>((resolve) => proc.once('exit', () => resolve()));
    stop = async () => {
      if (proc.exitCode === null && proc.signalCode === null) proc.kill('SIGTERM');
      await exited;
    };
    const done = await eventually(async () => {
      const job = (await call(a.url, 'GET', `/v2/${ep}/status/${id}`, { key: runKey })).json;
      return job.status === 'COMPLETED' ? job : undefined;
    }, 30_000, 'the job to complete through gateway b');
    const spans = await eventually(async () => {
      const mine = receiver.spans.filter((s) => s.attributes['gantry.job.id'] === id);
      return mine.length >= 4 ? mine : undefined;
    }, 20_000, 'the spans of the job');
    const byName = new Map(spans.map((s) => [s.name, s]));
    const submit = byName.get('job.submit')!;
    const run = byName.get('job.run')!;
    expect(submit.parentSpanId).toBe(clientSpan);
    for (const span of spans) expect(span.traceId).toBe(clientTrace);
    for (const name of ['job.queued', 'job.run', 'job.result']) expect(byName.get(name)?.parentSpanId).toBe(submit.spanId);
    // Written by two gateways: the submit by a, the wait, run and result by b.
    const instance = (s: ReceivedSpan) => s.resource['service.instance.id'];
    expect(instance(run)).toBe(instance(byName.get('job.queued')!));
    expect(instance(run)).not.toBe(instance(submit));
    expect((done.output as Json).traceparent).toBe(`00-${clientTrace}-${run.spanId}-01`);
  });
});
