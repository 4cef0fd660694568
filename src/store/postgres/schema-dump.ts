import { randomBytes } from 'node:crypto';
import pg from 'pg';
import { schemaDumpHeader } from '../migrations.js';
import { createPostgresStore } from './postgres-store.js';

interface ColumnRow {
  table_name: string;
  column_name: string;
  data_type: string;
  is_nullable: 'YES' | 'NO';
  column_default: string | null;
  identity_generation: string | null;
}

interface ConstraintRow {
  table_name: string;
  name: string;
  definition: string;
}

interface IndexRow {
  tablename: string;
  indexname: string;
  indexdef: string;
}

interface OptionsRow {
  table_name: string;
  options: string[] | null;
}

// Everything is read in the schema of the connection's search_path (current_schema()), the
// one Gantry's tables live in.
const COLUMNS_SQL = `SELECT table_name, column_name, data_type, is_nullable, column_default, identity_generation
  FROM information_schema.columns
  WHERE table_schema = current_schema() AND table_name IN
    (SELECT table_name FROM information_schema.tables WHERE table_schema = current_schema() AND table_type = 'BASE TABLE')
  ORDER BY table_name, ordinal_position`;
// NOT NULL constraints are left out: PostgreSQL 18 lists them here too, and the columns show them.
const CONSTRAINTS_SQL = `SELECT t.relname AS table_name, c.conname AS name, pg_get_constraintdef(c.oid) AS definition
  FROM pg_constraint c JOIN pg_class t ON t.oid = c.conrelid
  WHERE t.relnamespace = current_schema()::regnamespace AND c.contype IN ('p', 'u', 'f', 'c', 'x')
  ORDER BY t.relname, c.conname`;
// Indexes that back a constraint are shown by the constraint.
const INDEXES_SQL = `SELECT tablename, indexname, indexdef FROM pg_indexes
  WHERE schemaname = current_schema() AND indexname NOT IN
    (SELECT conname FROM pg_constraint WHERE connamespace = current_schema()::regnamespace AND contype IN ('p', 'u', 'x'))
  ORDER BY tablename, indexname`;
const OPTIONS_SQL = `SELECT relname AS table_name, reloptions AS options FROM pg_class
  WHERE relnamespace = current_schema()::regnamespace AND relkind = 'r' ORDER BY relname`;

/** One column as `name type [NOT NULL] [DEFAULT x] [GENERATED … AS IDENTITY]`. */
function columnLine(column: ColumnRow): string {
  let line = `${column.column_name} ${column.data_type}`;
  if (column.is_nullable === 'NO') line += ' NOT NULL';
  if (column.column_default !== null) line += ` DEFAULT ${column.column_default}`;
  if (column.identity_generation !== null) line += ` GENERATED ${column.identity_generation} AS IDENTITY`;
  return line;
}

/** One table: CREATE TABLE with its columns and constraints, its storage options, its other indexes. */
function tableDump(table: string, columns: ColumnRow[], constraints: ConstraintRow[], indexes: string[], options: string[]): string {
  const lines = [
    ...columns.map(columnLine),
    ...constraints.map((constraint) => `CONSTRAINT ${constraint.name} ${constraint.definition}`),
  ];
  const parts = [`CREATE TABLE ${table} (\n  ${lines.join(',\n  ')}\n);`];
  if (options.length > 0) parts.push(`ALTER TABLE ${table} SET (${[...options].sort().join(', ')});`);
  parts.push(...indexes.map((index) => `${index};`));
  return parts.join('\n');
}

/**
 * The schema that `client`'s search_path names, normalised and deterministic: the applied
 * migrations, then every table (by name) with its columns in order (type, NOT NULL, default,
 * identity), its constraints and storage options, and its other indexes (by name, the schema
 * name taken out). Read from information_schema, pg_constraint, pg_indexes and pg_class.
 */
export async function dumpPostgresSchema(client: pg.Client): Promise<string> {
  const schema = (await client.query<{ schema: string }>('SELECT current_schema() AS schema')).rows[0]?.schema;
  if (!schema) throw new Error('no schema: the search_path names no existing schema');
  const read = async <R extends pg.QueryResultRow>(sql: string): Promise<R[]> => (await client.query<R>(sql)).rows;
  const migrations = await read<{ version: number; name: string }>('SELECT version, name FROM schema_migrations ORDER BY version');
  const [columns, constraints, indexes, options] = [
    await read<ColumnRow>(COLUMNS_SQL),
    await read<ConstraintRow>(CONSTRAINTS_SQL),
    await read<IndexRow>(INDEXES_SQL),
    await read<OptionsRow>(OPTIONS_SQL),
  ];
  const tables = [...new Set(columns.map((column) => column.table_name))];
  const unqualified = (indexdef: string): string => indexdef.split(` ON ${schema}.`).join(' ON ');
  const dumps = tables.map((table) =>
    tableDump(
      table,
      columns.filter((column) => column.table_name === table),
      constraints.filter((constraint) => constraint.table_name === table),
      indexes.filter((index) => index.tablename === table).map((index) => unqualified(index.indexdef)),
      options.find((row) => row.table_name === table)?.options ?? [],
    ),
  );
  return `${[schemaDumpHeader('postgres', migrations), ...dumps].join('\n\n')}\n`;
}

/** `url` whose connections use `schema` (search_path in the startup options). */
function withSearchPath(url: string, schema: string): string {
  const parsed = new URL(url);
  parsed.searchParams.set('options', `-c search_path=${schema}`);
  return parsed.toString();
}

/**
 * Migrates a new, empty schema on the PostgreSQL server at `serverUrl` and returns its dump
 * (the schema is dropped): the schema that migrations/postgres/ builds.
 *
 * @example await dumpFreshPostgresSchema('postgres://postgres@127.0.0.1:5432/test')
 */
export async function dumpFreshPostgresSchema(serverUrl: string): Promise<string> {
  const schema = `gantry_schema_dump_${randomBytes(6).toString('hex')}`;
  const admin = new pg.Client({ connectionString: serverUrl });
  await admin.connect();
  try {
    await admin.query(`CREATE SCHEMA ${schema}`);
    const url = withSearchPath(serverUrl, schema);
    // Two connections: migrate holds one and reads the schema name through another.
    const store = createPostgresStore({ connectionString: url, poolSize: 2 });
    try {
      await store.migrate();
    } finally {
      await store.close();
    }
    const client = new pg.Client({ connectionString: url });
    await client.connect();
    try {
      return await dumpPostgresSchema(client);
    } finally {
      await client.end();
    }
  } finally {
    await admin.query(`DROP SCHEMA IF EXISTS ${schema} CASCADE`).finally(() => admin.end());
  }
}
