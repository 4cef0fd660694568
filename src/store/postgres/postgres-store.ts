import type { Logger } from 'pino';
import { composeStore } from '../compose-store.js';
import type { OpenedStore, Store } from '../store.js';
import { openPostgres, type PgConnection, type PgConnectionOptions } from './connection.js';
import { PgEndpointStore } from './endpoints.js';
import { PgFileStore } from './files.js';
import { PgJobStore } from './jobs.js';
import { PgKeyStore } from './keys.js';
import { PgRegistryCredentialStore } from './registry-credentials.js';
import { createPgLeaderLock } from './leader-lock.js';
import { createPgNotifier } from './notifier.js';
import { PgUsageStore } from './usage.js';
import { PgMinuteStore } from './minutes.js';
import { PgLogStore } from './logs.js';
import { startTableCare } from './table-care.js';
import { PgUpkeepStore } from './upkeep.js';
import { PgWorkerStore } from './workers.js';
import { PgAuditStore } from './audit.js';

/** Where the database is and how many connections the store's pool may hold. */
export type PostgresStoreOptions = PgConnectionOptions;

/**
 * A Store on PostgreSQL through a pg Pool, one part a table group (jobs.ts, workers.ts,
 * endpoints.ts, keys.ts, usage.ts) on one pool. Every call is one statement (several only
 * inside a transaction), so a write resolves once committed; the job submissions, results and
 * reads of one event-loop turn are grouped (job-batches.ts).
 *
 * @example
 * const store = createPostgresStore({ connectionString: 'postgres://gantry@db/gantry' });
 * await store.migrate();
 */
export function createPostgresStore(options: PostgresStoreOptions): Store {
  return storeOn(openPostgres(options));
}

/**
 * A gateway's store on PostgreSQL and what goes with it: gateways sharing the database hear
 * each other's events through LISTEN/NOTIFY (notifier.ts) and elect a leader with an advisory
 * lock (leader-lock.ts), each on a connection of its own opened from the store's settings.
 *
 * @example const { store, notifier, leaderLock } = openPostgresStore({ connectionString: url }, logger);
 */
export function openPostgresStore(options: PostgresStoreOptions, logger: Logger): OpenedStore {
  const connection = openPostgres(options);
  let care: { stop(): void } | undefined;
  return {
    store: storeOn(
      connection,
      async () => {
        // With autovacuum off the gateway vacuums and analyzes the hot tables itself.
        if (await warnIfNoAutovacuum(connection, logger)) care ??= startTableCare(connection, logger);
      },
      () => care?.stop(),
    ),
    notifier: createPgNotifier({ connection, logger }),
    leaderLock: createPgLeaderLock({ connection, logger }),
    shared: true,
  };
}

/**
 * Warns (and says true) when the server does not vacuum on its own: every job leaves two dead
 * row versions (claim, result), and with nothing removing them each claim steps over more dead
 * index entries (issue 15, docs/scaling.md "Draining a large backlog").
 *
 * @example await warnIfNoAutovacuum(connection, logger);
 */
export async function warnIfNoAutovacuum(db: Pick<PgConnection, 'query'>, logger: Pick<Logger, 'warn'>): Promise<boolean> {
  const [row] = await db.query<{ autovacuum: string }>('SHOW autovacuum');
  if (row?.autovacuum !== 'off') return false;
  logger.warn(
    'PostgreSQL autovacuum is off: the gateway vacuums and analyzes the jobs tables itself every 10 s past 10,000 changed rows; turning autovacuum on is better',
  );
  return true;
}

/** The store's parts on one connection; close sends the pending batches before the pool ends. */
function storeOn(db: PgConnection, afterMigrate: () => Promise<void> = async () => {}, beforeClose: () => void = () => {}): Store {
  const jobs = new PgJobStore(db);
  let closing: Promise<void> | undefined;
  return composeStore({
    kind: 'postgres',
    jobs,
    workers: new PgWorkerStore(db),
    endpoints: new PgEndpointStore(db),
    keys: new PgKeyStore(db),
    registry: new PgRegistryCredentialStore(db),
    usage: new PgUsageStore(db),
    minutes: new PgMinuteStore(db),
    logs: new PgLogStore(db),
    upkeep: new PgUpkeepStore(db),
    audit: new PgAuditStore(db),
    files: new PgFileStore(db),
    migrate: async () => {
      await db.migrate();
      await afterMigrate();
    },
    close: () => {
      closing ??= (async () => {
        beforeClose();
        await jobs.flush();
        await db.close();
      })();
      return closing;
    },
  });
}
