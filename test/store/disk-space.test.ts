// The disk guard's decisions (store/disk-space.ts), on a free-space reading the test sets: an
// episode begins under the reserve and ends a tenth above it, each logged once; between two
// readings the bytes admitted count (twice) against the reserve, and a refusal by that count
// asks for a reading at once. The real statfs on a real small filesystem: test/e2e/disk-full.
import { describe, expect, it } from 'vitest';
import { AppError } from '../../src/model/errors.js';
import { createDiskSpace, type DiskSpace } from '../../src/store/disk-space.js';
import { createManualClock } from '../helpers/clock.js';

const MB = 1_000_000;

function watch(minFreeBytes = 10 * MB): { disk: DiskSpace; set(free: number): void; reads(): number; lines: { level: string; msg: string }[] } {
  let free = 100 * MB;
  let reads = 0;
  const lines: { level: string; msg: string }[] = [];
  const log = (level: string) => (_obj: unknown, msg?: string) => void lines.push({ level, msg: msg ?? '' });
  const disk = createDiskSpace({
    dir: '/nowhere',
    minFreeBytes,
    logger: { warn: log('warn'), info: log('info'), error: log('error') },
    clock: createManualClock(),
    readFree: async () => {
      reads++;
      return free;
    },
  });
  return { disk, set: (bytes) => void (free = bytes), reads: () => reads, lines };
}

function refusal(disk: DiskSpace, bytes: number): AppError | undefined {
  try {
    disk.admit(bytes);
    return undefined;
  } catch (err) {
    return err as AppError;
  }
}

describe('the disk guard', () => {
  it('an episode under the reserve: 503 DISK_SPACE_LOW with Retry-After, logged once when it begins and once when it ends (a tenth above the reserve)', async () => {
    const w = watch();
    await w.disk.readNow();
    expect(refusal(w.disk, 1_000)).toBeUndefined();
    w.set(9 * MB);
    await w.disk.readNow();
    await w.disk.readNow();
    const err = refusal(w.disk, 10);
    expect(err).toMatchObject({ code: 'DISK_SPACE_LOW', status: 503, headers: { 'retry-after': '10' } });
    expect(w.disk.state()).toMatchObject({ low: true, freeBytes: 9 * MB });
    w.set(10.5 * MB); // over the reserve, not a tenth over it
    await w.disk.readNow();
    expect(refusal(w.disk, 10)?.code).toBe('DISK_SPACE_LOW');
    w.set(11 * MB);
    await w.disk.readNow();
    expect(refusal(w.disk, 10)).toBeUndefined();
    expect(w.disk.state()).toMatchObject({ low: false });
    expect(w.lines.map((l) => `${l.level}: ${l.msg.split(':')[0]}`)).toEqual(['warn: disk space low', 'info: disk space available again']);
  });

  it('counts what it admitted since the last reading, twice, and asks for a reading when that runs into the reserve', async () => {
    const w = watch();
    w.disk.start();
    w.set(20 * MB);
    await w.disk.readNow();
    const before = w.reads();
    expect(refusal(w.disk, 3 * MB)).toBeUndefined(); // 20 - 2 × 3 = 14 left
    expect(refusal(w.disk, 3 * MB)).toBeUndefined(); // counted before this one: 14 ≥ 10
    expect(refusal(w.disk, 1)?.code).toBe('DISK_SPACE_LOW'); // 20 - 2 × 6 = 8 < 10
    // Not an episode (the disk was not read under the reserve), but a reading is on its way.
    expect(w.disk.state()).toMatchObject({ low: false });
    await w.disk.readNow();
    expect(w.reads()).toBeGreaterThan(before + 1);
    // The reading found the disk as it was: what was admitted is written, counted from it now.
    expect(refusal(w.disk, 1)).toBeUndefined();
    await w.disk.stop();
  });

  it('0 turns the check off', async () => {
    const w = watch(0);
    w.set(0);
    await w.disk.readNow();
    expect(refusal(w.disk, 100 * MB)).toBeUndefined();
  });
});
