import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import type { Database as Db } from 'better-sqlite3';
import { schemaDumpHeader } from '../migrations.js';
import { createSqliteStore } from './sqlite-store.js';

interface ColumnInfo {
  cid: number;
  name: string;
  type: string;
  notnull: number;
  dflt_value: string | null;
  pk: number;
}

interface IndexInfo {
  name: string;
  unique: number;
  origin: 'c' | 'u' | 'pk';
}

interface ForeignKeyInfo {
  id: number;
  seq: number;
  table: string;
  from: string;
  to: string;
  on_update: string;
  on_delete: string;
}

/** `'name'` quoted as an SQL string literal, for pragma arguments. */
const literal = (name: string): string => `'${name.replace(/'/g, "''")}'`;

/** One column as `name TYPE [NOT NULL] [DEFAULT x] [PRIMARY KEY]` (the last for a one-column key). */
function columnLine(column: ColumnInfo, soleKey: boolean): string {
  let line = `${column.name} ${column.type}`;
  if (column.notnull) line += ' NOT NULL';
  if (column.dflt_value !== null) line += ` DEFAULT ${column.dflt_value}`;
  if (soleKey && column.pk) line += ' PRIMARY KEY';
  return line;
}

/** The column list of an automatic index (a UNIQUE constraint's). */
function indexColumns(db: Db, index: string): string {
  const columns = db.pragma(`index_info(${literal(index)})`) as { seqno: number; name: string }[];
  return columns
    .sort((a, b) => a.seqno - b.seqno)
    .map((column) => column.name)
    .join(', ');
}

/**
 * The CHECK constraints of a CREATE TABLE statement, `CHECK (…)` with whitespace collapsed: no
 * pragma lists them, so they are cut out of its text (parentheses balanced, string literals
 * skipped).
 */
function checkConstraints(createSql: string): string[] {
  const checks: string[] = [];
  const keyword = /\bCHECK\s*\(/gi;
  for (let match = keyword.exec(createSql); match !== null; match = keyword.exec(createSql)) {
    let depth = 0;
    let quoted = false;
    let end = match.index + match[0].length - 1;
    for (; end < createSql.length; end++) {
      const ch = createSql[end];
      if (ch === "'") quoted = !quoted;
      else if (!quoted && ch === '(') depth++;
      else if (!quoted && ch === ')' && --depth === 0) break;
    }
    checks.push(`CHECK ${createSql.slice(match.index + match[0].length - 1, end + 1).replace(/\s+/g, ' ')}`);
    keyword.lastIndex = end + 1;
  }
  return checks;
}

/** The table constraints: a key of several columns, UNIQUE, CHECK and foreign-key constraints. */
function constraintLines(db: Db, table: string, columns: ColumnInfo[], indexes: IndexInfo[]): string[] {
  const lines: string[] = [];
  const key = columns.filter((column) => column.pk > 0).sort((a, b) => a.pk - b.pk);
  if (key.length > 1) lines.push(`PRIMARY KEY (${key.map((column) => column.name).join(', ')})`);
  const uniques = indexes.filter((index) => index.origin === 'u').map((index) => `UNIQUE (${indexColumns(db, index.name)})`);
  lines.push(...uniques.sort());
  const create = db.prepare("SELECT sql FROM sqlite_master WHERE type = 'table' AND name = ?").get(table) as { sql: string };
  lines.push(...checkConstraints(create.sql).sort());
  const keys = db.pragma(`foreign_key_list(${literal(table)})`) as ForeignKeyInfo[];
  for (const id of [...new Set(keys.map((fk) => fk.id))].sort((a, b) => a - b)) {
    const parts = keys.filter((fk) => fk.id === id).sort((a, b) => a.seq - b.seq);
    const first = parts[0] as ForeignKeyInfo;
    let line = `FOREIGN KEY (${parts.map((fk) => fk.from).join(', ')}) REFERENCES ${first.table} (${parts.map((fk) => fk.to).join(', ')})`;
    if (first.on_update !== 'NO ACTION') line += ` ON UPDATE ${first.on_update}`;
    if (first.on_delete !== 'NO ACTION') line += ` ON DELETE ${first.on_delete}`;
    lines.push(line);
  }
  return lines;
}

/** One table: its CREATE TABLE from the pragmas, then its own indexes (CREATE INDEX text, whitespace collapsed). */
function tableDump(db: Db, table: string, withoutRowid: boolean): string {
  const columns = (db.pragma(`table_info(${literal(table)})`) as ColumnInfo[]).sort((a, b) => a.cid - b.cid);
  const indexes = db.pragma(`index_list(${literal(table)})`) as IndexInfo[];
  const soleKey = columns.filter((column) => column.pk > 0).length === 1;
  const lines = [...columns.map((column) => columnLine(column, soleKey)), ...constraintLines(db, table, columns, indexes)];
  const created = indexes
    .filter((index) => index.origin === 'c')
    .map((index) => {
      const row = db.prepare('SELECT sql FROM sqlite_master WHERE type = ? AND name = ?').get('index', index.name) as { sql: string };
      return `${row.sql.replace(/\s+/g, ' ').trim()};`;
    })
    .sort();
  return [`CREATE TABLE ${table} (\n  ${lines.join(',\n  ')}\n)${withoutRowid ? ' WITHOUT ROWID' : ''};`, ...created].join('\n');
}

/**
 * The schema of the SQLite database at `file`, normalised and deterministic: the applied
 * migrations, then every table (by name) with its columns in order (type, NOT NULL, default,
 * key), its key, UNIQUE, CHECK and foreign-key constraints, and its indexes (by name). Read
 * from sqlite_master and the table_info / index_list / foreign_key_list pragmas.
 *
 * @example process.stdout.write(dumpSqliteSchema('data/gantry.db'))
 */
export function dumpSqliteSchema(file: string): string {
  const db = new Database(file, { readonly: true });
  try {
    const migrations = db.prepare('SELECT version, name FROM schema_migrations ORDER BY version').all() as { version: number; name: string }[];
    const tables = (db.pragma('table_list') as { schema: string; name: string; type: string; wr: number }[])
      .filter((table) => table.schema === 'main' && table.type === 'table' && !table.name.startsWith('sqlite_'))
      .sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
    const header = schemaDumpHeader('sqlite', migrations);
    return `${[header, ...tables.map((table) => tableDump(db, table.name, table.wr === 1))].join('\n\n')}\n`;
  } finally {
    db.close();
  }
}

/**
 * Migrates a new, empty SQLite database in a temporary folder and returns its dump (the
 * folder is removed): the schema that migrations/sqlite/ builds.
 */
export async function dumpFreshSqliteSchema(): Promise<string> {
  const dir = mkdtempSync(join(tmpdir(), 'gantry-schema-'));
  try {
    const file = join(dir, 'gantry.db');
    const store = createSqliteStore({ file });
    try {
      await store.migrate();
    } finally {
      await store.close();
    }
    return dumpSqliteSchema(file);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}
