import type { RegistryCredentialRecord } from '../../model/records.js';
import { REGISTRY_CREDENTIAL_COLUMNS, registryCredentialParams, toRegistryCredential, type RegistryCredentialRow } from '../registry-rows.js';
import type { RegistryCredentialStore } from '../store.js';
import type { PgConnection } from './connection.js';

/** The registry_credentials table on PostgreSQL. */
export class PgRegistryCredentialStore implements RegistryCredentialStore {
  constructor(private readonly db: PgConnection) {}

  async createRegistryCredential(credential: RegistryCredentialRecord): Promise<void> {
    await this.db.query(`INSERT INTO registry_credentials (${REGISTRY_CREDENTIAL_COLUMNS}) VALUES ($1, $2, $3, $4, $5)`, registryCredentialParams(credential));
  }

  async listRegistryCredentials(): Promise<RegistryCredentialRecord[]> {
    return (await this.db.query<RegistryCredentialRow>('SELECT * FROM registry_credentials ORDER BY created_at, id')).map(toRegistryCredential);
  }

  async getRegistryCredential(id: string): Promise<RegistryCredentialRecord | undefined> {
    const row = (await this.db.query<RegistryCredentialRow>('SELECT * FROM registry_credentials WHERE id = $1', [id]))[0];
    return row === undefined ? undefined : toRegistryCredential(row);
  }

  async deleteRegistryCredential(id: string): Promise<boolean> {
    return (await this.db.query('DELETE FROM registry_credentials WHERE id = $1 RETURNING 1', [id])).length === 1;
  }
}
