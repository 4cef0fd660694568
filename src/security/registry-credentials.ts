import { randomBytes } from 'node:crypto';
import { AppError, invalidParameter } from '../model/errors.js';
import { isObject } from '../model/json.js';
import type { RegistryCredentialRecord } from '../model/records.js';
import type { EndpointStore, RegistryCredentialStore } from '../store/store.js';
import type { SecretBox } from './secret-box.js';

/** A registry credential as the admin API lists it: never the password. */
export interface RegistryCredentialView {
  id: string;
  name: string;
  username: string;
  createdAt: string;
}

/** A login for a pull, the password opened. Only the worker pool asks for it, and never logs it. */
export interface RegistryLogin {
  username: string;
  password: string;
}

/**
 * Registry logins saved once and named by endpoints (`worker.registryCredentials`), as RunPod's
 * container registry auth: created with `{name, username, password}`, answered `{id, name}`;
 * the password is sealed with the secret box at rest and never leaves again but as a pull's
 * login. A credential still named by an endpoint cannot be deleted (409 naming them).
 */
export interface RegistryCredentials {
  create(body: unknown): Promise<{ id: string; name: string }>;
  list(): Promise<RegistryCredentialView[]>;
  /** Deletes a credential, unless there is none or endpoints still name it (the HTTP layer answers 404 and 409). */
  remove(id: string): Promise<CredentialRemoval>;
  /** The login of a credential for a pull; undefined when it was deleted. */
  login(id: string): Promise<RegistryLogin | undefined>;
}

/** What deleting a credential came to: deleted, not there, or still named by `endpoints`. */
export type CredentialRemoval = { ok: true } | { ok: false; reason: 'not-found' } | { ok: false; reason: 'in-use'; endpoints: string[] };

/** What the registry credential service uses. */
export interface RegistryCredentialDeps {
  store: RegistryCredentialStore & Pick<EndpointStore, 'listEndpoints'>;
  secrets: Pick<SecretBox, 'seal' | 'open'>;
  now(): number;
}

/** Sizes a registry login may have: tokens (GitHub, GitLab, cloud registries) run to a few KiB. */
export const REGISTRY_CREDENTIAL_LIMITS = { name: 128, username: 256, password: 8_192 } as const;
const LIMITS = REGISTRY_CREDENTIAL_LIMITS;
// eslint-disable-next-line no-control-regex
const CONTROL = /[\u0000-\u001f\u007f]/;

/** Checks `{name, username, password}`: each a non-empty string within its size, without control characters. */
function parseBody(body: unknown): { name: string; username: string; password: string } {
  if (!isObject(body)) throw new AppError('INVALID_BODY', 'Invalid request body: expected a JSON object {name, username, password}');
  for (const key of Object.keys(body)) if (!(key in LIMITS)) throw invalidParameter(key, 'is not a known field (expected name, username, password)');
  for (const field of Object.keys(LIMITS) as (keyof typeof LIMITS)[]) {
    const value = body[field];
    if (typeof value !== 'string' || value === '' || value.length > LIMITS[field]) throw invalidParameter(field, `must be a string of 1-${LIMITS[field]} characters`);
    if (CONTROL.test(value)) throw invalidParameter(field, 'must not contain control characters (U+0000-U+001F, U+007F)');
  }
  return { name: body.name as string, username: body.username as string, password: body.password as string };
}

const view = (c: RegistryCredentialRecord): RegistryCredentialView => ({ id: c.id, name: c.name, username: c.username, createdAt: new Date(c.createdAt).toISOString() });

/** @example const creds = createRegistryCredentials({ store, secrets, now: Date.now }); await creds.create({ name: 'ghcr', username: 'bot', password: token }); */
export function createRegistryCredentials(deps: RegistryCredentialDeps): RegistryCredentials {
  const { store, secrets } = deps;
  return {
    async create(body) {
      const { name, username, password } = parseBody(body);
      const id = `rc_${randomBytes(8).toString('hex')}`;
      await store.createRegistryCredential({ id, name, username, password: secrets.seal(password), createdAt: deps.now() });
      return { id, name };
    },
    async list() {
      return (await store.listRegistryCredentials()).map(view);
    },
    async remove(id) {
      if (!(await store.getRegistryCredential(id))) return { ok: false, reason: 'not-found' };
      const users = (await store.listEndpoints()).filter((e) => e.workerJson !== null && (JSON.parse(e.workerJson) as { registryCredentials?: string }).registryCredentials === id).map((e) => e.id);
      if (users.length > 0) return { ok: false, reason: 'in-use', endpoints: users };
      return (await store.deleteRegistryCredential(id)) ? { ok: true } : { ok: false, reason: 'not-found' };
    },
    async login(id) {
      const c = await store.getRegistryCredential(id);
      return c === undefined ? undefined : { username: c.username, password: secrets.open(c.password) };
    },
  };
}
