// The follow of worker logs (src/http/log-feed.ts, docs/logs.md) is woken by the store notifier:
// the log writer publishes 'logs-stored' after each batch it stores, and the feed reads the
// store then, not at its next poll. A real SQLite store, the real log writer and the gateway's
// local notifier; the feed's timers are held by the test, so only the notifier (or the test
// firing the fallback poll by hand) can make it read. Across gateways on PostgreSQL, with a real
// pool worker: test/conformance/postgres-notify.test.ts.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pino } from 'pino';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { createLogFeed } from '../../src/http/log-feed.js';
import { createLogWriter, type LogWriter } from '../../src/pool/log-writer.js';
import { createLocalNotifier } from '../../src/store/local-notifier.js';
import type { StoredLogLine } from '../../src/store/log-store.js';
import { createSqliteStore } from '../../src/store/sqlite/sqlite-store.js';
import type { Store } from '../../src/store/store.js';
import type { Clock } from '../../src/util/clock.js';

/** Real time; its timers wait until the test fires them. */
function heldTimers(): Clock & { fire(): number } {
  const due = new Set<() => void>();
  return {
    now: () => Date.now(),
    after(_ms, fn) {
      due.add(fn);
      return () => due.delete(fn);
    },
    fire() {
      const now = [...due];
      due.clear();
      for (const fn of now) fn();
      return now.length;
    },
  };
}

const realTimers: Clock = {
  now: () => Date.now(),
  after(ms, fn) {
    const timer = setTimeout(fn, ms);
    return () => clearTimeout(timer);
  },
};

/** Resolves once `check` holds, checking on every turn of the event loop (no timer of the feed's). */
async function until(check: () => boolean, what: string): Promise<void> {
  const deadline = Date.now() + 10_000;
  while (!check()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setImmediate(resolve));
  }
}

describe('log follow woken by the store notifier', () => {
  let dir: string;
  let store: Store;
  let writer: LogWriter;
  const notifier = createLocalNotifier();
  const logger = pino({ level: 'silent' });
  const identity = { endpointId: 'ep', workerId: 'ep-1', secret: () => null, soleJob: () => null };

  beforeEach(async () => {
    dir = mkdtempSync(join(tmpdir(), 'gantry-log-wake-'));
    store = createSqliteStore({ file: join(dir, 'g.db') });
    await store.migrate();
    writer = createLogWriter({ store, clock: realTimers, logger, notifier });
  });
  afterEach(async () => {
    await writer.flush();
    await store.close();
    rmSync(dir, { recursive: true, force: true });
  });

  it('reads the store as soon as the writer stored a batch, without waiting for its poll', async () => {
    const clock = heldTimers();
    const feed = createLogFeed({ store, clock, logger, notifier });
    const got: StoredLogLine[] = [];
    const stop = feed.follow({ endpointId: 'ep' }, await store.lastLogId(), (lines) => got.push(...lines));
    const feedOf = writer.open(identity);
    feedOf.line('stdout', 'first', Date.now());
    await writer.flush();
    await until(() => got.length === 1, 'the first line');
    feedOf.line('stdout', 'second', Date.now());
    feedOf.line('stderr', 'third', Date.now());
    await writer.flush();
    await until(() => got.length === 3, 'the next two lines');
    expect(got.map((l) => l.line)).toEqual(['first', 'second', 'third']);
    // Stopped: nothing more is handed over.
    stop();
    feedOf.line('stdout', 'unfollowed', Date.now());
    await writer.flush();
    await new Promise((resolve) => setImmediate(resolve));
    expect(got).toHaveLength(3);
    feedOf.end();
  });

  it('polls as the fallback: a feed nobody wakes reads at its poll', async () => {
    const clock = heldTimers();
    const feed = createLogFeed({ store, clock, logger, notifier: createLocalNotifier() });
    const got: StoredLogLine[] = [];
    const stop = feed.follow({ endpointId: 'ep' }, await store.lastLogId(), (lines) => got.push(...lines));
    const feedOf = writer.open(identity);
    feedOf.line('stdout', 'quiet', Date.now());
    await writer.flush();
    for (let i = 0; i < 20; i++) await new Promise((resolve) => setImmediate(resolve));
    expect(got).toEqual([]);
    expect(clock.fire()).toBe(1);
    await until(() => got.length === 1, 'the line at the poll');
    expect(got[0]!.line).toBe('quiet');
    stop();
    feedOf.end();
  });
});
