import { describe, expect, it } from 'vitest';
import { listMigrations, migrationsDir } from '../../src/store/migrations.js';

// The same numbered migrations for every backend (docs/postgres.md, "Setup"): a schema change made for one
// backend and forgotten for the other turns this red.
describe('migrations of the backends', () => {
  it('sqlite and postgres have the same versions and names', () => {
    const names = (backend: 'sqlite' | 'postgres') => listMigrations(migrationsDir(backend)).map((m) => `${m.version}_${m.name}`);
    expect(names('postgres')).toEqual(names('sqlite'));
  });
});
