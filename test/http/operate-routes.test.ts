// What the console operates through the admin API (issue 25, item 4), over real HTTP against a
// real gateway: a finished job's webhook delivered again (POST /admin/v1/endpoints/{e}/jobs/{j}/webhook)
// and its refusals; a pool worker's own key listed as managed, refused a revoke without force;
// every key's prefix and last use; a pool worker's jobs done; the words for how a worker ended
// (an idle stop is no kill) and a crash reason without a line repeated. Real worker processes
// (the SDK's echo worker) and a real webhook receiver. Needs `npm run build` (workers run dist/).
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runCli } from '../cli/run-cli.js';
import { eventually, startTestGantry, type TestGantry } from '../helpers/gantry.js';
import { call, clientFor, startReceiver, uniqueId, workerFor, type Json } from './http-helpers.js';

const ROOT = fileURLToPath(new URL('../..', import.meta.url));
const CLI = join(ROOT, 'dist/src/cli/main.js');
const ECHO = `exec node ${JSON.stringify(CLI)} worker ${JSON.stringify(join(ROOT, 'dist/examples/echo-worker.js'))}`;

interface KeyRow { id: string; name: string; prefix: string | null; lastUsedAt: string | null; managed: boolean }
interface WorkerRow { id: string; state: string; jobsDone: number; jobsCompleted: number; reason: string | null; lastExit: string | null; restarts: number }

let t: TestGantry;
const admin = (method: string, path: string, body?: unknown) => call(t.url, method, path, { key: t.adminKey, ...(body === undefined ? {} : { body }) });
const keys = async () => (await admin('GET', '/admin/v1/keys')).json.keys as KeyRow[];
const workers = async (ep: string) => (await admin('GET', `/admin/v1/endpoints/${ep}/workers`)).json.workers as WorkerRow[];

beforeAll(async () => {
  if (!existsSync(CLI)) throw new Error('run `npm run build` first: the pool workers run dist/src/cli/main.js');
  t = await startTestGantry({ autoscalerIntervalMs: 50, workerStopGraceMs: 5_000, workerRestartBackoffMs: 200, webhookRetryMs: 50, outboundAllow: ['127.0.0.1'] });
}, 30_000);
afterAll(async () => {
  await t?.close();
}, 30_000);

describe('resending a webhook', () => {
  it("delivers a finished job's webhook once more, with the same webhook-id, and refuses what cannot be resent", async () => {
    const ep = uniqueId('hook');
    await t.createEndpoint(ep);
    const hook = await startReceiver();
    try {
      const c = clientFor(t, ep, await t.createKey(['run']));
      const w = workerFor(t, ep, await t.createKey(['worker']));
      const id = await c.submit({ input: {}, webhook: hook.url });
      const plain = await c.submit({ input: {} });
      const resend = (job: string) => admin('POST', `/admin/v1/endpoints/${ep}/jobs/${job}/webhook`);

      // Live: its webhook is sent when it ends.
      const live = await resend(id);
      expect(live.status).toBe(409);
      expect(live.json).toMatchObject({ code: 'INVALID_STATE', status: 'IN_QUEUE' });

      expect((await w.takeJob()).id).toBe(id);
      expect((await w.done(id, { output: 'hooked' })).status).toBe(200);
      await eventually(async () => (hook.calls.length === 1 ? true : undefined), 10_000, 'the first delivery');
      // The delivery's bookkeeping ends just after the receiver answered: then it can be resent.
      const again = await eventually(async () => {
        const r = await resend(id);
        return r.status === 200 ? r : r.json.code === 'WEBHOOK_PENDING' ? undefined : r;
      }, 10_000, 'the resend');
      expect(again.status).toBe(200);
      expect(again.json).toEqual({ id, status: 'COMPLETED', webhook: 'due' });
      await eventually(async () => (hook.calls.length === 2 ? true : undefined), 10_000, 'the second delivery');
      expect(hook.calls[1]!.body).toMatchObject({ id, status: 'COMPLETED', output: 'hooked' });
      // The same message again: a receiver that dedupes by webhook-id sees it as such.
      expect(hook.calls[1]!.headers['webhook-id']).toBe(hook.calls[0]!.headers['webhook-id']);

      expect((await w.takeJob()).id).toBe(plain);
      expect((await w.done(plain, { output: 'x' })).status).toBe(200);
      expect((await resend(plain)).json).toMatchObject({ code: 'NO_WEBHOOK' });
      const missing = await resend('00000000-0000-7000-8000-000000000000');
      expect(missing.status).toBe(404);
      expect(missing.json).toMatchObject({ code: 'JOB_NOT_FOUND' });
      expect((await admin('POST', `/admin/v1/endpoints/nope-${ep}/jobs/${id}/webhook`)).json).toMatchObject({ code: 'ENDPOINT_NOT_FOUND' });
      // Admin only.
      expect((await call(t.url, 'POST', `/admin/v1/endpoints/${ep}/jobs/${id}/webhook`, { key: c.key })).status).toBe(401);
    } finally {
      await hook.close();
    }
  }, 60_000);
});

