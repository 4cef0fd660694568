import { closeSync, copyFileSync, existsSync, fsyncSync, openSync, readFileSync, renameSync, rmSync, statSync } from 'node:fs';
import { dirname, join } from 'node:path';
import Database from 'better-sqlite3';
import { checkLedger, listMigrations, migrationsDir } from '../migrations.js';
import { INPUT_IN_FILE, inputFilesDirOf } from './input-files.js';

/**
 * Backups and restores of the SQLite store (`gantry backup`, `gantry restore`, docs/deploy.md).
 * The copy is SQLite's online backup: it reads the live file in read transactions, which in WAL
 * mode never block the gateway's writers, and restarts by itself when a write lands between two
 * of its steps, so what it writes is one committed state of the database. Inputs the gateway
 * keeps in files (input-files.ts) are put into the copy's rows, so a backup is one file.
 */

/** What a backup file holds, read before it is trusted. */
export interface SqliteBackupInfo {
  /** The last migration applied (the ledger's highest version). */
  schemaVersion: number;
  /** The migrations of this code: a backup at a lower version migrates forward on start. */
  codeSchemaVersion: number;
  jobs: number;
  bytes: number;
}

/** The database file of a data folder (the store of open-store.ts). */
export function sqliteFileOf(dataDir: string): string {
  return join(dataDir, 'gantry.db');
}

/**
 * Copies the live database `source` to `dest` (a new file) with SQLite's online backup, then
 * checks the copy. After the first step the rest goes in one step: small steps would restart
 * at every write of a busy gateway and might never end.
 *
 * @example const info = await backupSqlite('/data/gantry.db', '/backups/gantry-2026-11-27.db');
 */
export async function backupSqlite(source: string, dest: string): Promise<SqliteBackupInfo> {
  if (!existsSync(source)) throw new Error(`no database at ${source} (is the data folder right?)`);
  if (existsSync(dest)) throw new Error(`${dest} exists; name a new file`);
  const partial = `${dest}.partial`;
  rmSync(partial, { force: true });
  const db = new Database(source, { fileMustExist: true });
  try {
    db.pragma('busy_timeout = 5000');
    await db.backup(partial, { progress: ({ totalPages }) => totalPages });
  } catch (err) {
    rmSync(partial, { force: true });
    throw err;
  } finally {
    db.close();
  }
  try {
    inlineInputFiles(partial, inputFilesDirOf(source));
    const info = inspectSqliteBackup(partial);
    syncFile(partial);
    renameSync(partial, dest);
    return info;
  } catch (err) {
    rmSync(partial, { force: true });
    throw err;
  }
}

/**
 * Puts into the copy `file` the text of each input kept in a file of `dir`, one at a time. A file
 * that is gone belongs to a job deleted since the copy was taken (only the sweep deletes them,
 * once their row is gone): that job is left out of the copy too.
 */
function inlineInputFiles(file: string, dir: string): void {
  const db = new Database(file, { fileMustExist: true });
  try {
    const inFiles = db.prepare('SELECT job_id FROM job_inputs WHERE input_json = ?').pluck(true).all(INPUT_IN_FILE) as string[];
    const update = db.prepare('UPDATE job_inputs SET input_json = ? WHERE job_id = ?');
    const drop = db.prepare('DELETE FROM jobs WHERE id = ?');
    for (const id of inFiles) {
      let text: string | undefined;
      try {
        text = readFileSync(join(dir, `${id}.json`), 'utf8');
      } catch (err) {
        if ((err as NodeJS.ErrnoException).code !== 'ENOENT') throw err;
      }
      if (text === undefined) drop.run(id);
      else update.run(text, id);
    }
    if (inFiles.length > 0) db.pragma('wal_checkpoint(TRUNCATE)');
  } finally {
    db.close();
  }
}

/**
 * Checks that `file` is a sound Gantry database this code can open: a SQLite file whose
 * integrity check passes, with a migration ledger that is not newer than this code's
 * migrations. Throws a message that says which check failed.
 */
