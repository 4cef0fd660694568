import type { Logger } from 'pino';
import { systemClock } from '../../util/clock.js';
import { periodic } from '../../util/periodic.js';
import type { PgConnection } from './connection.js';

/** How often the hot tables' counters are looked at. */
const CARE_EVERY_MS = 10_000;
/** Changed or dead rows of a table past which it is vacuumed and analyzed. */
const CARE_THRESHOLD = 10_000;
/** The tables every job writes to (a claim and a result each leave a dead row version). */
const HOT_TABLES = ['jobs', 'job_stream'];

/**
 * The gateway's own `VACUUM (ANALYZE)` of the hot tables, for a server whose autovacuum is off
 * (issue 15, docs/scaling.md "Draining a large backlog"). Without it nothing removes the two dead
 * row versions each job leaves, and nothing refreshes the statistics: the planner, believing the
 * jobs table still holds the handful of rows it had when last analyzed, claims a backlog of 200k
 * by a bitmap scan and an on-disk sort of every queued row (≈ 200 ms per claim) instead of reading
 * the claim index in order. Every `everyMs` the table counters are read: a table past `threshold`
 * dead rows is vacuumed and analyzed, one past `threshold` changed rows analyzed; one table at a
 * time, never two passes at once (util/periodic.ts).
 *
 * @example const care = startTableCare(connection, logger); ... care.stop();
 */
export function startTableCare(
  db: Pick<PgConnection, 'query'>,
  logger: Pick<Logger, 'warn' | 'debug' | 'error'>,
  options: { everyMs?: number; threshold?: number } = {},
): { stop(): void } {
  const threshold = options.threshold ?? CARE_THRESHOLD;
  let warned = false;
  const pass = async (): Promise<void> => {
    try {
      const rows = await db.query<{ relname: string; dead: number; changed: number }>(
        `SELECT relname, n_dead_tup::int AS dead, n_mod_since_analyze::int AS changed FROM pg_stat_user_tables
         WHERE schemaname = current_schema() AND relname = ANY($1::text[])`,
        [HOT_TABLES],
      );
      for (const row of rows) {
        if (row.dead < threshold && row.changed < threshold) continue;
        // A table that only grew (a backlog being submitted) needs fresh statistics, not a vacuum.
        const command = row.dead >= threshold ? 'VACUUM (ANALYZE)' : 'ANALYZE';
        const began = Date.now();
        await db.query(`${command} ${row.relname}`);
        logger.debug({ table: row.relname, command, dead: row.dead, changed: row.changed, ms: Date.now() - began }, 'table care (autovacuum is off)');
      }
    } catch (err) {
      if (!warned) logger.warn({ err }, 'could not vacuum the jobs tables (autovacuum is off); claims slow down as dead rows pile up');
      warned = true;
    }
  };
  const loop = periodic({ name: 'table care', everyMs: options.everyMs ?? CARE_EVERY_MS, pass, logger, clock: systemClock });
  loop.start();
  return { stop: () => void loop.stop() };
}
