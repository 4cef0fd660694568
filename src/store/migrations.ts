import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

/**
 * Numbered, append-only schema migrations, shared by every store backend: each backend has a
 * folder `migrations/<backend>/` beside package.json holding `0001_init.sql`, `0002_....sql`,
 * with the same numbers and names for every backend.
 */
export interface Migration {
  version: number;
  /** The part of the file name after the number, e.g. `init`. */
  name: string;
  file: string;
  sql: string;
}

const MIGRATION_FILE = /^(\d{4})_([a-z0-9_]+)\.sql$/;

/**
 * The migrations of one folder, sorted by version. Throws when a `.sql` file is misnamed,
 * a number repeats, or the numbers do not run 1, 2, 3, … without a gap.
 *
 * @example listMigrations(migrationsDir('sqlite')) // [{ version: 1, name: 'init', ... }]
 */
export function listMigrations(dir: string): Migration[] {
  const migrations: Migration[] = [];
  for (const entry of readdirSync(dir)) {
    if (!entry.endsWith('.sql')) continue;
    const match = MIGRATION_FILE.exec(entry);
    if (!match) throw new Error(`migration file ${join(dir, entry)} is not named NNNN_name.sql`);
    const file = join(dir, entry);
    migrations.push({ version: Number(match[1]), name: match[2] ?? '', file, sql: readFileSync(file, 'utf8') });
  }
  migrations.sort((a, b) => a.version - b.version);
  migrations.forEach((migration, index) => {
    if (migration.version !== index + 1) {
      throw new Error(
        `migrations in ${dir} must be numbered 1, 2, 3, … without gaps or repeats; ` +
          `found ${migration.file} where version ${index + 1} was expected`,
      );
    }
  });
  if (migrations.length === 0) throw new Error(`no migrations found in ${dir}`);
  return migrations;
}

/**
 * The folder `migrations/<backend>` of this package, found by walking up from this module to
 * the directory holding package.json (so it works from src/ under vitest and from dist/src/).
 *
 * @example migrationsDir('sqlite') // '/opt/gantry/migrations/sqlite'
 */
export function migrationsDir(backend: 'sqlite' | 'postgres', from: string = import.meta.url): string {
  let dir = dirname(fileURLToPath(from));
  for (;;) {
    if (existsSync(join(dir, 'package.json'))) return join(dir, 'migrations', backend);
    const parent = dirname(dir);
    if (parent === dir) throw new Error(`no package.json above ${fileURLToPath(from)}: cannot find migrations/`);
    dir = parent;
  }
}
