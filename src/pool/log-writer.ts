import type { Logger } from 'pino';
import type { Notifier } from '../model/events.js';
import type { LogRecord, LogSource, LogStore } from '../store/log-store.js';
import type { Clock } from '../util/clock.js';
import { parseLogLine } from './log-line.js';

/**
 * The log writer (docs/logs.md): every line of every pool worker of this gateway goes to the
 * store's worker_logs, in batches and off the hot path. Lines wait in one buffer bounded in
 * lines and bytes; a flush runs at most every `flushMs`, at once when a batch is full, one at
 * a time (so ids follow the order lines were printed). Each worker has a token bucket: past
 * `linesPerSecond` (with a burst of `burstLines`) its lines are counted, not kept, and a note
 * says how many went. So a worker printing without pause costs a bounded buffer and a bounded
 * write rate, whatever it prints.
 */
export interface LogWriter {
  /** The feed of one worker's lines; `end` it when the worker is gone. */
  open(worker: WorkerIdentity): WorkerLogFeed;
  /** Stores what is buffered now; resolves once written (or dropped after a failed write). */
  flush(): Promise<void>;
  /** What is buffered and what was dropped so far (the admin's and the tests' view). */
  stats(): LogWriterStats;
}

/** Who prints: the pool worker and its endpoint, and what must never be stored (its key). */
export interface WorkerIdentity {
  endpointId: string;
  workerId: string;
  /** The worker's own API key while it has one: replaced by `[redacted]` wherever a line holds it. */
  secret(): string | null;
  /** The one job the worker holds now (job-holders.ts); null when none or several. */
  soleJob(): string | null;
}

/** One worker's lines, as its log ring hands them over. */
export interface WorkerLogFeed {
  /** A complete line: stdout or stderr (throttled), or a `gantry` note (always kept). */
  line(stream: LogSource, text: string, at: number): void;
  /** The worker is gone: a last note of dropped lines, then nothing more from it. */
  end(): void;
}

/** What the writer holds and has done. */
export interface LogWriterStats {
  pendingLines: number;
  pendingBytes: number;
  /** Lines not stored since the start: throttled, over the buffer, or in a failed write. */
  dropped: number;
  /** Lines stored since the start. */
  written: number;
}

/** How the writer batches and throttles. */
export interface LogWriterLimits {
  /** The longest a line waits in the buffer. */
  flushMs: number;
  /** A batch this long (lines or bytes) is written at once. */
  batchLines: number;
  batchBytes: number;
  /** The buffer's bound: past it, lines are dropped (and counted). */
  bufferLines: number;
  bufferBytes: number;
  /** Per worker: lines a second kept over time (GANTRY_LOG_LINES_PER_SECOND), and the burst allowed. */
  linesPerSecond: number;
  burstLines: number;
}

/** Flush every 250 ms or 1,000 lines; a buffer of 20,000 lines or 8 MB; 100 lines a second per worker, 1,000 at once. */
export const LOG_WRITER_DEFAULTS: LogWriterLimits = {
  flushMs: 250,
  batchLines: 1_000,
  batchBytes: 1_000_000,
  bufferLines: 20_000,
  bufferBytes: 8_000_000,
  linesPerSecond: 100,
  burstLines: 1_000,
};

/** Bytes a buffered line is counted for besides its text (ids, time, object). */
const LINE_OVERHEAD = 120;
/** A worker's dropped-lines note is written at most this often. */
const NOTE_EVERY_MS = 1_000;

/** What the writer uses. */
export interface LogWriterDeps {
  store: Pick<LogStore, 'appendLogs'>;
  /** Told of each batch stored ('logs-stored'), so that follows on every gateway read it at once (docs/logs.md). */
  notifier?: Pick<Notifier, 'publish'>;
  clock: Clock;
  logger: Pick<Logger, 'warn'>;
  limits?: Partial<LogWriterLimits>;
}

/** @example const writer = createLogWriter({ store, clock, logger }); const feed = writer.open({ endpointId, workerId, secret, soleJob }); feed.line('stdout', 'hello', Date.now()); */
export function createLogWriter(deps: LogWriterDeps): LogWriter {
  return new Writer(deps);
}

/** A worker's throttle: its tokens and the lines it lost since its last note. */
interface Feed {
  id: WorkerIdentity;
  tokens: number;
  refilledAt: number;
  throttled: number;
  overflowed: number;
  notedAt: number;
  ended: boolean;
}

class Writer implements LogWriter {
  private readonly limits: LogWriterLimits;
  private pending: LogRecord[] = [];
  private pendingBytes = 0;
  /** Feeds with dropped lines not yet noted. */
  private readonly unnoted = new Set<Feed>();
  private timer: (() => void) | null = null;
  /** The delay the pending timer was set with (0: a full batch waits for it). */
  private timerMs = 0;
  private writing: Promise<void> | null = null;
  private dropped = 0;
  private written = 0;
  private failing = false;

  constructor(private readonly deps: LogWriterDeps) {
    this.limits = { ...LOG_WRITER_DEFAULTS, ...deps.limits };
  }

