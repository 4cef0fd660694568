// Issue 9, item 9: outbound calls to client-named addresses. Webhooks and a job's own
// s3Config.endpointUrl may not reach loopback, private, link-local (metadata), unspecified,
// IPv6 unique-local or IPv4-mapped addresses unless GANTRY_OUTBOUND_ALLOW allows them: a
// webhook is refused at submit (400 naming webhook) and again at send time; no redirect is
// followed; a remote answer never reaches a job's error.
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/config/config.js';
import { initialJob } from '../../src/jobs/transitions.js';
import { checkOutboundUrl, createOutboundFetch, createOutboundPolicy } from '../../src/security/outbound.js';
import type { JobStore } from '../../src/store/store.js';
import { eventually, startTestGantry, type TestBackend, type TestGantry } from '../helpers/gantry.js';
import { call, uniqueId } from '../http/http-helpers.js';

/** A local HTTP server that records requests; `answer` decides the reply. */
async function receiver(answer: (req: IncomingMessage, res: ServerResponse) => void = (_q, r) => r.end('ok')) {
  const hits: string[] = [];
  const server: Server = createServer((req, res) => {
    hits.push(req.url ?? '');
    req.resume();
    answer(req, res);
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  return { url, hits, close: () => new Promise<void>((r) => server.close(() => r())) };
}

const REFUSED = [
  'http://127.0.0.1:9/hook',
  'http://127.9.9.9/hook',
  'http://localhost:9/hook',
  'http://10.1.2.3/hook',
  'http://172.16.0.1/hook',
  'http://192.168.1.1/hook',
  'http://100.64.0.1/hook',
  'http://169.254.169.254/latest/meta-data/',
  'http://0.0.0.0:9/hook',
  'http://[::1]:9/hook',
  'http://[::]:9/hook',
  'http://[fd00::1]/hook',
  'http://[fe80::1]/hook',
  'http://[::ffff:127.0.0.1]:9/hook',
  'http://[::ffff:a9fe:a9fe]/hook',
  'http://2130706433/hook', // 127.0.0.1 as one number
  'http://0x7f.1/hook',
];

/**
 * Issue 22 item 7: 6to4 (2002::/16) and Teredo (2001::/32) addresses reach the IPv4 address
 * inside them: loopback, metadata, private; Teredo's client address is stored inverted.
 */
const TUNNELED = [
  'http://[2002:7f00:1::1]:9/hook',
  'http://[2002:a9fe:a9fe::]/latest/meta-data/',
  'http://[2002:c0a8:101::5]/hook',
  'http://[2002:a00:1::]/hook',
  'http://[2001:0:4136:e378:8000:63bf:80ff:fffe]/hook',
  'http://[2001:0:7f00:1::1]/hook',
];

describe('the outbound policy', () => {
  it('refuses every private, loopback, link-local, unspecified, ULA and mapped address', async () => {
    const policy = createOutboundPolicy([]);
    for (const url of REFUSED) await expect(checkOutboundUrl(policy, url, 'webhook'), url).rejects.toMatchObject({ status: 400, extra: { field: 'webhook' } });
  });

  it('says a webhook host that does not resolve does not resolve, not that the policy refused it', async () => {
    const policy = createOutboundPolicy([]);
    const unresolved = checkOutboundUrl(policy, 'https://no-such-host.invalid/hook', 'webhook');
    await expect(unresolved).rejects.toMatchObject({ status: 400, extra: { field: 'webhook' } });
    await expect(unresolved).rejects.toThrow(/does not resolve/);
    await expect(checkOutboundUrl(policy, 'http://127.0.0.1:9/', 'webhook')).rejects.toThrow(/outbound policy/);
  });

  it('checks the IPv4 address inside 6to4 and Teredo addresses', () => {
    const none = createOutboundPolicy([]);
    for (const url of TUNNELED) {
      const host = new URL(url).hostname.slice(1, -1);
      expect(none.allows(host, host), url).toBe(false);
    }
    // Public inside (93.184.216.34; Teredo server 65.54.227.120, client 192.0.2.45 is no refused range): allowed.
    expect(none.allows('2002:5db8:d822::1', 'x')).toBe(true);
    expect(none.allows('2001:0:4136:e378:8000:63bf:3fff:fdd2', 'x')).toBe(true);
    // The operator's allow list covers the embedded address too.
    expect(createOutboundPolicy(['127.0.0.0/8']).allows('2002:7f00:1::1', 'x')).toBe(true);
  });

  it('allows public addresses, and what GANTRY_OUTBOUND_ALLOW names (CIDR, address, host)', async () => {
    const none = createOutboundPolicy([]);
    expect(none.allows('93.184.216.34', 'example.com')).toBe(true);
    expect(none.allows('2606:2800:220:1::1', 'example.com')).toBe(true);
    const some = createOutboundPolicy(loadConfig({ GANTRY_OUTBOUND_ALLOW: '10.0.0.0/8, 127.0.0.1,minio.internal,*.corp' }).outboundAllow);
    expect(some.allows('10.9.8.7', '10.9.8.7')).toBe(true);
    expect(some.allows('127.0.0.1', '127.0.0.1')).toBe(true);
    expect(some.allows('::ffff:127.0.0.1', 'x')).toBe(true);
    expect(some.allows('127.0.0.2', '127.0.0.2')).toBe(false);
    expect(some.allows('192.168.0.5', 'minio.internal')).toBe(true);
    expect(some.allows('192.168.0.5', 'build.corp')).toBe(true);
    expect(some.allows('192.168.0.5', 'corp.evil')).toBe(false);
    // Verdicts are remembered per policy: a refusal under one does not stick to another.
    await expect(checkOutboundUrl(none, 'http://127.0.0.1:9/', 'webhook')).rejects.toMatchObject({ status: 400 });
    await expect(checkOutboundUrl(some, 'http://127.0.0.1:9/', 'webhook')).resolves.toBeUndefined();
    expect(() => createOutboundPolicy(['10.0.0.0/99'])).toThrow(/GANTRY_OUTBOUND_ALLOW/);
    expect(() => createOutboundPolicy(['http://x'])).toThrow(/GANTRY_OUTBOUND_ALLOW/);
  });

  it('the outbound fetch refuses names that resolve to refused addresses when it connects, and follows no redirect', async () => {
    const target = await receiver();
    const redirecting = await receiver((_q, r) => r.writeHead(302, { location: `${target.url}/secret` }).end());
    try {
      const strict = createOutboundFetch(createOutboundPolicy([]));
      const port = new URL(target.url).port;
      await expect(strict(`http://localhost:${port}/x`, { method: 'POST', body: '{}' })).rejects.toThrow(/outbound policy/);
      await expect(strict(`${target.url}/x`, { method: 'POST', body: '{}' })).rejects.toThrow(/outbound policy/);
      expect(target.hits).toEqual([]);
      const allowed = createOutboundFetch(createOutboundPolicy(['127.0.0.1']));
      expect((await allowed(`${redirecting.url}/hook`, { method: 'POST', body: '{}' })).status).toBe(302);
      expect(target.hits).toEqual([]);
    } finally {
      await target.close();
      await redirecting.close();
    }
  });
});

describe.each<TestBackend>(['sqlite', 'postgres'])('webhooks under the outbound policy (%s)', (backend) => {
  let t: TestGantry;
  let echo: string;
  let run: string;
  const closers: (() => Promise<void>)[] = [];

  beforeAll(async () => {
    t = await startTestGantry({ jobTakeWaitMs: 500, webhookRetryMs: 50 }, { backend });
    echo = uniqueId('echo');
    await t.createEndpoint(echo);
    run = await t.createKey(['run']);
  });
  afterEach(async () => {
    for (const close of closers.splice(0)) await close();
  });
  afterAll(() => t?.close());

  it('refuses a webhook to a refused address at submit: 400 naming webhook, no job', async () => {
    for (const webhook of REFUSED.slice(0, 12)) {
      const r = await call(t.url, 'POST', `/v2/${echo}/run`, { key: run, body: { input: {}, webhook } });
      expect(r.status, webhook).toBe(400);
      expect(r.json).toMatchObject({ code: 'INVALID_PARAMETER', field: 'webhook' });
      expect(r.text).not.toMatch(/127\.0\.0\.1|::1/);
    }
    const health = await call(t.url, 'GET', `/v2/${echo}/health`, { key: run });
    expect(health.json.jobs).toMatchObject({ inQueue: 0 });
  });

  it('refuses a webhook to a 6to4 or Teredo address carrying a refused IPv4 address: 400 naming webhook, no job', async () => {
    for (const webhook of TUNNELED) {
      const r = await call(t.url, 'POST', `/v2/${echo}/run`, { key: run, body: { input: {}, webhook } });
      expect(r.status, webhook).toBe(400);
      expect(r.json).toMatchObject({ code: 'INVALID_PARAMETER', field: 'webhook' });
    }
    const health = await call(t.url, 'GET', `/v2/${echo}/health`, { key: run });
    expect(health.json.jobs).toMatchObject({ inQueue: 0 });
  });

  it('does not call a refused webhook of a job stored before the policy, and gives it up', async () => {
    const hook = await receiver();
    closers.push(hook.close);
    const store = t.gantry.gateway.http.usage as unknown as JobStore;
    const job = initialJob({
      id: uniqueId('job'), endpointId: echo, inputBytes: 2, webhook: `${hook.url}/hook`, s3Config: null, executionTimeoutMs: 60_000,
      lowPriority: false, ttlMs: 60_000, retentionMs: 600_000, maxAttempts: 1, sync: false, keyId: null, now: Date.now(),
    });
    await store.insertJob({ job: job, inputJson: '{}' });
    await t.gantry.gateway.transitions.cancel(job.id);
    const final = await eventually(async () => {
      const [row] = await store.jobStates([job.id]);
      const full = await store.getJob(job.id);
      return row && full && full.webhookNextAt === null && full.webhookAttempts > 0 ? full : undefined;
    }, 10_000, 'the webhook to be given up');
    expect(final.webhookAttempts).toBe(1);
    expect(hook.hits).toEqual([]);
  });
});
