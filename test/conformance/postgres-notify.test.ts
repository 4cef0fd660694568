// Two gateways in this process on one PostgreSQL schema. The second one's clock never fires a
// timer, so its 1 s shared-store poll never runs: a job submitted on the first reaches a worker
// parked on the second only through LISTEN/NOTIFY. Without it the take ends 204 after its wait.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parkedJobCalls, parkedTake, startTestGantry, type TestGantry } from '../helpers/gantry.js';
import { clientFor, uniqueId, workerFor } from '../http/http-helpers.js';
import type { Clock } from '../../src/util/clock.js';

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
});
