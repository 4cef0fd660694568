// A full disk, for real (issue 22.2 and 22.5): `gantry serve` on SQLite whose data directory is
// a 40 MB tmpfs, keeping 12 MB free (GANTRY_DISK_MIN_FREE_BYTES). The test fills it through the
// API with 256 KB inputs until the gateway refuses: every refusal is 503 DISK_SPACE_LOW with
// Retry-After, before SQLite meets a full disk (no STORE_UNAVAILABLE, no 500), /readyz is not
// ready and the log has one line for the episode. Meanwhile a worker still takes jobs and posts
// their results. Then the space is freed the way an operator would: the filler endpoint's queue
// is purged, retention (1 s here) deletes the cancelled jobs, the file gives its free pages back
// (incremental auto-vacuum) and the gateway takes new jobs again without a restart, with one log
// line, and every acknowledged job is intact: the filler's all counted before the purge, the
// kept endpoint's each handed to the worker with its whole input and finished.
// Mounting needs root (CI runs the tests as root); elsewhere the test is skipped, saying why.
import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmdirSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { eventually } from '../helpers/gantry.js';
import { startGateway, type LogLine, type ServeProcess } from '../helpers/serve-process.js';
import { call, clientFor, workerFor, type Json, type Reply } from '../http/http-helpers.js';

const SIZE_MB = 40;
const KEEP_FREE = 12_000_000;
const PAD = 256_000;

const mountPoint = mkdtempSync(join(tmpdir(), 'gantry-disk-full-'));
/** Why a tmpfs cannot be mounted here, or undefined once it is mounted. */
const cannotMount = ((): string | undefined => {
  try {
    execFileSync('mount', ['-t', 'tmpfs', '-o', `size=${SIZE_MB}m`, 'tmpfs', mountPoint], { stdio: 'pipe' });
    return undefined;
  } catch (err) {
    const stderr = (err as { stderr?: Buffer }).stderr?.toString().trim();
    return stderr || (err as Error).message;
  }
})();

let gw: ServeProcess | undefined;

afterAll(async () => {
  await gw?.stop('SIGKILL');
  if (cannotMount === undefined) execFileSync('umount', [mountPoint]);
  rmdirSync(mountPoint);
});

function expectDiskLow(r: Reply): void {
  expect([r.status, r.json.code]).toEqual([503, 'DISK_SPACE_LOW']);
  expect(Number(r.headers.get('retry-after'))).toBeGreaterThan(0);
}

const named = (lines: LogLine[], start: string): LogLine[] => lines.filter((l) => String(l.msg).startsWith(start));

describe.skipIf(cannotMount !== undefined)(`a full disk (a ${SIZE_MB} MB tmpfs data directory)${cannotMount ? ` — skipped: cannot mount a tmpfs here (${cannotMount})` : ''}`, () => {
  it('new jobs 503 before the disk is full, results still taken; space freed by purge and retention: service resumes, every acknowledged job intact', { timeout: 300_000 }, async () => {
    gw = await startGateway({
      dataDir: mountPoint,
      env: {
        GANTRY_DISK_MIN_FREE_BYTES: String(KEEP_FREE),
        GANTRY_SQLITE_WAL_LIMIT_MB: '2',
        GANTRY_ASYNC_RETENTION_MS: '1000',
        GANTRY_REAPER_INTERVAL_MS: '200',
        GANTRY_JOB_TAKE_WAIT_MS: '500',
      },
    });
    await gw.admin.createEndpoint({ id: 'keep' });
    await gw.admin.createEndpoint({ id: 'scratch' });
    const runKey = (await gw.admin.createKey({ name: 'run', scopes: ['run', 'read'] })).key;
    const workerKey = (await gw.admin.createKey({ name: 'worker', scopes: ['worker'] })).key;
    const keep = clientFor(gw, 'keep', runKey);
    const scratch = clientFor(gw, 'scratch', runKey);
    const worker = workerFor(gw, 'keep', workerKey, 'w1');

    // Jobs to keep; the worker holds two of them through the episode.
    const kept = new Map<string, number>();
    for (let i = 0; i < 6; i++) kept.set(await keep.submit({ input: { i, pad: 'k'.repeat(PAD) } }), i);
    const held = [await worker.takeJob(), await worker.takeJob()];

    // Fill the disk until the gateway refuses and says it is not ready. Between two reads of the
    // free space the gateway counts what it admitted against the reserve, so a refusal may come
    // a little early and the next read let more in: every refusal must be DISK_SPACE_LOW all the same.
    let scratchAcked = 0;
    let refusals = 0;
    for (let i = 0; i < 600; i++) {
      const r = await scratch.run({ input: { i, pad: 's'.repeat(PAD) } });
      if (r.status === 200) {
        scratchAcked++;
        continue;
      }
      expectDiskLow(r);
      refusals++;
      if ((await call(gw.url, 'GET', '/readyz')).status === 503) break;
    }
    expect(refusals, 'the disk never filled').toBeGreaterThan(0);
    expect(scratchAcked).toBeGreaterThan(20);
    for (let i = 0; i < 5; i++) expectDiskLow(await scratch.run({ input: { late: i } }));
    expectDiskLow(await keep.run({ input: { late: true } }));
    const notReady = await call(gw.url, 'GET', '/readyz');
    expect(notReady.status).toBe(503);
    expect((notReady.json.checks as Json).disk).toMatch(/^low \(/);
    expect((await call(gw.url, 'GET', '/healthz')).status).toBe(200);
    // Every acknowledged filler job is in its queue.
    expect((await scratch.health()).json).toMatchObject({ jobs: { inQueue: scratchAcked } });

    // While the disk is low the worker still reports: the held jobs' results, and one more job.
    for (const job of held) {
      const input = job.input as { i: number; pad: string };
      expect(input.pad).toHaveLength(PAD);
      const done = await worker.done(job.id as string, { output: { i: input.i } });
      expect(done.json).toMatchObject({ id: job.id, accepted: true });
      kept.delete(job.id as string);
    }

    // Free space: the filler's queue purged, its jobs deleted by retention, the pages given back.
    // A purge rewrites each queued row (SQLite rewrites the input with it): in batches, so the nearly full disk takes it.
    expect((await scratch.purge()).json).toMatchObject({ removed: scratchAcked });
    await eventually(async () => ((await call(gw!.url, 'GET', '/readyz')).status === 200 ? true : undefined), 120_000, 'the gateway to be ready again');
    const resumed = await keep.run({ input: { i: 6, pad: 'k'.repeat(PAD) } });
    expect(resumed.status).toBe(200);
    kept.set(resumed.json.id as string, 6);

    // Every kept job comes to the worker whole, and its result is taken.
    while (kept.size > 0) {
      const job = await worker.takeJob(30_000);
      const input = job.input as { i: number; pad: string };
      expect(kept.get(job.id as string)).toBe(input.i);
      expect(input.pad).toBe('k'.repeat(PAD));
      expect((await worker.done(job.id as string, { output: { i: input.i } })).json).toMatchObject({ accepted: true });
      kept.delete(job.id as string);
    }

    const lines = gw.logs();
    expect(named(lines, 'disk space low')).toHaveLength(1);
    expect(named(lines, 'disk space available again')).toHaveLength(1);
    // The guard came first: SQLite never met the full disk, and nothing answered 500.
    expect(named(lines, 'store unavailable')).toEqual([]);
    expect(lines.filter((l) => l.msg === 'request failed')).toEqual([]);
    expect(await gw.stop()).toBe(0);
  });
});
