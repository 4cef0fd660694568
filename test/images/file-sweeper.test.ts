import { existsSync, mkdirSync, mkdtempSync, rmSync, utimesSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { sweepExpiredFiles, sweepStoredFiles } from '../../src/images/file-sweeper.js';
import { createSqliteStore } from '../../src/store/sqlite/sqlite-store.js';

describe('sweepExpiredFiles', () => {
  const dirs: string[] = [];
  afterEach(() => {
    for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
  });

  it('deletes images older than the link lifetime and keeps newer ones', () => {
    const dir = mkdtempSync(join(tmpdir(), 'gantry-files-'));
    dirs.push(dir);
    mkdirSync(join(dir, 'image-fast'));
    const old = join(dir, 'image-fast', 'a.jpeg');
    const fresh = join(dir, 'image-fast', 'b.png');
    writeFileSync(old, 'x');
    writeFileSync(fresh, 'y');
    const now = Date.now();
    const eightDaysAgo = (now - 8 * 86_400_000) / 1000;
    utimesSync(old, eightDaysAgo, eightDaysAgo);
    expect(sweepExpiredFiles(dir, 7 * 86_400_000, now)).toBe(1);
    expect(existsSync(old)).toBe(false);
    expect(existsSync(fresh)).toBe(true);
  });

  it('does nothing when the folder does not exist yet', () => {
    expect(sweepExpiredFiles(join(tmpdir(), 'gantry-no-such-folder-x'), 1, Date.now())).toBe(0);
  });
});

describe('sweepStoredFiles (the files kept in the database)', () => {
  it('deletes every file stored before the cut, past one batch of 1,000, and keeps the newer ones', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'gantry-stored-files-'));
    const store = createSqliteStore({ file: join(dir, 'gantry.db') });
    try {
      await store.migrate();
      const body = new Uint8Array([1, 2, 3]);
      await Promise.all(Array.from({ length: 1_005 }, (_, i) => store.putFile({ key: `image-fast/old-${i}.png`, contentType: 'image/png', body, now: 1_000 + i, maxBytes: 1e9 })));
      await store.putFile({ key: 'image-fast/new.png', contentType: 'image/png', body, now: 5_000, maxBytes: 1e9 });
      expect(await sweepStoredFiles(store, 4_000)).toBe(1_005);
      expect(await store.fileInfo('image-fast/old-1004.png')).toBeUndefined();
      expect(await store.fileInfo('image-fast/new.png')).toMatchObject({ size: 3 });
      expect(await sweepStoredFiles(store, 4_000)).toBe(0);
    } finally {
      await store.close();
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
