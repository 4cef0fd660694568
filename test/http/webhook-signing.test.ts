import { createHmac, randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { signWebhook } from '../../src/services/webhook-sender.js';
import { eventually, startTestGantry, type TestGantry } from '../helpers/gantry.js';
import { call, clientFor, startReceiver, uniqueId, workerFor } from './http-helpers.js';

describe('signWebhook', () => {
  it('matches the Standard Webhooks reference signature', () => {
    // The example of the Standard Webhooks specification and its reference libraries.
    expect(signWebhook('whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw', 'msg_p5jXN8AQM9LWM0D4loKWxJek', 1614265330, '{"test": 2432232314}')).toEqual({
      'webhook-timestamp': '1614265330',
      'webhook-signature': 'v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=',
    });
  });
});

describe('signed webhooks', () => {
  let t: TestGantry;
  let runKey: string;
  let workerKey: string;
  beforeAll(async () => {
    t = await startTestGantry({ jobTakeWaitMs: 1_000, outboundAllow: ['127.0.0.1'] });
    runKey = await t.createKey(['run']);
    workerKey = await t.createKey(['worker']);
  });
  afterAll(async () => {
    await t.close();
  });

  const admin = (method: string, path: string, body?: unknown) => call(t.url, method, `/admin/v1/${path}`, { key: t.adminKey, body });

  it('signs the calls of an endpoint with a secret, which the admin API never shows', async () => {
    const secret = `whsec_${randomBytes(32).toString('base64')}`;
    const ep = uniqueId('signed');
    const created = await admin('POST', 'endpoints', { id: ep, webhookSecret: secret });
    expect(created.status).toBe(200);
    expect(created.json).toMatchObject({ id: ep, webhookSigning: true });
    expect(created.text).not.toContain(secret.slice(6));
    expect((await admin('GET', `endpoints/${ep}`)).text).not.toContain(secret.slice(6));

    const hook = await startReceiver();
    try {
      const c = clientFor(t, ep, runKey);
      const w = workerFor(t, ep, workerKey);
      const id = await c.submit({ input: { n: 1 }, webhook: hook.url });
      await w.takeJob();
      expect((await w.done(id, { output: 'signed' })).status).toBe(200);
      const [delivery] = await eventually(async () => (hook.calls.length > 0 ? hook.calls : undefined), 5_000, 'webhook call');
      const headers = delivery!.headers;
      expect(headers['webhook-id']).toBe(`${id}.0`);
      const timestamp = Number(headers['webhook-timestamp']);
      expect(Math.abs(timestamp - Date.now() / 1000)).toBeLessThan(60);
      // Verified as a receiver would: HMAC of "id.timestamp.body" with the secret's bytes.
      const expected = createHmac('sha256', Buffer.from(secret.slice(6), 'base64'))
        .update(`${headers['webhook-id'] as string}.${timestamp}.${delivery!.raw}`)
        .digest('base64');
      expect(headers['webhook-signature']).toBe(`v1,${expected}`);
    } finally {
      await hook.close();
    }

    // PATCH null removes the secret: calls go unsigned again (the delivery shows it, not only the flag).
    expect((await admin('PATCH', `endpoints/${ep}`, { webhookSecret: null })).json).toMatchObject({ webhookSigning: false });
    const plain = await startReceiver();
    try {
      const c = clientFor(t, ep, runKey);
      const w = workerFor(t, ep, workerKey);
      const id = await c.submit({ input: { n: 2 }, webhook: plain.url });
      expect((await w.takeJob()).id).toBe(id);
      expect((await w.done(id, { output: 'unsigned' })).status).toBe(200);
      const [delivery] = await eventually(async () => (plain.calls.length > 0 ? plain.calls : undefined), 5_000, 'webhook call');
      expect(delivery!.body).toMatchObject({ id, status: 'COMPLETED', output: 'unsigned' });
      expect(delivery!.headers['webhook-signature']).toBeUndefined();
      expect(delivery!.headers['webhook-timestamp']).toBeUndefined();
    } finally {
      await plain.close();
    }
  });

  it('sends unsigned calls for endpoints without a secret, and refuses a malformed secret', async () => {
    const ep = uniqueId('plain');
    expect((await admin('POST', 'endpoints', { id: ep })).json).toMatchObject({ webhookSigning: false });
    const bad = await admin('PATCH', `endpoints/${ep}`, { webhookSecret: 'not-a-secret' });
    expect(bad.status).toBe(400);
    expect(bad.json).toMatchObject({ code: 'INVALID_PARAMETER', field: 'webhookSecret' });
    const hook = await startReceiver();
    try {
      const c = clientFor(t, ep, runKey);
      const w = workerFor(t, ep, workerKey);
      const id = await c.submit({ input: {}, webhook: hook.url });
      await w.takeJob();
      await w.done(id, { output: 1 });
      const [delivery] = await eventually(async () => (hook.calls.length > 0 ? hook.calls : undefined), 5_000, 'webhook call');
      expect(delivery!.body).toMatchObject({ id, status: 'COMPLETED', output: 1 });
      expect(delivery!.headers['webhook-signature']).toBeUndefined();
      expect(delivery!.headers['webhook-timestamp']).toBeUndefined();
      expect(delivery!.headers['webhook-id']).toBe(`${id}.0`);
    } finally {
      await hook.close();
    }
  });
});