describe("a pool worker's key, jobs done and stop", () => {
  it('lists the key as managed with a prefix and last use, refuses its revoke without force; counts the jobs done; says an idle stop is no kill', async () => {
    const ep = uniqueId('pool');
    await t.createEndpoint(ep, { workersMax: 1, idleTimeout: 2, worker: { command: ECHO } });
    const c = clientFor(t, ep, await t.createKey(['run']));
    for (const n of [1, 2]) {
      const id = await c.submit({ input: { n } });
      await eventually(async () => ((await c.status(id)).json.status === 'COMPLETED' ? true : undefined), 30_000, `job ${n}`);
    }
    const worker = await eventually(async () => (await workers(ep)).find((w) => w.jobsDone === 2), 10_000, 'two jobs done');
    expect(worker.jobsCompleted).toBe(2);

    const poolKey = (await keys()).find((k) => k.name.includes(worker.id))!;
    expect(poolKey).toMatchObject({ managed: true });
    expect(poolKey.prefix).toMatch(/^gk_.{5}$/);
    // The worker polled with its key: its last use is written (once a minute at most).
    const used = await eventually(async () => (await keys()).find((k) => k.id === poolKey.id && k.lastUsedAt !== null), 10_000, 'the last use');
    expect(Date.parse(used.lastUsedAt!)).toBeLessThanOrEqual(Date.now());
    const refused = await admin('DELETE', `/admin/v1/keys/${poolKey.id}`);
    expect(refused.status).toBe(409);
    expect(refused.json).toMatchObject({ code: 'KEY_MANAGED', id: poolKey.id });
    expect((await keys()).some((k) => k.id === poolKey.id)).toBe(true);

    // A key made through the API is not managed, and goes without force.
    const made = (await admin('POST', '/admin/v1/keys', { name: 'by hand', scopes: ['read'] })).json as Json;
    const listed = (await keys()).find((k) => k.id === made.id)!;
    expect(listed).toMatchObject({ managed: false, prefix: (made.key as string).slice(0, 8), lastUsedAt: null });
    expect((await admin('DELETE', `/admin/v1/keys/${made.id as string}`)).status).toBe(200);

    // Idle past idleTimeout: stopped as asked, which is not "killed by SIGTERM"; its key goes with it.
    const stopped = await eventually(async () => (await workers(ep)).find((w) => w.id === worker.id && w.state === 'stopped'), 30_000, 'the idle stop');
    expect(stopped.reason).toMatch(/^scaled down/);
    expect(stopped.lastExit).toMatch(/^(stopped by SIGTERM, as asked|exited with code 0, as asked)$/);
    expect(stopped.jobsDone).toBe(2);
    await eventually(async () => ((await keys()).some((k) => k.id === poolKey.id) ? undefined : true), 10_000, 'the key revoked with its worker');
  }, 90_000);

  it('revokes a managed key with ?force=true (the CLI: --force)', async () => {
    const ep = uniqueId('forced');
    await t.createEndpoint(ep, { workersMin: 1, workersMax: 1, worker: { command: 'exec sleep 600' } });
    const poolKey = await eventually(async () => (await keys()).find((k) => k.managed && k.name.includes(ep)), 20_000, 'the pool key');
    const env = { GANTRY_URL: t.url, GANTRY_ADMIN_KEY: t.adminKey };
    const refused = await runCli(['keys', 'delete', poolKey.id], env);
    expect(refused.code).not.toBe(0);
    expect(refused.stderr).toContain('--force');
    expect((await runCli(['keys', 'delete', poolKey.id, '--force'], env)).code).toBe(0);
    expect((await keys()).some((k) => k.id === poolKey.id)).toBe(false);
    await admin('DELETE', `/admin/v1/endpoints/${ep}`);
  }, 30_000);

  it('says a crash reason with a repeated line once, with its count', async () => {
    const ep = uniqueId('crash');
    const crash = `node -e "for (let i = 0; i < 5; i++) console.error('boom: same line'); console.error('last words'); process.exit(3)"`;
    await t.createEndpoint(ep, { workersMin: 1, workersMax: 1, worker: { command: crash } });
    const crashed = await eventually(async () => (await workers(ep)).find((w) => w.restarts >= 1 && w.reason !== null && w.reason.startsWith('exited with code 3')), 20_000, 'a crash');
    expect(crashed.reason).toMatch(/^exited with code 3 \(\d+ times? in a row\): boom: same line \(×5\) \| last words$/);
    await admin('DELETE', `/admin/v1/endpoints/${ep}`);
  }, 30_000);
});
