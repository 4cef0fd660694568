import type { Logger } from 'pino';
import type { Notifier } from '../model/events.js';
import type { LogQuery, LogStore, StoredLogLine } from '../store/log-store.js';
import type { Clock } from '../util/clock.js';

/**
 * The follow mode of GET /admin/v1/logs (docs/logs.md): one read of the store for the lines
 * newer than the last one seen, handed to each follower whose filters match. It reads when the
 * store notifier says lines were stored ('logs-stored': the leader's log writer publishes it
 * after each batch, and PostgreSQL's NOTIFY carries it to every gateway), and besides every
 * `everyMs` while anyone follows, in case a notification was lost. The store is the only
 * source, so a follower on any gateway sees the lines the leader's writer stored, with one
 * query a read however many follow. Nobody following: no timer, no listener.
 */
export interface LogFeed {
  /**
   * Calls `deliver` with every line stored after id `after` that matches `filter`, in order,
   * until the returned function is called. Lines of one read come in one call.
   */
  follow(filter: LogFilter, after: number, deliver: (lines: StoredLogLine[]) => void): () => void;
  /** How many follow now. */
  readonly followers: number;
}

/** The filters a follower keeps (the store's, but for the page bounds). */
export type LogFilter = Omit<LogQuery, 'before' | 'after' | 'limit'>;

/** What the feed reads and listens to. */
export interface LogFeedDeps {
  store: Pick<LogStore, 'readLogs' | 'lastLogId'>;
  clock: Clock;
  logger: Pick<Logger, 'warn'>;
  /** Wakes the feed when lines were stored; without it the feed polls every POLL_ALONE_MS. */
  notifier?: Pick<Notifier, 'subscribe'>;
  /** The poll's period (default: POLL_WITH_NOTIFIER_MS with a notifier, POLL_ALONE_MS without). */
  everyMs?: number;
}

/** Lines read per store call of a read; a read takes at most POLL_PAGES of them. */
const PAGE = 1_000;
const POLL_PAGES = 10;
/** The poll when notifications wake the feed: only a lost notification waits for it. */
const POLL_WITH_NOTIFIER_MS = 1_000;
/** The poll when nothing wakes the feed. */
const POLL_ALONE_MS = 250;

/** @example const feed = createLogFeed({ store, clock, logger, notifier }); const stop = feed.follow({ endpointId: 'e' }, 0, (lines) => send(lines)); */
export function createLogFeed(deps: LogFeedDeps): LogFeed {
  const everyMs = deps.everyMs ?? (deps.notifier ? POLL_WITH_NOTIFIER_MS : POLL_ALONE_MS);
  const followers = new Set<Follower>();
  let cancel: (() => void) | null = null;
  let unsubscribe: (() => void) | null = null;
  let reading = false;
  /** Lines were stored while a read was under way: read again once it ends. */
  let again = false;
  let failing = false;

  /** One read now (or right after the one under way), then the poll's timer from its end. */
  const read = (): void => {
    cancel?.();
    cancel = null;
    if (followers.size === 0) return;
    if (reading) {
      again = true;
      return;
    }
    reading = true;
    readNew(deps.store, followers)
      .then(() => (failing = false))
      .catch((err: unknown) => {
        if (!failing) deps.logger.warn({ err }, 'following worker logs: reading the store failed; trying again');
        failing = true;
      })
      .finally(() => {
        reading = false;
        if (again) {
          again = false;
          read();
        } else if (followers.size > 0 && cancel === null) cancel = deps.clock.after(everyMs, read);
      });
  };

  return {
    follow(filter, after, deliver) {
      const follower = { filter, after, deliver };
      followers.add(follower);
      unsubscribe ??= deps.notifier?.subscribe((event) => {
        if (event.type === 'logs-stored') read();
      }) ?? null;
      if (!reading) cancel ??= deps.clock.after(everyMs, read);
      return () => {
        followers.delete(follower);
        if (followers.size === 0) {
          cancel?.();
          cancel = null;
          unsubscribe?.();
          unsubscribe = null;
        }
      };
    },
    get followers() {
      return followers.size;
    },
  };
}

/** One follow: its filters, the last line id it was handed, where its lines go. */
interface Follower {
  filter: LogFilter;
  after: number;
  deliver: (lines: StoredLogLine[]) => void;
}

/** Reads what is new since the lowest point any follower waits after, and hands it out. */
async function readNew(store: Pick<LogStore, 'readLogs'>, followers: ReadonlySet<Follower>): Promise<void> {
  let from = Math.min(...[...followers].map((f) => f.after));
  for (let page = 0; page < POLL_PAGES && followers.size > 0; page++) {
    const lines = await store.readLogs({ after: from, limit: PAGE });
    if (lines.length === 0) break;
    for (const f of followers) {
      const mine = lines.filter((l) => l.id > f.after && matches(f.filter, l));
      f.after = Math.max(f.after, lines[lines.length - 1]!.id);
      if (mine.length > 0) f.deliver(mine);
    }
    from = lines[lines.length - 1]!.id;
    if (lines.length < PAGE) break;
  }
}

/** Whether a line passes a follower's filters (the text as the stores match it: ASCII letters in any case). */
export function matches(filter: LogFilter, line: StoredLogLine): boolean {
  if (filter.endpointId !== undefined && line.endpointId !== filter.endpointId) return false;
  if (filter.workerId !== undefined && line.workerId !== filter.workerId) return false;
  if (filter.jobId !== undefined && line.jobId !== filter.jobId) return false;
  if (filter.since !== undefined && line.at < filter.since) return false;
  if (filter.until !== undefined && line.at >= filter.until) return false;
  if (filter.text !== undefined && !asciiLower(line.line).includes(asciiLower(filter.text))) return false;
  return true;
}

const asciiLower = (s: string): string => s.replace(/[A-Z]/g, (c) => c.toLowerCase());
