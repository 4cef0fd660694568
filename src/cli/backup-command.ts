/**
 * `gantry backup FILE` and `gantry restore FILE`: a consistent copy of the SQLite store of a
 * data folder, taken while the gateway runs, and putting one back while it is stopped.
 * PostgreSQL is backed up with its own tools (pg_dump / pg_restore, docs/deploy.md).
 */
import { loadConfig } from '../config/config.js';
import { backupSqlite, restoreSqlite, sqliteFileOf } from '../store/sqlite/backup.js';
import { parseFlags, UsageError } from './args.js';
import type { Subcommand } from './subcommands.js';

const OPTIONS = { 'data-dir': { type: 'string' }, help: { type: 'boolean', short: 'h' } } as const;

const POSTGRES_REFUSAL =
  'DATABASE_URL names a PostgreSQL store, which gantry backup/restore do not copy: use ' +
  "PostgreSQL's tools (pg_dump -Fc \"$DATABASE_URL\" -f gantry.dump; pg_restore -d URL gantry.dump), see docs/deploy.md";

/** The data folder (--data-dir, else GANTRY_DATA_DIR, else ./data) and the one FILE argument. */
function target(argv: string[], what: string): { dataDir: string; file: string } {
  const { values, positionals } = parseFlags(argv, OPTIONS);
  if (positionals.length !== 1) throw new UsageError(`expected one FILE (the ${what}), got ${positionals.length} arguments`);
  if (process.env.DATABASE_URL) throw new UsageError(POSTGRES_REFUSAL);
  const dataDir = values['data-dir'] ?? loadConfig(process.env).dataDir;
  return { dataDir, file: positionals[0] ?? '' };
}

/** Prints why `command` did nothing; exit code 1. */
function refused(command: string, err: unknown): number {
  console.error(`${command}: ${err instanceof Error ? err.message : String(err)}`);
  return 1;
}

/** `gantry backup FILE`. */
export const backupCommand: Subcommand = {
  summary: 'copy the SQLite store of a running (or stopped) gateway to FILE',
  usage: `usage: gantry backup FILE [--data-dir DIR]

Copies <data dir>/gantry.db to FILE (a new file) with SQLite's online backup: the gateway may
keep running and serving; the copy is one committed state of the database, checked before it
is named FILE. The data folder is --data-dir, else GANTRY_DATA_DIR, else ./data.

The secrets in the store (webhook secrets, registry credentials) are sealed with the secret
key: keep GANTRY_SECRET_KEY, or <data dir>/secret.key, with the backup (not in the same place).
For a PostgreSQL store (DATABASE_URL) use pg_dump; see docs/deploy.md.`,
  async run(argv) {
    const { dataDir, file } = target(argv, 'backup to write');
    let info;
    try {
      info = await backupSqlite(sqliteFileOf(dataDir), file);
    } catch (err) {
      return refused('gantry backup', err);
    }
    console.log(`backed up ${sqliteFileOf(dataDir)} to ${file}: schema version ${info.schemaVersion}, ${info.jobs} jobs, ${info.bytes} bytes`);
    if (!process.env.GANTRY_SECRET_KEY) console.error(`gantry backup: keep ${dataDir}/secret.key too: the secrets in the backup open only with it`);
    return 0;
  },
};

/** `gantry restore FILE`. */
export const restoreCommand: Subcommand = {
  summary: 'put a backup made by gantry backup in place (gateway stopped)',
  usage: `usage: gantry restore FILE [--data-dir DIR]

Checks that FILE is a Gantry database (SQLite, sound, a schema this version can run: the same
or older, which the next start migrates forward), then makes it <data dir>/gantry.db. Refused
while a gateway has the data folder's database open: stop it first. The database it replaces
is kept beside it as gantry.db.before-restore-<time>. Start the gateway with the secret key
the backup was made with (GANTRY_SECRET_KEY or <data dir>/secret.key).
For a PostgreSQL store (DATABASE_URL) use pg_restore; see docs/deploy.md.`,
  run(argv) {
    const { dataDir, file } = target(argv, 'backup to restore');
    const dest = sqliteFileOf(dataDir);
    let result;
    try {
      result = restoreSqlite(file, dest, Date.now());
    } catch (err) {
      return Promise.resolve(refused('gantry restore', err));
    }
    console.log(`restored ${file} to ${dest}: schema version ${result.schemaVersion} (this version: ${result.codeSchemaVersion}), ${result.jobs} jobs`);
    if (result.previous) console.log(`the database it replaced is kept as ${result.previous}`);
    return Promise.resolve(0);
  },
};
