import { writeFileSync } from 'node:fs';
import { pathToFileURL } from 'node:url';
import { schemaDumpFile } from './migrations.js';
import { dumpFreshPostgresSchema } from './postgres/schema-dump.js';
import { dumpFreshSqliteSchema } from './sqlite/schema-dump.js';

/**
 * `npm run schema:dump`: migrates a fresh database of each backend and writes its normalised
 * schema to migrations/schema-sqlite.sql and migrations/schema-postgres.sql, to be committed
 * with the migration that changed them (test/conformance/schema-dump.test.ts fails until
 * they match). PostgreSQL is DATABASE_URL, else the local server at 127.0.0.1:5432 (database
 * `test`); the dump is made in a schema of its own, dropped at the end. With `--stdout` the
 * dumps are printed instead of written.
 *
 * @example npm run schema:dump            # writes both files
 * @example node dist/src/store/schema-dump.js --stdout sqlite
 */
async function main(args: string[]): Promise<void> {
  const toStdout = args.includes('--stdout');
  const named = args.filter((arg): arg is 'sqlite' | 'postgres' => arg === 'sqlite' || arg === 'postgres');
  const backends = named.length > 0 ? named : (['sqlite', 'postgres'] as const);
  const serverUrl = process.env.DATABASE_URL || 'postgres://postgres@127.0.0.1:5432/test';
  for (const backend of backends) {
    const dump = backend === 'sqlite' ? await dumpFreshSqliteSchema() : await dumpFreshPostgresSchema(serverUrl);
    if (toStdout) {
      process.stdout.write(dump);
      continue;
    }
    const file = schemaDumpFile(backend);
    writeFileSync(file, dump);
    process.stdout.write(`wrote ${file}\n`);
  }
}

if (process.argv[1] !== undefined && import.meta.url === pathToFileURL(process.argv[1]).href) {
  main(process.argv.slice(2)).catch((err: unknown) => {
    process.stderr.write(`schema:dump failed: ${err instanceof Error ? err.message : String(err)}\n`);
    process.exitCode = 1;
  });
}
