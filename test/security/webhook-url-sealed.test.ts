// Issue 22 item 7: a webhook URL may carry a token (`?token=…`), so it is stored sealed like
// s3Config (AES-256-GCM with the gateway's secret key) and opened only to call it and to hand
// the job to its worker. A job stored before (plain URL) is still called. The token is in no
// client answer and not on the console's job page. Both stores, over real HTTP.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { initialJob } from '../../src/jobs/transitions.js';
import type { JobStore } from '../../src/store/store.js';
import { eventually, startTestGantry, type TestBackend, type TestGantry } from '../helpers/gantry.js';
import { call, clientFor, startReceiver, uniqueId, workerFor, type Receiver } from '../http/http-helpers.js';

describe.each(['sqlite', 'postgres'] as const)('webhook URLs are stored sealed (%s)', (backend: TestBackend) => {
  let t: TestGantry;
  let store: JobStore;
  let runKey: string;
  let workerKey: string;
  let hook: Receiver;
  beforeAll(async () => {
    t = await startTestGantry({ webhookRetryMs: 50, jobTakeWaitMs: 500, outboundAllow: ['127.0.0.1'] }, { backend });
    // The store itself, as the gateway's usage reader (the way test/security/outbound-policy.test.ts reaches it).
    store = t.gantry.gateway.http.usage as unknown as JobStore;
    runKey = await t.createKey(['run']);
    workerKey = await t.createKey(['worker']);
    hook = await startReceiver();
  });
  afterAll(async () => {
    await hook?.close();
    await t?.close();
  });

  it('stores the URL sealed, hands it to the worker and calls it; no answer shows its token', async () => {
    const ep = uniqueId('sealed');
    await t.createEndpoint(ep);
    const token = `tok-${uniqueId('s')}`;
    const webhook = `${hook.url}?token=${token}`;
    const c = clientFor(t, ep, runKey);
    const w = workerFor(t, ep, workerKey);
    const submitted = await call(t.url, 'POST', `/v2/${ep}/run`, { key: runKey, body: { input: { n: 1 }, webhook } });
    expect(submitted.status).toBe(200);
    expect(submitted.text).not.toContain(token);
    const id = submitted.json.id as string;

    const stored = await store.getJob(id);
    expect(stored?.webhook).toMatch(/^v1:/);
    expect(stored?.webhook).not.toContain(token);
    expect(stored?.webhook).not.toContain('127.0.0.1');

    const status = await call(t.url, 'GET', `/v2/${ep}/status/${id}`, { key: runKey });
    expect(status.status).toBe(200);
    expect(status.text).not.toContain(token);

    // The worker gets the URL as the client gave it (RunPod's job-take hands it over).
    const taken = await w.takeJob();
    expect(taken).toMatchObject({ id, webhook });
    expect((await w.done(id, { output: 'done' })).status).toBe(200);
    const [delivery] = await eventually(async () => (hook.calls.some((h) => h.body.id === id) ? hook.calls.filter((h) => h.body.id === id) : undefined), 30_000, 'the webhook call');
    expect(delivery!.path).toBe(`/hook?token=${token}`);
    expect(delivery!.body).toMatchObject({ id, status: 'COMPLETED', output: 'done' });

    // The console's job page names the receiver's origin only.
    const session = await fetch(`${t.url}/console/api/session`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ key: t.adminKey }) });
    const cookie = (session.headers.get('set-cookie') ?? '').split(';')[0]!;
    const page = await fetch(`${t.url}/console/api/jobs/${ep}/${id}`, { headers: { cookie } });
    const pageText = await page.text();
    expect(page.status).toBe(200);
    expect(pageText).not.toContain(token);
    expect(JSON.parse(pageText)).toMatchObject({ webhook: { target: new URL(hook.url).origin, outcome: 'delivered' } });
    expect((await c.status(id)).json).toMatchObject({ status: 'COMPLETED' });
  });

  it('still calls the plain URL of a job stored before URLs were sealed', async () => {
    const ep = uniqueId('plain');
    await t.createEndpoint(ep);
    const webhook = `${hook.url}?token=old-row`;
    const job = initialJob({
      id: uniqueId('job'), endpointId: ep, inputBytes: 7, webhook, s3Config: null, executionTimeoutMs: 60_000,
      lowPriority: false, ttlMs: 60_000, retentionMs: 600_000, maxAttempts: 1, sync: false, keyId: null, now: Date.now(),
    });
    await store.insertJob({ job: job, inputJson: '{"n":2}' });
    const w = workerFor(t, ep, workerKey);
    expect(await w.takeJob()).toMatchObject({ id: job.id, webhook });
    expect((await w.done(job.id, { output: 'old' })).status).toBe(200);
    const [delivery] = await eventually(async () => (hook.calls.some((h) => h.body.id === job.id) ? hook.calls.filter((h) => h.body.id === job.id) : undefined), 30_000, 'the webhook call');
    expect(delivery!.path).toBe('/hook?token=old-row');
  });
});
