// The log writer (src/pool/log-writer.ts) and what it reads from a line (src/pool/log-line.ts):
// batches bounded in lines and bytes, the per-worker token bucket with its note of dropped
// lines, the buffer bound while the store is slow, the key redacted, the job from the line or
// the one job held. A real SQLite store; time moved by a manual clock (the rate) while flushes
// run on real timers.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pino } from 'pino';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { parseLogLine } from '../../src/pool/log-line.js';
import { createLogWriter, type LogWriterLimits } from '../../src/pool/log-writer.js';
import type { LogRecord } from '../../src/store/log-store.js';
import { createSqliteStore } from '../../src/store/sqlite/sqlite-store.js';
import type { Store } from '../../src/store/store.js';
import { createManualClock } from '../helpers/clock.js';

const T0 = 1_700_000_000_000;

describe('parseLogLine', () => {
  it('reads pino, runpod-python and plain lines', () => {
    expect(parseLogLine('{"level":50,"time":1,"jobId":"j-1","msg":"boom"}')).toEqual({ level: 'error', jobId: 'j-1', message: 'boom', json: true });
    expect(parseLogLine('{"requestId": "abc-123", "message": "hello", "level": "WARNING"}')).toEqual({ level: 'warn', jobId: 'abc-123', message: 'hello', json: true });
    expect(parseLogLine('{"request_id":"r1","severity":"critical","message":"x"}')).toMatchObject({ level: 'fatal', jobId: 'r1' });
    expect(parseLogLine('INFO    | sync-1234-abcd | Started.')).toEqual({ level: 'info', jobId: 'sync-1234-abcd', message: 'Started.', json: false });
    expect(parseLogLine('DEBUG   | Polling for jobs')).toEqual({ level: 'debug', jobId: null, message: 'Polling for jobs', json: false });
    expect(parseLogLine('ERROR: model missing')).toMatchObject({ level: 'error', message: 'model missing' });
    expect(parseLogLine('[WARN] slow disk')).toMatchObject({ level: 'warn', message: 'slow disk' });
    expect(parseLogLine('information about the run')).toEqual({ level: null, jobId: null, message: 'information about the run', json: false });
    expect(parseLogLine('{not json}')).toMatchObject({ level: null, json: false });
    expect(parseLogLine('{"jobId":"has space in it","msg":"m"}')).toMatchObject({ jobId: null, message: 'm' });
  });
});

