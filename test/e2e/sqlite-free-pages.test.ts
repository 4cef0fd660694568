// The SQLite file gives its free pages back (issue 22.2): a backlog of large inputs, purged and
// deleted by retention, no longer leaves the file at its largest. A gateway's file is in
// incremental auto-vacuum mode (a new one from its first table, an older one converted once at
// start), and the free pages past a small reserve are given back in steps in the background
// after deletes (src/store/sqlite/free-pages.ts); the checkpointer's next copy truncates the file.
import { mkdtempSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { afterAll, describe, expect, it } from 'vitest';
import { eventually, startTestGantry, type TestGantry } from '../helpers/gantry.js';
import { clientFor } from '../http/http-helpers.js';

const MB = 1_000_000;
const dirs: string[] = [];
const open: TestGantry[] = [];

afterAll(async () => {
  for (const t of open) await t.close();
  for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
});

function newDir(): string {
  const dir = mkdtempSync(join(tmpdir(), 'gantry-free-pages-'));
  dirs.push(dir);
  return dir;
}

async function gateway(dataDir: string): Promise<TestGantry> {
  // Ended jobs are kept 1 s, and the reaper looks every 100 ms: a purge is deleted at once.
  const t = await startTestGantry({ asyncRetentionMs: 1_000, reaperIntervalMs: 100 }, { dataDir });
  open.push(t);
  return t;
}

const fileBytes = (dir: string): number => statSync(join(dir, 'gantry.db')).size;

/** The file's auto_vacuum mode (0 none, 2 incremental), read on a connection of its own. */
function autoVacuum(dir: string): number {
  const db = new Database(join(dir, 'gantry.db'), { readonly: true });
  try {
    return db.pragma('auto_vacuum', { simple: true }) as number;
  } finally {
    db.close();
  }
}

describe('SQLite gives free pages back', { timeout: 180_000 }, () => {
  it('a purged backlog of 30 MB of inputs, deleted by retention: the file shrinks back; jobs still queued elsewhere are intact', async () => {
    const dir = newDir();
    const t = await gateway(dir);
    await t.createEndpoint('big');
    await t.createEndpoint('kept');
    const runKey = await t.createKey(['run', 'read']);
    const big = clientFor(t, 'big', runKey);
    const kept = clientFor(t, 'kept', runKey);
    const keptIds = [await kept.submit({ input: { n: 1 } }), await kept.submit({ input: { n: 2 } })];
    for (let i = 0; i < 30; i++) await big.submit({ input: { i, pad: 'x'.repeat(MB) } });
    expect(autoVacuum(dir)).toBe(2);
    // The checkpointer copies the WAL into the file within moments.
    await eventually(async () => (fileBytes(dir) > 30 * MB ? true : undefined), 60_000, 'the file to hold the backlog');

    expect((await big.purge()).json).toMatchObject({ removed: 30 });
    const shrunk = await eventually(async () => (fileBytes(dir) < 10 * MB ? fileBytes(dir) : undefined), 90_000, 'the file to shrink after the purge');
    expect(shrunk).toBeLessThan(10 * MB);
    for (const id of keptIds) expect((await kept.status(id)).json).toMatchObject({ id, status: 'IN_QUEUE' });
    // The file takes new jobs as before.
    expect((await big.run({ input: { after: true } })).status).toBe(200);
  });

  it('a file made without incremental auto-vacuum is converted once at start, its jobs intact', async () => {
    const dir = newDir();
    const first = await gateway(dir);
    await first.createEndpoint('old');
    const runKey = await first.createKey(['run', 'read']);
    const ids = [await clientFor(first, 'old', runKey).submit({ input: { n: 1 } }), await clientFor(first, 'old', runKey).submit({ input: { n: 2 } })];
    await first.close();
    open.splice(open.indexOf(first), 1);
    // As a file of a version before incremental auto-vacuum was.
    const db = new Database(join(dir, 'gantry.db'));
    db.pragma('auto_vacuum = NONE');
    db.exec('VACUUM');
    expect(db.pragma('auto_vacuum', { simple: true })).toBe(0);
    db.close();

    const second = await gateway(dir);
    expect(autoVacuum(dir)).toBe(2);
    for (const id of ids) expect((await clientFor(second, 'old', runKey).status(id)).json).toMatchObject({ id, status: 'IN_QUEUE' });
  });
});
