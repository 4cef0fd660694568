// Two gateways in this process on one PostgreSQL schema. The second one's clock never fires a
// timer, so its 1 s shared-store poll never runs: a job submitted on the first reaches a worker
// parked on the second only through LISTEN/NOTIFY. Without it the take ends 204 after its wait.
// Likewise a log follow on the second (its fallback poll never runs) gets the lines a real pool
// worker of the first prints only through NOTIFY ('logs-stored'). Needs `npm run build`.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { eventually, parkedJobCalls, parkedTake, startTestGantry, type TestGantry } from '../helpers/gantry.js';
import { clientFor, uniqueId, workerFor } from '../http/http-helpers.js';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { createAdminClient } from '../../src/sdk/admin-client.js';
import type { Clock } from '../../src/util/clock.js';

const ROOT = fileURLToPath(new URL('../..', import.meta.url));
const LOG_WORKER = `exec node ${JSON.stringify(join(ROOT, 'dist/src/cli/main.js'))} worker ${JSON.stringify(join(ROOT, 'test/e2e/fixtures/log-worker.mjs'))}`;

/** Real time, but no timer ever fires: no background poll, reaper or webhook pass on this gateway. */
const frozenTimers: Clock = { now: () => Date.now(), after: () => () => undefined };

let a: TestGantry;
let b: TestGantry;
let runKey: string;
let workerKey: string;

beforeAll(async () => {
  a = await startTestGantry({ jobTakeWaitMs: 20_000 }, { backend: 'postgres' });
  b = await startTestGantry({ jobTakeWaitMs: 20_000 }, { backend: 'postgres', databaseUrl: a.databaseUrl!, clock: frozenTimers });
  runKey = await a.createKey(['run']);
  workerKey = await a.createKey(['worker']);
});

afterAll(async () => {
  await b?.close();
  await a?.close();
});

describe('gateways sharing PostgreSQL wake each other through NOTIFY', () => {
  it('a job submitted on A is handed to the take parked on B', async () => {
    const ep = uniqueId('notify');
    await a.createEndpoint(ep);
    const c = clientFor(a, ep, runKey);
    const w = workerFor(b, ep, workerKey);
    const take = w.take();
    await parkedTake(b.gantry, w.id);
    const id = await c.submit({ input: { across: true } });
    const r = await take;
    expect(r.status).toBe(200);
    expect(r.json).toMatchObject({ id, input: { across: true } });
    expect(r.ms).toBeLessThan(20_000); // woken, not ended by its wait
  });

  // Job long-polls also re-read the job every second, so this one holds even without NOTIFY.
  it('a status-sync parked on B answers when the worker on A posts the result', async () => {
    const ep = uniqueId('notify');
    await a.createEndpoint(ep);
    const c = clientFor(a, ep, runKey);
    const onB = clientFor(b, ep, runKey);
    const w = workerFor(a, ep, workerKey);
    const id = await c.submit();
    expect((await w.takeJob()).id).toBe(id);
    const pending = onB.statusSync(id, '?wait=20000');
    await parkedJobCalls(b.gantry);
    expect((await w.done(id, { output: 'from A' })).status).toBe(200);
    const r = await pending;
    expect(r.json).toMatchObject({ id, status: 'COMPLETED', output: 'from A' });
  });

  it("a log follow on B gets the line A's pool worker printed, woken by NOTIFY (B's fallback poll never runs)", async () => {
    const ep = uniqueId('notify-log');
    await createAdminClient({ url: a.url, adminKey: b.adminKey }).createEndpoint({ id: ep, workersMax: 1, idleTimeout: 5, worker: { command: LOG_WORKER } });
    const controller = new AbortController();
    const res = await fetch(`${b.url}/admin/v1/logs?endpoint=${ep}&follow=1`, { headers: { authorization: `Bearer ${b.adminKey}` }, signal: controller.signal });
    expect(res.status).toBe(200);
    let text = '';
    const reading = (async () => {
      const decoder = new TextDecoder();
      for await (const chunk of res.body as unknown as AsyncIterable<Uint8Array>) text += decoder.decode(chunk, { stream: true });
    })().catch(() => undefined);
    try {
      const c = clientFor(a, ep, runKey);
      const id = await c.submit({ input: { marker: 'notified' } });
      await eventually(async () => (text.includes('plain line of notified') ? true : undefined), 30_000, "the worker's line on B's follow");
      const event = text.split('\n\n').find((block) => block.includes('plain line of notified'))!;
      const data = JSON.parse(event.split('\n').find((l) => l.startsWith('data: '))!.slice(6)) as { jobId: string; endpointId: string };
      expect(data).toMatchObject({ jobId: id, endpointId: ep });
    } finally {
      controller.abort();
      await reading;
      await createAdminClient({ url: a.url, adminKey: b.adminKey }).deleteEndpoint(ep);
    }
  }, 60_000);
});
