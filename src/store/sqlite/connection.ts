import { mkdirSync, statfsSync, statSync } from 'node:fs';
import { dirname } from 'node:path';
import Database from 'better-sqlite3';
import type { Database as Db, Statement } from 'better-sqlite3';
import type { Logger } from 'pino';
import type { Clock } from '../../util/clock.js';
import { checkLedger, listMigrations, migrationsDir } from '../migrations.js';
import { DEFAULT_WAL_LIMIT_BYTES, startCheckpointer, type CheckpointStep } from './checkpointer.js';
import { startFreePageReclaimer, type FreePageReclaimer } from './free-pages.js';

/**
 * One better-sqlite3 connection with the group commit of docs/architecture.md "The hot path": all writes issued in one
 * event-loop turn share one transaction. The first write of a turn runs BEGIN IMMEDIATE and
 * schedules the COMMIT with setImmediate; each write runs its statements at once (so reads later
 * in the same turn see them) and its promise settles after that COMMIT.
 */
export interface SqliteConnection {
  readonly db: Db;
  /** The prepared statement for `sql`, prepared once on first use (tables exist only after migrate). */
  q(sql: string): Statement;
  /**
   * Runs `work` now inside this turn's transaction and resolves with its result after COMMIT.
   * Work of several statements must be a db.transaction function (a SAVEPOINT inside the
   * group transaction) so that a failure leaves nothing half-done; a failing write rejects only
   * itself, unless SQLite rolled back the whole transaction.
   */
  write<T>(work: () => T): Promise<T>;
  /** Runs `work` now (it sees this turn's uncommitted writes). */
  read<T>(work: () => T): Promise<T>;
  /** Applies pending migrations, each in its own transaction with a ledger row. */
  migrate(): void;
  /** Commits what is pending and closes; a second call does nothing. */
  close(): void;
  /** Resolves once the background checkpointer and free-page reclaimer (if any) have stopped; call before close(). */
  stopCheckpointer(): Promise<void>;
  /** One step of the background checkpointer now (undefined without one): tests and tools. */
  checkpointNow(): Promise<CheckpointStep | undefined>;
  /** Rows were deleted: the free-page reclaimer (if any) looks at the file soon. */
  pagesFreed(): void;
  /** Gives the free pages past FREE_PAGES_KEPT back now (0 without a reclaimer); the pages given back. Tests and tools. */
  reclaimNow(): Promise<number>;
}

/** How a connection is opened. */
export interface SqliteOpenOptions {
  /** Checkpoint the WAL from a worker thread instead of inside commits (the gateway sets this). */
  backgroundCheckpoint?: boolean;
  /** Time between background checkpoint steps; 0: only on checkpointNow. Default 50 ms. */
  checkpointIntervalMs?: number;
  /** WAL size past which the background checkpointer truncates it (also journal_size_limit). */
  walLimitBytes?: number;
  /**
   * The gateway's upkeep of the file: free pages given back in the background (free-pages.ts),
   * and the one-time conversion to incremental auto-vacuum at migrate said in the log.
   */
  upkeep?: { logger: Pick<Logger, 'info' | 'warn' | 'error' | 'debug'>; clock: Clock };
}

/**
 * `?, ?, …`: the placeholders of `n` positional parameters.
 *
 * @example `INSERT INTO t (a, b) VALUES (${placeholders(2)})` // VALUES (?, ?)
 */
export function placeholders(n: number): string {
  return Array.from({ length: n }, () => '?').join(', ');
}

interface Waiter {
  resolve: () => void;
  reject: (err: unknown) => void;
}

/** The group commit of one connection (see SqliteConnection): write, and what close and migrate need. */
interface GroupCommit {
  write<T>(work: () => T): Promise<T>;
  /** Commits the open group transaction now, if any (before a migration or close). */
  commitNow(): void;
  /** Commits what is pending; later writes are refused. */
  close(): void;
}

