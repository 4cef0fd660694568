import type { RegistryCredentialRecord } from '../../model/records.js';
import { REGISTRY_CREDENTIAL_COLUMNS, registryCredentialParams, toRegistryCredential, type RegistryCredentialRow } from '../registry-rows.js';
import type { RegistryCredentialStore } from '../store.js';
import { placeholders, type SqliteConnection } from './connection.js';

const CREATE_SQL = `INSERT INTO registry_credentials (${REGISTRY_CREDENTIAL_COLUMNS}) VALUES (${placeholders(5)})`;

/** The registry_credentials table on SQLite. */
export class SqliteRegistryCredentialStore implements RegistryCredentialStore {
  constructor(private readonly c: SqliteConnection) {}

  createRegistryCredential(credential: RegistryCredentialRecord): Promise<void> {
    return this.c.write(() => {
      this.c.q(CREATE_SQL).run(...registryCredentialParams(credential));
    });
  }

  listRegistryCredentials(): Promise<RegistryCredentialRecord[]> {
    return this.c.read(() => (this.c.q('SELECT * FROM registry_credentials ORDER BY created_at, id').all() as RegistryCredentialRow[]).map(toRegistryCredential));
  }

  getRegistryCredential(id: string): Promise<RegistryCredentialRecord | undefined> {
    return this.c.read(() => {
      const row = this.c.q('SELECT * FROM registry_credentials WHERE id = ?').get(id) as RegistryCredentialRow | undefined;
      return row === undefined ? undefined : toRegistryCredential(row);
    });
  }

  deleteRegistryCredential(id: string): Promise<boolean> {
    return this.c.write(() => this.c.q('DELETE FROM registry_credentials WHERE id = ?').run(id).changes === 1);
  }
}
