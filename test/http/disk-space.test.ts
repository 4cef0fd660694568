// The disk guard over HTTP on both stores (issue 22.2): a gateway whose data directory has less
// free space than GANTRY_DISK_MIN_FREE_BYTES refuses new jobs with 503 DISK_SPACE_LOW and
// Retry-After, and /readyz says so; what the acknowledged jobs still need is taken: a worker
// takes them, streams, and posts their results, a client reads, cancels and purges. The reserve
// is set past any disk here, so the guard is on from the start: a gateway started on the same
// store after another one queued the jobs. The filling of a real small filesystem is
// test/e2e/disk-full.test.ts.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { startTestGantry, type TestBackend, type TestGantry } from '../helpers/gantry.js';
import { createTestSchema } from '../helpers/postgres.js';
import { call, clientFor, isErrorBody, workerFor } from './http-helpers.js';

const dirs: string[] = [];
afterAll(() => {
  for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
});

describe.each(['sqlite', 'postgres'] as const)('GANTRY_DISK_MIN_FREE_BYTES (%s store)', (backend: TestBackend) => {
  it('under the reserve: new jobs 503 DISK_SPACE_LOW, /readyz not ready; workers take, stream and finish the jobs already queued', { timeout: 120_000 }, async () => {
    const dataDir = mkdtempSync(join(tmpdir(), 'gantry-disk-'));
    dirs.push(dataDir);
    const schema = backend === 'postgres' ? await createTestSchema('disk') : undefined;
    const shared = { dataDir, ...(schema ? { databaseUrl: schema.url } : {}) };
    let t: TestGantry | undefined;
    try {
      // First a gateway with room: three jobs queued, one of them taken by a worker.
      const roomy = await startTestGantry({ jobTakeWaitMs: 200 }, { backend, ...shared });
      await roomy.createEndpoint('dsk');
      const runKey = await roomy.createKey(['run', 'read']);
      const workerKey = await roomy.createKey(['worker']);
      const before = clientFor(roomy, 'dsk', runKey);
      const ids = [await before.submit({ input: { n: 1 } }), await before.submit({ input: { n: 2 } }), await before.submit({ input: { n: 3 } })];
      expect(((await readyz(roomy.url)).json.checks as Record<string, string>).disk).toBe('ok');
      const held = await workerFor(roomy, 'dsk', workerKey, 'w-held').take();
      expect(held.json).toMatchObject({ id: ids[0] });
      await roomy.close();

      // The same store, with more kept free than this disk has.
      t = await startTestGantry({ jobTakeWaitMs: 200, diskMinFreeBytes: 1e15 }, { backend, ...shared });
      const c = clientFor(t, 'dsk', runKey);
      for (const refused of [await c.run({ input: { n: 4 } }), await c.runsync({ input: { n: 5 } })]) {
        expect(refused.status).toBe(503);
        expect(refused.json).toMatchObject({ code: 'DISK_SPACE_LOW' });
        expect(isErrorBody(refused)).toBe(true);
        expect(Number(refused.headers.get('retry-after'))).toBeGreaterThanOrEqual(1);
      }
      const ready = await readyz(t.url);
      expect(ready.status).toBe(503);
      expect(ready.json).toMatchObject({ ready: false, checks: { store: 'reachable', disk: expect.stringMatching(/^low \(/) } });

      // The job held across the restart: its stream and result are taken.
      const worker = workerFor(t, 'dsk', workerKey, 'w-held');
      expect((await worker.streamChunk(ids[0]!, { part: 1 })).status).toBe(200);
      expect((await worker.done(ids[0]!, { output: { n: 1 } })).status).toBe(200);
      // The queued ones are handed out and finished too.
      for (const id of ids.slice(1)) {
        const taken = await worker.take();
        expect(taken.json).toMatchObject({ id });
        expect((await worker.done(id, { output: { id } })).status).toBe(200);
      }
      expect((await c.status(ids[0]!)).json).toMatchObject({ status: 'COMPLETED', output: { n: 1 } });
      for (const id of ids.slice(1)) expect((await c.status(id)).json).toMatchObject({ status: 'COMPLETED', output: { id } });
      // Reads, purges and /healthz answer as ever.
      expect((await c.purge()).status).toBe(200);
      expect((await call(t.url, 'GET', '/healthz')).status).toBe(200);
    } finally {
      await t?.close();
      await schema?.drop();
    }
  });
});

function readyz(url: string): ReturnType<typeof call> {
  return call(url, 'GET', '/readyz');
}