  open(id: WorkerIdentity): WorkerLogFeed {
    const feed: Feed = { id, tokens: this.limits.burstLines, refilledAt: this.deps.clock.now(), throttled: 0, overflowed: 0, notedAt: 0, ended: false };
    return {
      line: (stream, text, at) => {
        if (feed.ended) return;
        if (stream !== 'gantry' && !this.take(feed, at)) return this.lose(feed, 'throttled');
        // The note of a gap goes where the gap is, before the next line kept (at most one a second).
        if (this.unnoted.has(feed) && at - feed.notedAt >= NOTE_EVERY_MS) {
          this.note(feed, at);
          this.unnoted.delete(feed);
        }
        this.keep(feed, stream, text, at);
      },
      end: () => {
        if (feed.ended) return;
        this.note(feed, this.deps.clock.now());
        feed.ended = true;
        this.unnoted.delete(feed);
      },
    };
  }

  flush(): Promise<void> {
    this.cancelTimer();
    const run = async (): Promise<void> => {
      while (this.writing) await this.writing;
      this.noteDrops();
      if (this.pending.length === 0) return;
      const batch = this.pending;
      this.pending = [];
      this.pendingBytes = 0;
      this.writing = this.write(batch).finally(() => (this.writing = null));
      await this.writing;
      if (this.pending.length > 0) this.schedule();
    };
    return run();
  }

  stats(): LogWriterStats {
    return { pendingLines: this.pending.length, pendingBytes: this.pendingBytes, dropped: this.dropped, written: this.written };
  }

  /** Takes a token from the worker's bucket; false when it has none left. */
  private take(feed: Feed, at: number): boolean {
    const { linesPerSecond, burstLines } = this.limits;
    if (at > feed.refilledAt) {
      feed.tokens = Math.min(burstLines, feed.tokens + ((at - feed.refilledAt) * linesPerSecond) / 1000);
      feed.refilledAt = at;
    }
    if (feed.tokens < 1) return false;
    feed.tokens -= 1;
    return true;
  }

  private lose(feed: Feed, why: 'throttled' | 'overflowed'): void {
    feed[why] += 1;
    this.dropped += 1;
    this.unnoted.add(feed);
    this.schedule();
  }

  private keep(feed: Feed, stream: LogSource, text: string, at: number): void {
    const bytes = text.length + LINE_OVERHEAD;
    if (stream !== 'gantry' && (this.pending.length >= this.limits.bufferLines || this.pendingBytes + bytes > this.limits.bufferBytes)) {
      this.lose(feed, 'overflowed');
      return;
    }
    const secret = feed.id.secret();
    const line = secret && text.includes(secret) ? text.split(secret).join('[redacted]') : text;
    // Parsed only once kept: a throttled line costs a token check and a count.
    const facts = stream === 'gantry' ? null : parseLogLine(line);
    const jobId = facts?.jobId ?? feed.id.soleJob();
    this.pending.push({ at, endpointId: feed.id.endpointId, workerId: feed.id.workerId, jobId, stream, level: facts?.level ?? null, line });
    this.pendingBytes += bytes;
    if (this.pending.length >= this.limits.batchLines || this.pendingBytes >= this.limits.batchBytes) this.schedule(0);
    else this.schedule();
  }

  /** The notes of lines dropped since each worker's last one, at most one a second per worker. */
  private noteDrops(): void {
    const now = this.deps.clock.now();
    for (const feed of this.unnoted) {
      if (now - feed.notedAt < NOTE_EVERY_MS) continue;
      this.note(feed, now);
      this.unnoted.delete(feed);
    }
    if (this.unnoted.size > 0) this.schedule();
  }

  private note(feed: Feed, now: number): void {
    const parts: string[] = [];
    if (feed.throttled > 0) parts.push(`${feed.throttled} over ${this.limits.linesPerSecond} lines a second (GANTRY_LOG_LINES_PER_SECOND)`);
    if (feed.overflowed > 0) parts.push(`${feed.overflowed} while the log buffer was full (the store fell behind)`);
    if (parts.length === 0) return;
    const total = feed.throttled + feed.overflowed;
    feed.throttled = 0;
    feed.overflowed = 0;
    feed.notedAt = now;
    this.keep(feed, 'gantry', `${total} line${total === 1 ? '' : 's'} not kept: ${parts.join(', ')}`, now);
  }

  private async write(batch: LogRecord[]): Promise<void> {
    try {
      await this.deps.store.appendLogs(batch);
      this.written += batch.length;
      this.deps.notifier?.publish({ type: 'logs-stored' });
      this.failing = false;
    } catch (err) {
      // Not retried: the buffer stays bounded while the store is down; the loss is counted and logged once per episode.
      this.dropped += batch.length;
      if (!this.failing) this.deps.logger.warn({ err, lines: batch.length }, 'worker log lines could not be stored; dropped');
      this.failing = true;
    }
  }

  private schedule(ms = this.limits.flushMs): void {
    if (this.timer && this.timerMs <= ms) return;
    this.cancelTimer();
    this.timerMs = ms;
    this.timer = this.deps.clock.after(ms, () => {
      this.timer = null;
      void this.flush();
    });
  }

  private cancelTimer(): void {
    this.timer?.();
    this.timer = null;
  }
}
