import type { Database as Db } from 'better-sqlite3';
import type { Logger } from 'pino';
import type { Clock } from '../../util/clock.js';
import { periodic } from '../../util/periodic.js';

/** Free pages left in the file for the next inserts to reuse (4 MB of 4 KB pages): giving them back only to grow again is churn. */
export const FREE_PAGES_KEPT = 1_024;
/** Pages given back per step (8 MB of 4 KB pages): one step holds the write lock for one turn's group commit, a few ms. */
export const RECLAIM_STEP_PAGES = 2_048;
/** How often the free-page count is looked at when no delete kicked a pass. */
const RECLAIM_EVERY_MS = 10_000;

/** What the reclaimer uses of the connection: the database (to count free pages) and the group commit (to run a step in). */
export interface ReclaimTarget {
  readonly db: Db;
  write<T>(work: () => T): Promise<T>;
}

/** The loop that gives a SQLite file's free pages back to the filesystem (see startFreePageReclaimer). */
export interface FreePageReclaimer {
  /** A pass soon: rows were deleted (retention, a purge, a delivered stream). */
  kick(): void;
  /** Steps now until no more than FREE_PAGES_KEPT pages are free; the pages given back. Tests and tools. */
  runNow(): Promise<number>;
  stop(): Promise<void>;
}

/**
 * Deleted rows leave free pages in the file, which SQLite reuses but never gives back: after a
 * backlog of large inputs was purged, 357,533 of a 1.46 GB file's 357,567 pages were free and
 * the file stayed 1.46 GB (issue 22). With `auto_vacuum = INCREMENTAL` (every new file; older
 * ones are converted once at migrate, connection.ts) this loop runs `PRAGMA
 * incremental_vacuum(N)` in steps of RECLAIM_STEP_PAGES inside the group commit, one step a turn,
 * while more than FREE_PAGES_KEPT pages are free: after deletes (kicked) and every 10 s. The
 * step moves pages from the end of the file into free slots and cuts the end off in the WAL;
 * the checkpointer's next copy truncates the file itself. A file still without incremental
 * auto-vacuum (not converted: too little free disk) is left alone.
 *
 * @example const reclaimer = startFreePageReclaimer(connection, logger, systemClock); reclaimer.kick(); await reclaimer.stop();
 */
export function startFreePageReclaimer(target: ReclaimTarget, logger: Pick<Logger, 'warn' | 'error' | 'debug'>, clock: Clock): FreePageReclaimer {
  let failing = false;
  const step = async (): Promise<{ freed: number; more: boolean }> => {
    const free = target.db.pragma('freelist_count', { simple: true }) as number;
    const excess = free - FREE_PAGES_KEPT;
    if (excess <= 0 || (target.db.pragma('auto_vacuum', { simple: true }) as number) !== 2) return { freed: 0, more: false };
    const n = Math.min(RECLAIM_STEP_PAGES, excess);
    // exec steps the pragma to its end (a prepared statement's run() would free one page).
    await target.write(() => target.db.exec(`PRAGMA incremental_vacuum(${n})`));
    return { freed: n, more: excess > n };
  };
  const pass = async (): Promise<boolean> => {
    try {
      const { more } = await step();
      failing = false;
      return more;
    } catch (err) {
      // A full disk fails the step too (it writes the moved pages to the WAL): said once, not every pass.
      if (!failing) logger.warn({ err }, 'giving free pages of the SQLite file back failed; trying again later');
      failing = true;
      return false;
    }
  };
  const loop = periodic({ name: 'free pages', everyMs: RECLAIM_EVERY_MS, pass, logger, clock });
  loop.start();
  let kicked = false;
  return {
    // Kicked from inside a delete's write: the pass runs after that turn's commit, never inside it.
    kick() {
      if (kicked) return;
      kicked = true;
      setImmediate(() => {
        kicked = false;
        loop.kick();
      });
    },
    async runNow() {
      let total = 0;
      for (;;) {
        const { freed, more } = await step();
        total += freed;
        if (!more) return total;
      }
    },
    stop: () => loop.stop(),
  };
}