/**
 * All writes of one event-loop turn in one transaction: the first write of a turn runs BEGIN
 * IMMEDIATE and schedules the COMMIT with setImmediate; each write runs at once and its
 * promise settles after that COMMIT (or rejects with it).
 */
function createGroupCommit(db: Db): GroupCommit {
  let closed = false;
  /** Waiters of the open group transaction; null when none is open. */
  let batch: Waiter[] | null = null;

  const flush = (waiters: Waiter[]): void => {
    if (batch !== waiters) return; // already committed by close/migrate, or lost to a rollback
    batch = null;
    try {
      db.exec('COMMIT');
    } catch (err) {
      if (db.inTransaction) db.exec('ROLLBACK');
      for (const waiter of waiters) waiter.reject(err);
      return;
    }
    for (const waiter of waiters) waiter.resolve();
  };

  const write = <T>(work: () => T): Promise<T> => {
    if (closed) return Promise.reject(new Error('store is closed'));
    try {
      if (batch === null) {
        db.exec('BEGIN IMMEDIATE');
        const waiters: Waiter[] = [];
        batch = waiters;
        setImmediate(() => flush(waiters));
      }
      const value = work();
      const waiters = batch;
      return new Promise<T>((resolve, reject) => waiters.push({ resolve: () => resolve(value), reject }));
    } catch (err) {
      // Some errors (disk full, I/O) make SQLite roll the whole transaction back: the batch is lost.
      if (batch !== null && !db.inTransaction) {
        const lost = batch;
        batch = null;
        for (const waiter of lost) waiter.reject(err);
      }
      return Promise.reject(err);
    }
  };

  const commitNow = (): void => {
    if (batch !== null) flush(batch);
  };

  return {
    write,
    commitNow,
    close: () => {
      commitNow();
      closed = true;
    },
  };
}

/**
 * Applies the pending migrations of migrations/sqlite/ to `db`, each in its own IMMEDIATE
 * transaction with its ledger row; refuses a database whose ledger does not fit this code.
 */
function migrateSqlite(db: Db, file: string): void {
  const migrations = listMigrations(migrationsDir('sqlite'));
  db.exec(`CREATE TABLE IF NOT EXISTS schema_migrations (
    version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at INTEGER NOT NULL)`);
  const applied = db.prepare('SELECT version, name FROM schema_migrations ORDER BY version').all() as {
    version: number;
    name: string;
  }[];
  checkLedger(applied, migrations, `database ${file}`);
  const done = new Set(applied.map((row) => row.version));
  const isApplied = db.prepare('SELECT 1 FROM schema_migrations WHERE version = ?');
  const record = db.prepare('INSERT INTO schema_migrations (version, name, applied_at) VALUES (?, ?, ?)');
  for (const migration of migrations) {
    if (done.has(migration.version)) continue;
    db.transaction(() => {
      // Checked again under the write lock: another process may have just applied it.
      if (isApplied.get(migration.version) !== undefined) return;
      db.exec(migration.sql);
      record.run(migration.version, migration.name, Date.now());
    }).immediate();
  }
}

/**
 * A file made before incremental auto-vacuum (auto_vacuum NONE) is converted once: the mode can
 * change only by a VACUUM, which rewrites the live rows into a new file (time and a WAL about
 * the size of the live data; the free pages cost nothing). Skipped, with a warning, while the
 * disk has less free space than twice the live data; the next start tries again.
 */