export function inspectSqliteBackup(file: string): SqliteBackupInfo {
  if (!existsSync(file)) throw new Error(`${file} does not exist`);
  let db: Database.Database;
  try {
    db = new Database(file, { readonly: true, fileMustExist: true });
  } catch (err) {
    throw new Error(`${file} cannot be opened as a SQLite database: ${(err as Error).message}`);
  }
  try {
    let ok: unknown;
    try {
      ok = db.pragma('quick_check', { simple: true });
    } catch (err) {
      throw new Error(`${file} is not a SQLite database (${(err as Error).message})`);
    }
    if (ok !== 'ok') throw new Error(`${file} fails SQLite's integrity check: ${String(ok)}`);
    const ledger = db.prepare("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'schema_migrations'").get();
    if (!ledger) throw new Error(`${file} is a SQLite database but not a Gantry one (it has no schema_migrations table)`);
    const applied = db.prepare('SELECT version, name FROM schema_migrations ORDER BY version').all() as { version: number; name: string }[];
    const migrations = listMigrations(migrationsDir('sqlite'));
    checkLedger(applied, migrations, `backup ${file}`);
    const jobs = (db.prepare('SELECT count(*) AS n FROM jobs').get() as { n: number }).n;
    return { schemaVersion: applied.at(-1)?.version ?? 0, codeSchemaVersion: migrations.length, jobs, bytes: statSync(file).size };
  } finally {
    db.close();
  }
}

/**
 * Whether a process has `file` open: a gateway holds a shared lock on its database from start
 * to exit, so an exclusive lock taken without waiting fails exactly while one runs. (It also
 * folds a WAL left by a crash into the file, which a restore moves aside whole.)
 */
export function sqliteInUse(file: string): boolean {
  if (!existsSync(file)) return false;
  const db = new Database(file, { fileMustExist: true, timeout: 0 });
  try {
    db.pragma('locking_mode = EXCLUSIVE');
    db.exec('BEGIN EXCLUSIVE');
    db.exec('COMMIT');
    return false;
  } catch (err) {
    if ((err as { code?: string }).code === 'SQLITE_BUSY') return true;
    throw err;
  } finally {
    db.close();
  }
}

/** What a restore did: the checked backup, and where the database it replaced went (if any). */
export interface SqliteRestoreResult extends SqliteBackupInfo {
  previous?: string;
}

/**
 * Puts the backup `file` in place as the database `target` of a stopped gateway: refuses when
 * a process has `target` open or `file` fails inspectSqliteBackup; the database it replaces is
 * kept beside it as `<target>.before-restore-<time>`. The next start migrates it forward if the
 * backup is of an older release.
 *
 * @example restoreSqlite('/backups/gantry-2026-11-27.db', '/data/gantry.db', Date.now())
 */
export function restoreSqlite(file: string, target: string, now: number): SqliteRestoreResult {
  const info = inspectSqliteBackup(file);
  if (sqliteInUse(target)) {
    throw new Error(`${target} is in use (a gateway is running on this data folder?): stop it, then restore`);
  }
  const incoming = `${target}.restoring`;
  copyFileSync(file, incoming);
  syncFile(incoming);
  let previous: string | undefined;
  if (existsSync(target)) {
    previous = `${target}.before-restore-${new Date(now).toISOString().replace(/[:.]/g, '-')}`;
    renameSync(target, previous);
  }
  // A WAL or shared-memory file left beside the old database must not be read as the new one's.
  for (const suffix of ['-wal', '-shm']) {
    if (existsSync(target + suffix)) {
      if (previous) renameSync(target + suffix, previous + suffix);
      else rmSync(target + suffix);
    }
  }
  // The backup holds every input in its rows; the files of the replaced database go with it.
  const inputs = inputFilesDirOf(target);
  if (previous && existsSync(inputs)) renameSync(inputs, `${previous}-job-inputs`);
  renameSync(incoming, target);
  syncFile(dirname(target));
  return { ...info, ...(previous ? { previous } : {}) };
}

/** fsync: the file's bytes (or a folder's entries) on disk before it is named or trusted. */
function syncFile(path: string): void {
  const fd = openSync(path, 'r');
  try {
    fsyncSync(fd);
  } finally {
    closeSync(fd);
  }
}
