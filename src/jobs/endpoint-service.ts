import type { Notifier } from '../model/events.js';
import { invalidParameter } from '../model/errors.js';
import type { EndpointRecord, FeatureCharge, JobWithInput } from '../model/records.js';
import type { SecretBox } from '../security/secret-box.js';
import type { EndpointStore, RegistryCredentialStore } from '../store/store.js';
import { TtlCache } from '../util/ttl-cache.js';
import { parseEndpointSettings } from './endpoint-settings.js';

/** How long an endpoint's settings are cached (another gateway's change shows within this). */
const CACHE_MS = 2_000;
/** Endpoint ids remembered at most (known and unknown): requests naming random ids cannot grow memory. */
export const ENDPOINT_CACHE_MAX = 10_000;

/** What a create or update did: the endpoint as stored now, or why nothing changed. */
export type EndpointChange = { ok: true; endpoint: EndpointRecord } | { ok: false; reason: 'exists' | 'not-found'; id: string };

/**
 * What a feature adds to endpoints it owns (the public image endpoints, src/images): its own
 * input rules and its own billing. Generic layers call these without knowing the feature.
 */
export interface EndpointHooks {
  /** Checks a submitted job's input; throws a 400 AppError naming the field. Runs before any job exists. */
  validateInput?(input: Record<string, unknown>): void;
  /** What a COMPLETED job costs beyond its execution time (job-meters.ts), or null for nothing. Given the job's input. */
  chargeOf?(job: JobWithInput): FeatureCharge | null;
}

/** Endpoints: their settings (cached for reads), changes through the admin API, and feature hooks. */
export interface EndpointService {
  /** The endpoint's settings, at most CACHE_MS old; undefined when there is none. */
  get(id: string): Promise<EndpointRecord | undefined>;
  /** The endpoint's settings as stored now (no cache): what the admin API shows. */
  load(id: string): Promise<EndpointRecord | undefined>;
  list(): Promise<EndpointRecord[]>;
  /** Validates an admin API body (throws a 400 naming the field) and creates the endpoint, unless its id is taken. */
  create(settings: unknown): Promise<EndpointChange>;
  /** Validates an admin API body (throws a 400 naming the field) and changes the endpoint, if there is one. */
  update(id: string, settings: unknown): Promise<EndpointChange>;
  /** Deletes the endpoint with its jobs and workers; false when there is none. */
  remove(id: string): Promise<boolean>;
  /** Creates the endpoint when it does not exist (an operator's later changes to it are kept); true when created. */
  ensure(endpoint: EndpointRecord): Promise<boolean>;
  /** Drops the cached settings of an endpoint (another gateway changed it). */
  forget(id: string): void;
  /** Registers a feature's hooks for an endpoint (at start-up). */
  addHooks(endpointId: string, hooks: EndpointHooks): void;
  hooksOf(endpointId: string): EndpointHooks | undefined;
  /** Entries in the settings cache, known and unknown ids (at most ENDPOINT_CACHE_MAX). */
  cachedCount(): number;
}

/** What the endpoint service uses. */
export interface EndpointServiceDeps {
  /** The endpoints, and the registry credentials an image worker may name. */
  store: EndpointStore & Pick<RegistryCredentialStore, 'getRegistryCredential'>;
  notifier: Pick<Notifier, 'publish'>;
  /** Seals an endpoint's webhook signing secret for storage. */
  secrets: Pick<SecretBox, 'seal'>;
  now(): number;
}

/** @example const endpoints = createEndpointService({ store, notifier, secrets, now: Date.now }); await endpoints.create({ id: 'echo' }); */
export function createEndpointService(deps: EndpointServiceDeps): EndpointService {
  return new Endpoints(deps);
}

class Endpoints implements EndpointService {
  private readonly cache = new TtlCache<string, EndpointRecord | undefined>({ ttlMs: CACHE_MS, maxEntries: ENDPOINT_CACHE_MAX });
  private readonly hooks = new Map<string, EndpointHooks>();

  constructor(private readonly deps: EndpointServiceDeps) {}

  cachedCount(): number {
    return this.cache.size;
  }

  async get(id: string): Promise<EndpointRecord | undefined> {
    const t = this.deps.now();
    const hit = this.cache.get(id, t);
    if (hit) return hit.value;
    const endpoint = await this.deps.store.getEndpoint(id);
    this.cache.set(id, endpoint, t);
    return endpoint;
  }

  load(id: string): Promise<EndpointRecord | undefined> {
    return this.deps.store.getEndpoint(id);
  }

  list(): Promise<EndpointRecord[]> {
    return this.deps.store.listEndpoints();
  }

  async create(settings: unknown): Promise<EndpointChange> {
    const endpoint = parseEndpointSettings(settings, undefined, this.deps.now(), (plain) => this.deps.secrets.seal(plain));
    await this.checkCredentials(endpoint);
    if (!(await this.deps.store.createEndpoint(endpoint))) return { ok: false, reason: 'exists', id: endpoint.id };
    this.changed(endpoint.id);
    return { ok: true, endpoint };
  }

  async update(id: string, settings: unknown): Promise<EndpointChange> {
    const existing = await this.deps.store.getEndpoint(id);
    if (!existing) return { ok: false, reason: 'not-found', id };
    const endpoint = parseEndpointSettings(settings, existing, this.deps.now(), (plain) => this.deps.secrets.seal(plain));
    await this.checkCredentials(endpoint);
    if (!(await this.deps.store.updateEndpoint(endpoint))) return { ok: false, reason: 'not-found', id };
    this.changed(id);
    return { ok: true, endpoint };
  }

  /** An image worker's registryCredentials must name a saved credential (400 naming the field). */
  private async checkCredentials(endpoint: EndpointRecord): Promise<void> {
    const id = endpoint.workerJson === null ? undefined : (JSON.parse(endpoint.workerJson) as { registryCredentials?: string }).registryCredentials;
    if (id !== undefined && !(await this.deps.store.getRegistryCredential(id))) {
      throw invalidParameter('worker.registryCredentials', `names no saved registry credential (${id}); see GET /admin/v1/registry-credentials`);
    }
  }

  async remove(id: string): Promise<boolean> {
    const deleted = await this.deps.store.deleteEndpoint(id);
    this.changed(id);
    return deleted;
  }

  async ensure(endpoint: EndpointRecord): Promise<boolean> {
    if (await this.deps.store.getEndpoint(endpoint.id)) return false;
    const created = await this.deps.store.createEndpoint(endpoint);
    if (created) this.changed(endpoint.id);
    return created;
  }

  forget(id: string): void {
    this.cache.delete(id);
  }

  addHooks(endpointId: string, hooks: EndpointHooks): void {
    this.hooks.set(endpointId, hooks);
  }

  hooksOf(endpointId: string): EndpointHooks | undefined {
    return this.hooks.get(endpointId);
  }

  /** Every gateway drops its cached settings; the autoscaler re-reads the endpoint. */
  private changed(id: string): void {
    this.cache.delete(id);
    this.deps.notifier.publish({ type: 'endpoint-changed', endpointId: id });
  }
}