describe('log writer', () => {
  let dir: string;
  let store: Store;
  beforeEach(async () => {
    dir = mkdtempSync(join(tmpdir(), 'gantry-log-writer-'));
    store = createSqliteStore({ file: join(dir, 'g.db') });
    await store.migrate();
  });
  afterEach(async () => {
    await store.close();
    rmSync(dir, { recursive: true, force: true });
  });

  const setUp = (limits: Partial<LogWriterLimits>, target: Pick<Store, 'appendLogs'> = store) => {
    const clock = createManualClock(T0);
    const writer = createLogWriter({ store: target, clock, logger: pino({ level: 'silent' }), limits });
    let held: string | null = null;
    const feed = writer.open({ endpointId: 'ep', workerId: 'w1', secret: () => 'sk-secret-key', soleJob: () => held });
    return { clock, writer, feed, hold: (job: string | null) => (held = job) };
  };
  const all = async (): Promise<LogRecord[]> => (await store.readLogs({ limit: 100_000 })).reverse();

  it('stores lines with their job and level, the key redacted, in the order printed', async () => {
    const { writer, feed, hold } = setUp({});
    feed.line('stdout', 'before any job', T0);
    hold('job-a');
    feed.line('stderr', 'ERROR | while job-a ran', T0 + 1);
    feed.line('stdout', '{"level":30,"jobId":"job-b","msg":"names job-b"}', T0 + 2);
    feed.line('stdout', 'key sk-secret-key and again sk-secret-key', T0 + 3);
    feed.line('gantry', 'exited: code 0', T0 + 4);
    await writer.flush();
    expect((await all()).map((l) => [l.stream, l.jobId, l.level, l.line])).toEqual([
      ['stdout', null, null, 'before any job'],
      ['stderr', 'job-a', 'error', 'ERROR | while job-a ran'],
      ['stdout', 'job-b', 'info', '{"level":30,"jobId":"job-b","msg":"names job-b"}'],
      ['stdout', 'job-a', null, 'key [redacted] and again [redacted]'],
      ['gantry', 'job-a', null, 'exited: code 0'],
    ]);
    expect(writer.stats()).toMatchObject({ written: 5, dropped: 0, pendingLines: 0 });
  });

  it('writes a full batch without waiting for the flush interval', async () => {
    const { writer, feed } = setUp({ flushMs: 3_600_000, batchLines: 10 });
    for (let i = 0; i < 10; i++) feed.line('stdout', `l${i}`, T0);
    await expect.poll(async () => (await all()).length, { timeout: 5_000 }).toBe(10);
    expect(writer.stats().written).toBe(10);
  });

  it('throttles a worker past its rate, notes how many lines went, and lets it print again as tokens come back', async () => {
    const { writer, feed, clock } = setUp({ linesPerSecond: 10, burstLines: 5 });
    for (let i = 0; i < 100; i++) feed.line('stdout', `burst ${i}`, T0);
    clock.advance(1_000);
    feed.line('stdout', 'a second later', clock.now());
    await writer.flush();
    const lines = (await all()).map((l) => l.line);
    expect(lines).toEqual(['burst 0', 'burst 1', 'burst 2', 'burst 3', 'burst 4', '95 lines not kept: 95 over 10 lines a second (GANTRY_LOG_LINES_PER_SECOND)', 'a second later']);
    expect(writer.stats()).toMatchObject({ dropped: 95, written: 7 });
  });

  it('keeps the buffer bounded while the store is slow, and notes the lines that did not fit', async () => {
    let release!: () => void;
    const slow: Pick<Store, 'appendLogs'> = { appendLogs: async (lines) => {
      await new Promise<void>((r) => (release = r));
      await store.appendLogs(lines);
    } };
    const { writer, feed, clock } = setUp({ linesPerSecond: 1e6, burstLines: 1e6, batchLines: 5, bufferLines: 20, bufferBytes: 1e9 }, slow);
    for (let i = 0; i < 5; i++) feed.line('stdout', `first ${i}`, T0);
    // The first batch is being written (and held); 50 more lines meet a buffer of 20.
    await new Promise((r) => setTimeout(r, 20));
    for (let i = 0; i < 50; i++) feed.line('stdout', `more ${i}`, T0);
    // 20 lines, and the note of the first line that did not fit (notes pass the bound, one a second per worker).
    expect(writer.stats().pendingLines).toBe(21);
    clock.advance(2_000);
    release();
    await new Promise((r) => setTimeout(r, 20));
    release();
    const flushed = writer.flush();
    await new Promise((r) => setTimeout(r, 20));
    release();
    await flushed;
    const lines = (await all()).map((l) => l.line);
    expect(lines.filter((l) => l.startsWith('more'))).toHaveLength(20);
    const notes = lines.filter((l) => l.includes('not kept'));
    expect(notes).toEqual(['1 line not kept: 1 while the log buffer was full (the store fell behind)', '29 lines not kept: 29 while the log buffer was full (the store fell behind)']);
    expect(writer.stats().dropped).toBe(30);
  });

  it('a worker that ends writes its last note, and nothing after', async () => {
    const { writer, feed } = setUp({ linesPerSecond: 1, burstLines: 1 });
    feed.line('stdout', 'one', T0);
    feed.line('stdout', 'two', T0);
    feed.end();
    feed.line('stdout', 'after the end', T0);
    await writer.flush();
    expect((await all()).map((l) => l.line)).toEqual(['one', '1 line not kept: 1 over 1 lines a second (GANTRY_LOG_LINES_PER_SECOND)']);
  });
});
