// What each webhook delivery attempt met, recorded by the webhook sender and shown through the
// console API's job route: a receiver that fails twice then answers 200 gives three attempts
// with their statuses; a receiver that is not listening gives three `refused`. Never the
// receiver's body or the URL's path and query. Both stores in this one file.
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { WebhookSummary } from '../../src/console/job-page-route.js';
import { eventually, startTestGantry, type TestBackend, type TestGantry } from '../helpers/gantry.js';
import { clientFor, startReceiver, uniqueId, workerFor } from './http-helpers.js';

/** The console job route's answer, as far as this file reads it. */
interface JobPage {
  id: string;
  status: string;
  webhook: WebhookSummary | null;
}

/** A port nothing listens on: a server's, closed. */
async function closedPort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = (server.address() as AddressInfo).port;
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return port;
}

describe.each(['sqlite', 'postgres'] as const)('webhook attempts on the job page (%s)', (backend: TestBackend) => {
  let t: TestGantry;
  let cookie: string;
  let runKey: string;
  let workerKey: string;
  beforeAll(async () => {
    t = await startTestGantry({ webhookRetryMs: 50, outboundAllow: ['127.0.0.1'] }, { backend });
    runKey = await t.createKey(['run']);
    workerKey = await t.createKey(['worker']);
    const res = await fetch(`${t.url}/console/api/session`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ key: t.adminKey }) });
    expect(res.status).toBe(200);
    cookie = (res.headers.get('set-cookie') ?? '').split(';')[0]!;
  });
  afterAll(async () => {
    await t.close();
  });

  const page = async (ep: string, id: string): Promise<{ status: number; text: string; json: JobPage }> => {
    const res = await fetch(`${t.url}/console/api/jobs/${ep}/${id}`, { headers: { cookie } });
    const text = await res.text();
    return { status: res.status, text, json: JSON.parse(text) as JobPage };
  };

  /** Submits a job with `webhook` and has a worker finish it; returns its id. */
  async function finishedWith(ep: string, webhook: string): Promise<string> {
    await t.createEndpoint(ep);
    const c = clientFor(t, ep, runKey);
    const w = workerFor(t, ep, workerKey);
    const id = await c.submit({ input: { n: 1 }, webhook });
    expect((await w.takeJob()).id).toBe(id);
    expect((await w.done(id, { output: 'done' })).status).toBe(200);
    return id;
  }

  it('lists three attempts of a receiver that fails twice then succeeds, with their statuses', async () => {
    const hook = await startReceiver([500, 503]);
    try {
      const ep = uniqueId('hooked');
      const id = await finishedWith(ep, `${hook.url}/sekrit-path?token=sekrit-token`);
      const settled = await eventually(async () => {
        const p = await page(ep, id);
        return p.json.webhook?.outcome === 'delivered' ? p : undefined;
      }, 15_000, 'the delivery to succeed');
      expect(settled.status).toBe(200);
      expect(hook.calls).toHaveLength(3);
      const webhook = settled.json.webhook!;
      expect(webhook).toMatchObject({ target: new URL(hook.url).origin, outcome: 'delivered', attemptsMade: 3, nextAt: null });
      expect(webhook.attempts.map((a) => [a.retries, a.attempt, a.httpStatus, a.error, a.delivered])).toEqual([
        [0, 1, 500, null, false],
        [0, 2, 503, null, false],
        [0, 3, 200, null, true],
      ]);
      const times = webhook.attempts.map((a) => Date.parse(a.at));
      expect(times.every((at) => Number.isFinite(at))).toBe(true);
      expect([...times].sort((a, b) => a - b)).toEqual(times);
      // Neither the URL's path and query nor the receiver's body ("ok") is kept or shown.
      expect(settled.text).not.toContain('sekrit');
      expect(settled.text).not.toContain('"ok"');
    } finally {
      await hook.close();
    }
  }, 30_000);

  it('records `refused` for a receiver that is not listening, and gives up after three', async () => {
    const ep = uniqueId('refused');
    const id = await finishedWith(ep, `http://127.0.0.1:${await closedPort()}/hook`);
    const settled = await eventually(async () => {
      const p = await page(ep, id);
      return p.json.webhook?.outcome === 'failed' ? p : undefined;
    }, 15_000, 'the delivery to give up');
    expect(settled.json.webhook!.attempts.map((a) => [a.attempt, a.httpStatus, a.error])).toEqual([
      [1, null, 'refused'],
      [2, null, 'refused'],
      [3, null, 'refused'],
    ]);
    expect(settled.json.webhook).toMatchObject({ attemptsMade: 3, nextAt: null });
  }, 30_000);

  it('says a job without a webhook has none', async () => {
    const ep = uniqueId('plain');
    await t.createEndpoint(ep);
    const id = await clientFor(t, ep, runKey).submit({ input: {} });
    const p = await page(ep, id);
    expect(p.status).toBe(200);
    expect(p.json).toMatchObject({ id, status: 'IN_QUEUE', webhook: null });
  });
});
