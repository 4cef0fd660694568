import { existsSync, readFileSync } from 'node:fs';
import { relative } from 'node:path';
import { describe, expect, it } from 'vitest';
import { schemaDumpFile } from '../../src/store/migrations.js';
import { dumpFreshPostgresSchema } from '../../src/store/postgres/schema-dump.js';
import { dumpFreshSqliteSchema } from '../../src/store/sqlite/schema-dump.js';
import { testDatabaseUrl } from '../helpers/postgres.js';

/**
 * The checked-in schema dumps (migrations/schema-<backend>.sql) are what the migrations build
 * on a fresh database: a migration added without its dump, or a dump changed without a
 * migration, turns this red (pg-boss's habit; docs/postgres.md, "Setup").
 */
function checkedIn(backend: 'sqlite' | 'postgres'): { file: string; text: string | undefined } {
  const file = schemaDumpFile(backend);
  return { file: relative(process.cwd(), file), text: existsSync(file) ? readFileSync(file, 'utf8') : undefined };
}

function mismatch(backend: 'sqlite' | 'postgres', file: string): string {
  return (
    `${file} is not the schema that migrations/${backend}/ builds on a fresh database. ` +
    'After adding a migration, run `npm run schema:dump` and commit the dump with it; ' +
    'never edit the dump by hand (a changed dump needs a migration that makes the change)'
  );
}

describe('checked-in schema dumps', () => {
  it('sqlite: migrations/schema-sqlite.sql matches a freshly migrated database', async () => {
    const { file, text } = checkedIn('sqlite');
    expect(text, mismatch('sqlite', file)).toBeDefined();
    expect(await dumpFreshSqliteSchema(), mismatch('sqlite', file)).toBe(text);
  });

  it('postgres: migrations/schema-postgres.sql matches a freshly migrated schema', async () => {
    const { file, text } = checkedIn('postgres');
    expect(text, mismatch('postgres', file)).toBeDefined();
    expect(await dumpFreshPostgresSchema(await testDatabaseUrl()), mismatch('postgres', file)).toBe(text);
  });
});
