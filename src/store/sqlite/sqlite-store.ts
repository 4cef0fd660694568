import type { Logger } from 'pino';
import type { Clock } from '../../util/clock.js';
import { composeStore } from '../compose-store.js';
import { createLocalNotifier } from '../local-notifier.js';
import { createSoleLeader } from '../sole-leader.js';
import type { OpenedStore, Store } from '../store.js';
import { openSqlite } from './connection.js';
import { SqliteEndpointStore } from './endpoints.js';
import { SqliteFileStore } from './files.js';
import { SqliteJobStore } from './jobs.js';
import { createInputFiles, inputFilesDirOf, SWEEP_EVERY_MS } from './input-files.js';
import { periodic } from '../../util/periodic.js';
import { systemClock } from '../../util/clock.js';
import { SqliteKeyStore } from './keys.js';
import { SqliteRegistryCredentialStore } from './registry-credentials.js';
import { SqliteUsageStore } from './usage.js';
import { SqliteMinuteStore } from './minutes.js';
import { SqliteLogStore } from './logs.js';
import { SqliteUpkeepStore } from './upkeep.js';
import { SqliteWorkerStore } from './workers.js';
import { SqliteAuditStore } from './audit.js';

/** The database file and how its WAL is checkpointed. */
export interface SqliteStoreOptions {
  /** Path of the database file; its folder is created when missing. */
  file: string;
  /** WAL checkpoints from a worker thread instead of inside commits (see checkpointer.ts). */
  backgroundCheckpoint?: boolean;
  /** WAL size past which the background checkpointer truncates it (default 32 MB, checkpointer.ts). */
  walLimitBytes?: number;
  /**
   * The gateway's upkeep of the file: free pages given back in the background (free-pages.ts),
   * and the files of large inputs whose job is gone deleted (input-files.ts), said in this log.
   */
  upkeep?: { logger: Logger; clock: Clock };
}

/**
 * A Store on one SQLite file through better-sqlite3, one part a table group (jobs.ts,
 * workers.ts, endpoints.ts, keys.ts, usage.ts) on one connection. Writes of one event-loop
 * turn share one transaction (group commit, see connection.ts): each runs at once, so reads
 * later in the same turn see it, and its promise settles after the turn's COMMIT.
 *
 * @example
 * const store = createSqliteStore({ file: 'data/gantry.db' });
 * await store.migrate();
 */
export function createSqliteStore(options: SqliteStoreOptions): Store {
  const connection = openSqlite(options.file, {
    backgroundCheckpoint: options.backgroundCheckpoint ?? false,
    ...(options.walLimitBytes === undefined ? {} : { walLimitBytes: options.walLimitBytes }),
    ...(options.upkeep ? { upkeep: options.upkeep } : {}),
  });
  const inputs = options.file === ':memory:' ? undefined : createInputFiles(inputFilesDirOf(options.file), (options.upkeep?.clock ?? systemClock).now);
  const jobs = new SqliteJobStore(connection, inputs);
  const sweep = options.upkeep
    ? periodic({ name: 'input-file sweep', everyMs: SWEEP_EVERY_MS, pass: async () => void (await jobs.sweepInputFiles()), logger: options.upkeep.logger, clock: options.upkeep.clock })
    : undefined;
  sweep?.start();
  return composeStore({
    kind: 'sqlite',
    jobs,
    workers: new SqliteWorkerStore(connection),
    endpoints: new SqliteEndpointStore(connection),
    keys: new SqliteKeyStore(connection),
    registry: new SqliteRegistryCredentialStore(connection),
    usage: new SqliteUsageStore(connection),
    minutes: new SqliteMinuteStore(connection),
    logs: new SqliteLogStore(connection),
    upkeep: new SqliteUpkeepStore(connection),
    audit: new SqliteAuditStore(connection),
    files: new SqliteFileStore(connection),
    migrate: async () => connection.migrate(),
    close: async () => {
      await sweep?.stop();
      await connection.stopCheckpointer();
      connection.close();
    },
  });
}

/**
 * A gateway's store on SQLite and what goes with it: the gateway is alone on the file, so
 * events stay in the process (local notifier) and it always leads.
 *
 * @example const { store, notifier, leaderLock } = openSqliteStore({ file: 'data/gantry.db', backgroundCheckpoint: true });
 */
export function openSqliteStore(options: SqliteStoreOptions): OpenedStore {
  return { store: createSqliteStore(options), notifier: createLocalNotifier(), leaderLock: createSoleLeader(), shared: false };
}
