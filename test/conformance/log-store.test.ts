// The worker_logs table group (src/store/log-store.ts), one suite for both backends: lines
// stored in order, every filter, paging back and following forward, retention by age and the
// per-endpoint cap, and lines surviving a reopen.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import type { LogRecord } from '../../src/store/log-store.js';
import { createPostgresStore } from '../../src/store/postgres/postgres-store.js';
import { createSqliteStore } from '../../src/store/sqlite/sqlite-store.js';
import type { Store } from '../../src/store/store.js';
import { createTestSchema } from '../helpers/postgres.js';

const T0 = 1_700_000_000_000;

interface Opened {
  store: Store;
  reopen(): Promise<Store>;
  cleanup(): Promise<void>;
}

const backends: Record<string, () => Promise<Opened>> = {
  sqlite: async () => {
    const dir = mkdtempSync(join(tmpdir(), 'gantry-logs-'));
    const stores: Store[] = [];
    const open = async (): Promise<Store> => {
      const s = createSqliteStore({ file: join(dir, 'gantry.db') });
      stores.push(s);
      await s.migrate();
      return s;
    };
    return { store: await open(), reopen: open, cleanup: async () => {
      for (const s of stores) await s.close();
      rmSync(dir, { recursive: true, force: true });
    } };
  },
  postgres: async () => {
    const schema = await createTestSchema('logs');
    const stores: Store[] = [];
    const open = async (): Promise<Store> => {
      const s = createPostgresStore({ connectionString: schema.url, poolSize: 2 });
      stores.push(s);
      await s.migrate();
      return s;
    };
    return { store: await open(), reopen: open, cleanup: async () => {
      for (const s of stores) await s.close();
      await schema.drop();
    } };
  },
};

const line = (n: number, over: Partial<LogRecord> = {}): LogRecord => ({
  at: T0 + n,
  endpointId: 'ep',
  workerId: 'w1',
  jobId: null,
  stream: 'stdout',
  level: null,
  line: `line ${n}`,
  ...over,
});

