// GET /admin/v1/logs refuses bad filters with 400 INVALID_PARAMETER naming the field, answers
// only admin keys, and pages back through stored lines with its cursor (docs/api.md).
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { join } from 'node:path';
import { createSqliteStore } from '../../src/store/sqlite/sqlite-store.js';
import { startTestGantry, type TestGantry } from '../helpers/gantry.js';

let t: TestGantry;
beforeAll(async () => {
  t = await startTestGantry({}, { backend: 'sqlite' });
});
afterAll(async () => {
  await t?.close();
});

const get = async (query: string, key = t.adminKey): Promise<{ status: number; body: Record<string, unknown> }> => {
  const res = await fetch(`${t.url}/admin/v1/logs?${query}`, { headers: { authorization: `Bearer ${key}` } });
  return { status: res.status, body: (await res.json()) as Record<string, unknown> };
};

describe('GET /admin/v1/logs', () => {
  it.each([
    ['since=yesterday', 'since'],
    ['until=12:00', 'until'],
    ['limit=0', 'limit'],
    ['limit=1001', 'limit'],
    ['cursor=abc', 'cursor'],
    [`q=${'x'.repeat(201)}`, 'q'],
    [`job=${'j'.repeat(201)}`, 'job'],
  ])('%s: 400 naming %s', async (query, field) => {
    const r = await get(query);
    expect(r.status).toBe(400);
    expect(r.body).toMatchObject({ code: 'INVALID_PARAMETER' });
    expect(r.body.error).toContain(field);
  });

  it('refuses a key without the admin scope', async () => {
    const run = await t.createKey(['run', 'read']);
    expect((await get('endpoint=x', run)).status).toBe(401);
  });

  it('pages back with the cursor, each page in the order printed', async () => {
    const at = Date.now();
    // Lines stored as the leader's log writer stores them, through a second store on the gateway's
    // SQLite file (the e2e tests print them from real workers).
    const store = createSqliteStore({ file: join(t.dataDir, 'gantry.db') });
    try {
      await store.appendLogs(Array.from({ length: 5 }, (_, i) => ({ at: at + i, endpointId: 'paged', workerId: 'paged-1', jobId: null, stream: 'stdout' as const, level: null, line: `line ${i}` })));
    } finally {
      await store.close();
    }
    const first = await get('endpoint=paged&limit=2');
    expect((first.body.lines as { line: string }[]).map((l) => l.line)).toEqual(['line 3', 'line 4']);
    const second = await get(`endpoint=paged&limit=2&cursor=${first.body.cursor as string}`);
    expect((second.body.lines as { line: string }[]).map((l) => l.line)).toEqual(['line 1', 'line 2']);
    const third = await get(`endpoint=paged&limit=2&cursor=${second.body.cursor as string}`);
    expect((third.body.lines as { line: string }[]).map((l) => l.line)).toEqual(['line 0']);
    expect(third.body.cursor).toBeNull();
    expect(Date.parse((third.body.lines as { at: string }[])[0]!.at)).toBe(at);
  });
});
