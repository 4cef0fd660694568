import { existsSync, mkdirSync, mkdtempSync, rmSync, utimesSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { sweepExpiredFiles } from '../../src/images/file-sweeper.js';

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
