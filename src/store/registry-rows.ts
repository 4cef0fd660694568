import type { RegistryCredentialRecord } from '../model/records.js';

/** A registry_credentials row as both drivers return it. */
export interface RegistryCredentialRow {
  id: string;
  name: string;
  username: string;
  password: string;
  created_at: number | string;
}

/** The registry_credentials columns in order, for INSERT lists. */
export const REGISTRY_CREDENTIAL_COLUMNS = 'id, name, username, password, created_at';

/** A credential's values in REGISTRY_CREDENTIAL_COLUMNS order. */
export function registryCredentialParams(c: RegistryCredentialRecord): [string, string, string, string, number] {
  return [c.id, c.name, c.username, c.password, c.createdAt];
}

/** A registry_credentials row (SELECT *) → RegistryCredentialRecord. */
export function toRegistryCredential(row: RegistryCredentialRow): RegistryCredentialRecord {
  return { id: row.id, name: row.name, username: row.username, password: row.password, createdAt: Number(row.created_at) };
}