for (const [name, open] of Object.entries(backends)) {
  describe(`worker logs store: ${name}`, () => {
    let db: Opened;
    let store: Store;
    beforeEach(async () => {
      db = await open();
      store = db.store;
    });
    afterEach(async () => {
      await db.cleanup();
    });

    it('stores a batch in order; reads the newest first, pages back with before, follows with after', async () => {
      expect(await store.lastLogId()).toBe(0);
      await store.appendLogs(Array.from({ length: 10 }, (_, i) => line(i)));
      const newest = await store.readLogs({ limit: 3 });
      expect(newest.map((l) => l.line)).toEqual(['line 9', 'line 8', 'line 7']);
      expect(newest[0]).toMatchObject({ at: T0 + 9, endpointId: 'ep', workerId: 'w1', jobId: null, stream: 'stdout', level: null });
      const page = await store.readLogs({ limit: 3, before: newest[2]!.id });
      expect(page.map((l) => l.line)).toEqual(['line 6', 'line 5', 'line 4']);
      const follow = await store.readLogs({ limit: 2, after: page[0]!.id });
      expect(follow.map((l) => l.line)).toEqual(['line 7', 'line 8']);
      expect(await store.lastLogId()).toBe(newest[0]!.id);
      // Ids grow in the order of the batch, and across batches.
      await store.appendLogs([line(10)]);
      expect((await store.readLogs({ limit: 1 }))[0]!.id).toBeGreaterThan(newest[0]!.id);
    });

    it('filters by endpoint, worker, job, time and text (any case, %, _ and \\ taken literally)', async () => {
      await store.appendLogs([
        line(1, { endpointId: 'a', workerId: 'a-1', jobId: 'j1', level: 'info', line: '{"msg":"Loading Model"}' }),
        line(2, { endpointId: 'a', workerId: 'a-2', jobId: 'j2', stream: 'stderr', level: 'error', line: 'boom 100%_done \\ok' }),
        line(3, { endpointId: 'b', workerId: 'b-1', stream: 'gantry', line: 'started: pid 1' }),
      ]);
      const lines = async (q: Parameters<Store['readLogs']>[0]): Promise<string[]> => (await store.readLogs(q)).map((l) => l.line).reverse();
      expect(await lines({ endpointId: 'a', limit: 10 })).toEqual(['{"msg":"Loading Model"}', 'boom 100%_done \\ok']);
      expect(await lines({ workerId: 'b-1', limit: 10 })).toEqual(['started: pid 1']);
      expect(await lines({ jobId: 'j2', limit: 10 })).toEqual(['boom 100%_done \\ok']);
      expect(await lines({ since: T0 + 2, limit: 10 })).toEqual(['boom 100%_done \\ok', 'started: pid 1']);
      expect(await lines({ until: T0 + 2, limit: 10 })).toEqual(['{"msg":"Loading Model"}']);
      expect(await lines({ text: 'loading model', limit: 10 })).toEqual(['{"msg":"Loading Model"}']);
      expect(await lines({ text: '%_', limit: 10 })).toEqual(['boom 100%_done \\ok']);
      expect(await lines({ text: '\\ok', limit: 10 })).toEqual(['boom 100%_done \\ok']);
      expect(await lines({ text: '_d', limit: 10 })).toEqual(['boom 100%_done \\ok']);
      expect(await lines({ text: 'x%', limit: 10 })).toEqual([]);
      expect(await lines({ endpointId: 'a', jobId: 'j1', since: T0, until: T0 + 10, text: 'model', limit: 10 })).toEqual(['{"msg":"Loading Model"}']);
      expect((await store.readLogs({ jobId: 'j2', limit: 1 }))[0]).toMatchObject({ stream: 'stderr', level: 'error', workerId: 'a-2' });
    });

    it('deletes lines older than a time, oldest first, in batches', async () => {
      await store.appendLogs(Array.from({ length: 10 }, (_, i) => line(i)));
      expect(await store.deleteLogsBefore({ before: T0 + 5, limit: 3 })).toBe(3);
      expect(await store.deleteLogsBefore({ before: T0 + 5, limit: 3 })).toBe(2);
      expect(await store.deleteLogsBefore({ before: T0 + 5, limit: 3 })).toBe(0);
      expect((await store.readLogs({ limit: 100 })).map((l) => l.line).reverse()).toEqual(['line 5', 'line 6', 'line 7', 'line 8', 'line 9']);
    });

    it("trims an endpoint to its newest lines, leaving the other endpoints' alone", async () => {
      await store.appendLogs([...Array.from({ length: 8 }, (_, i) => line(i)), line(8, { endpointId: 'other' })]);
      expect(await store.trimEndpointLogs({ endpointId: 'ep', keep: 3, keepBytes: 1e9, limit: 2 })).toBe(2);
      expect(await store.trimEndpointLogs({ endpointId: 'ep', keep: 3, keepBytes: 1e9, limit: 100 })).toBe(3);
      expect(await store.trimEndpointLogs({ endpointId: 'ep', keep: 3, keepBytes: 1e9, limit: 100 })).toBe(0);
      expect((await store.readLogs({ endpointId: 'ep', limit: 100 })).map((l) => l.line).reverse()).toEqual(['line 5', 'line 6', 'line 7']);
      expect(await store.readLogs({ endpointId: 'other', limit: 100 })).toHaveLength(1);
    });

    it('trims an endpoint to the newest lines whose UTF-8 bytes fit its byte bound, whichever bound keeps fewer', async () => {
      // 10 lines of 100 bytes each, every one 'é' (2 bytes) × 50: 50 characters, 100 bytes.
      const wide = (n: number, endpointId = 'ep'): LogRecord => ({ ...line(n, { endpointId }), line: 'é'.repeat(50) });
      await store.appendLogs([...Array.from({ length: 10 }, (_, i) => wide(i)), wide(10, 'other')]);
      const at = async (endpointId: string) => (await store.readLogs({ endpointId, limit: 100 })).map((l) => l.at - T0).reverse();
      // 350 bytes hold the newest three lines (300 bytes), not four.
      expect(await store.trimEndpointLogs({ endpointId: 'ep', keep: 1_000, keepBytes: 350, limit: 100 })).toBe(7);
      expect(await at('ep')).toEqual([7, 8, 9]);
      expect(await store.trimEndpointLogs({ endpointId: 'ep', keep: 1_000, keepBytes: 350, limit: 100 })).toBe(0);
      // Exactly at the bound: kept. The line bound, when it keeps fewer, wins.
      expect(await store.trimEndpointLogs({ endpointId: 'ep', keep: 1_000, keepBytes: 300, limit: 100 })).toBe(0);
      expect(await store.trimEndpointLogs({ endpointId: 'ep', keep: 1, keepBytes: 300, limit: 100 })).toBe(2);
      expect(await at('ep')).toEqual([9]);
      expect(await at('other')).toEqual([10]);
    });

    it('keeps the lines across a reopen', async () => {
      await store.appendLogs([line(1, { jobId: 'kept' })]);
      await store.close();
      const again = await db.reopen();
      expect((await again.readLogs({ jobId: 'kept', limit: 10 })).map((l) => l.line)).toEqual(['line 1']);
    });
  });
}