function convertToIncrementalVacuum(db: Db, file: string, logger: Pick<Logger, 'info' | 'warn'> | undefined): void {
  if ((db.pragma('auto_vacuum', { simple: true }) as number) === 2) return;
  const bytes = statSync(file).size;
  const pages = (db.pragma('page_count', { simple: true }) as number) - (db.pragma('freelist_count', { simple: true }) as number);
  const live = pages * (db.pragma('page_size', { simple: true }) as number);
  const fs = statfsSync(dirname(file));
  const free = fs.bavail * fs.bsize;
  // The VACUUM writes the live pages twice: into a temporary copy, then into the WAL.
  if (free < 2 * live) {
    logger?.warn({ file, bytes, liveBytes: live, freeBytes: free }, 'SQLite file not converted to incremental auto-vacuum (too little free disk for its one VACUUM): free pages are not given back');
    return;
  }
  const began = Date.now();
  db.pragma('auto_vacuum = INCREMENTAL');
  db.exec('VACUUM');
  logger?.info({ file, bytesBefore: bytes, bytesAfter: statSync(file).size, ms: Date.now() - began }, 'SQLite file converted to incremental auto-vacuum (once): free pages are given back from now on');
}

/** Opens `file` (creating it and its folder when missing) with the settings of a busy queue. */
function openDatabase(file: string): Db {
  mkdirSync(dirname(file), { recursive: true });
  const db = new Database(file);
  // Takes effect in a new file (set before its first table); older files are converted at migrate.
  db.pragma('auto_vacuum = INCREMENTAL');
  db.pragma('journal_mode = WAL');
  db.pragma('synchronous = NORMAL');
  db.pragma('foreign_keys = ON');
  db.pragma('busy_timeout = 5000');
  // 64 MB of page cache: the hot indexes of a busy queue stay in memory.
  db.pragma('cache_size = -65536');
  return db;
}

/**
 * Opens (creating the folder and file when missing) the database at `file`.
 *
 * @example const c = openSqlite('data/gantry.db'); c.migrate(); await c.write(() => c.q('DELETE FROM workers').run());
 */
export function openSqlite(file: string, options: SqliteOpenOptions = {}): SqliteConnection {
  const db = openDatabase(file);
  const walLimitBytes = options.walLimitBytes ?? DEFAULT_WAL_LIMIT_BYTES;
  const checkpointer = options.backgroundCheckpoint
    ? startCheckpointer(file, { walLimitBytes, ...(options.checkpointIntervalMs === undefined ? {} : { intervalMs: options.checkpointIntervalMs }) })
    : undefined;
  if (checkpointer) {
    db.pragma('wal_autocheckpoint = 0');
    // When the WAL starts over, the next commit cuts the file back to this size (issue 15).
    db.pragma(`journal_size_limit = ${walLimitBytes}`);
  }
  const commits = createGroupCommit(db);
  const statements = new Map<string, Statement>();
  let closed = false;
  let reclaimer: FreePageReclaimer | undefined;

  const q = (sql: string): Statement => {
    let statement = statements.get(sql);
    if (!statement) {
      statement = db.prepare(sql);
      statements.set(sql, statement);
    }
    return statement;
  };

  const read = <T>(work: () => T): Promise<T> => {
    if (closed) return Promise.reject(new Error('store is closed'));
    try {
      return Promise.resolve(work());
    } catch (err) {
      return Promise.reject(err);
    }
  };

  const migrate = (): void => {
    if (closed) throw new Error('store is closed');
    commits.commitNow();
    migrateSqlite(db, file);
    convertToIncrementalVacuum(db, file, options.upkeep?.logger);
    if (options.upkeep && !reclaimer) reclaimer = startFreePageReclaimer({ db, write: commits.write }, options.upkeep.logger, options.upkeep.clock);
  };

  const close = (): void => {
    if (closed) return;
    commits.close();
    closed = true;
    if (checkpointer) db.pragma('wal_checkpoint(TRUNCATE)');
    db.close();
  };

  return {
    db,
    q,
    write: commits.write,
    read,
    migrate,
    close,
    stopCheckpointer: async () => {
      await reclaimer?.stop();
      await checkpointer?.stop();
    },
    checkpointNow: async () => checkpointer?.runNow(),
    pagesFreed: () => reclaimer?.kick(),
    reclaimNow: async () => (reclaimer ? reclaimer.runNow() : 0),
  };
}
