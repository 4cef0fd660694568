/**
 * A typed client of the gateway's admin API (`/admin/v1/...`): API keys, registry credentials,
 * endpoints, their workers and logs, and usage (`gantry/admin`).
 * Used by the `gantry keys` / `gantry endpoints` commands and meant for the console too.
 * It only needs the global `fetch`, so it runs in Node 20+ and in browsers.
 */

/** What an API key may do. */
export type Scope = 'admin' | 'run' | 'read' | 'worker';
export const SCOPES: readonly Scope[] = ['admin', 'run', 'read', 'worker'];

/** How the autoscaler sizes an endpoint's pool. */
export type ScalerType = 'QUEUE_DELAY' | 'REQUEST_COUNT';
export const SCALER_TYPES: readonly ScalerType[] = ['QUEUE_DELAY', 'REQUEST_COUNT'];

/** An API key as listed; the key itself is never returned after creation. */
export interface ApiKeyInfo {
  id: string;
  name: string;
  scopes: Scope[];
  /** Endpoint ids the key is limited to; null (or absent) for all endpoints. */
  endpoints: string[] | null;
  /** Epoch milliseconds (or an ISO string, as the server sends it). */
  createdAt: number | string;
  /** USD the key may spend per budgetPeriod; null: no budget. */
  budgetUsd?: number | null;
  budgetPeriod?: 'day' | 'month' | null;
  /** Queued + running jobs the key may have at once; null: no cap. */
  maxConcurrentJobs?: number | null;
  /** The spend in the current budget period (listing and PATCH answers), null without a budget. */
  budget?: KeyBudget | null;
  /** The key's first 8 characters, to recognise it by; null for keys made before they were kept. */
  prefix?: string | null;
  /** ISO 8601: when a request last used it (written at most once a minute per gateway); null: not since. */
  lastUsedAt?: string | null;
  /** A pool worker's own key, made and revoked by the gateway: deleteKey needs `force`. */
  managed?: boolean;
}

/** A key's spend against its budget in the current period (decimal USD text). */
export interface KeyBudget {
  budgetUsd: string;
  budgetPeriod: 'day' | 'month';
  spentUsd: string;
  /** ISO 8601: when the period ends and the spend starts again from 0. */
  resetsAt: string;
}

/** The body of PATCH /admin/v1/keys/{id}: a field left out keeps its value, null clears it. */
export interface KeyLimits {
  /** USD (a number or decimal text, at most 10 decimals) per budgetPeriod. */
  budgetUsd?: number | string | null;
  budgetPeriod?: 'day' | 'month' | null;
  maxConcurrentJobs?: number | null;
}

/** A freshly created key: the only time `key` is shown. */
export interface CreatedApiKey extends ApiKeyInfo {
  key: string;
}

/** The body of POST /admin/v1/keys. */
export interface CreateKeyRequest {
  name: string;
  scopes: Scope[];
  endpoints?: string[];
}

/** A saved registry login as listed: never the password. */
export interface RegistryCredentialInfo {
  /** `rc_…`: what an endpoint's `worker.registryCredentials` names. */
  id: string;
  name: string;
  username: string;
  createdAt: string;
}

/** The body of POST /admin/v1/registry-credentials. */
export interface CreateRegistryCredentialRequest {
  /** What the login is for (1–128 characters). */
  name: string;
  username: string;
  /** The password or access token; sealed at rest and never answered. */
  password: string;
}

/** A worker the autoscaler starts as a local process: `command` through the shell. */
export interface ProcessWorkerSpec {
  command: string;
  env?: Record<string, string>;
  cwd?: string;
}

/**
 * A worker run as a container of `image` on a Docker host: `command` overrides the image's CMD,
 * `gpus` is a count or exact device ids, `memoryMb` a hard limit, `volumes` binds
 * (`source:target[:ro]`).
 */
export interface ContainerWorkerSpec {
  image: string;
  command?: string | string[];
  env?: Record<string, string>;
  gpus?: number | string[];
  /** For a count: the acceptable GPU models, most preferred first. */
  gpuTypes?: string[];
  memoryMb?: number;
  volumes?: string[];
  /** A saved registry credential's id (`rc_…`): the image is pulled with it onto hosts that lack it. */
  registryCredentials?: string;
  /** Pull the image onto every host that could run it, in the background, when set or when the image changes. */
  prepull?: boolean;
}

/** How the autoscaler starts an endpoint's workers: a local command, or a container image. */
export type WorkerSpec = ProcessWorkerSpec | ContainerWorkerSpec;

/** The settings of an endpoint that can be set at creation or changed later. */
export interface EndpointSettings {
  name?: string;
  workersMin?: number;
  workersMax?: number;
  /** Seconds a started worker may sit idle before it is stopped. */
  idleTimeout?: number;
  executionTimeoutMs?: number;
  scalerType?: ScalerType;
  scalerValue?: number;
  maxAttempts?: number;
  /** null removes the worker command (workers are then connected by hand). */
  worker?: WorkerSpec | null;
  /** Standard Webhooks secret (`whsec_…`) that signs the endpoint's webhook calls; null removes it. */
  webhookSecret?: string | null;
  /** This endpoint's rate limits: "off", limits per operation over the defaults, or null for the defaults. */
  rateLimits?: EndpointRateLimits | null;
  /** USD per second of execution (at most 10 decimals; a number or decimal text); null: metered, not priced. */
  pricePerSecond?: number | string | null;
}

/** Per-operation limits of one endpoint (`run`, `runsync`, `status`, `long-poll`, `cancel`, `purge-queue`, `requests`, `openai`), or "off". */
export type EndpointRateLimits = 'off' | Record<string, 'off' | { per10s?: number; concurrent?: number }>;

/** The body of POST /admin/v1/endpoints. */
export interface CreateEndpointRequest extends EndpointSettings {
  id: string;
}

/** An endpoint as the admin API shows it. */
export interface Endpoint {
  id: string;
  name: string;
  workersMin: number;
  workersMax: number;
  idleTimeout: number;
  executionTimeoutMs: number;
  scalerType: ScalerType;
  scalerValue: number;
  maxAttempts: number;
  worker: WorkerSpec | null;
  /** Whether webhook calls are signed (the secret itself is never shown). */
  webhookSigning?: boolean;
  /** The endpoint's own rate limits; null: the gateway's defaults. */
  rateLimits?: EndpointRateLimits | null;
  /** USD per second of execution; null when not priced by time. */
  pricePerSecond?: number | null;
  createdAt: number | string;
  updatedAt: number | string;
}

/** A worker of an endpoint as `GET /admin/v1/endpoints/{id}/workers` lists it. */
export interface EndpointWorker {
  id: string;
  /** initializing, idle, running, draining, throttled, unhealthy, or stopped (gone; its log is kept for a while). */
  state: string;
  /** true: started by Gantry's worker pool; false: connected by hand. */
  managed: boolean;
  /** Jobs it holds. */
  jobs: number;
  reason: string | null;
  /** Pool workers: what a start is doing while it takes a while (`pulling 43%`), else null. */
  progress?: string | null;
  /** Pool workers only. */
  pid?: number | null;
  /** Container workers: the Docker host it runs on and its container id (12 hex). */
  host?: string | null;
  container?: string | null;
  startedAt?: string | null;
  readyAt?: string | null;
  restarts?: number;
  restartAt?: string | null;
  /** Pool workers: how the last process ended, and when a stopped one stopped. */
  lastExit?: string | null;
  stoppedAt?: string | null;
  /** Workers connected by hand only. */
  lastSeenAt?: string;
}

/** A Docker host of the worker pool as `GET /admin/v1/endpoints/{id}/workers` lists it. */
export interface WorkerHost {
  name: string;
  /** The engine URL (no credentials). */
  url: string;
  /** up, down, or unknown (not checked yet). */
  state: string;
  /** e.g. `Docker Engine 20.10.24`; null until the engine said. */
  engine: string | null;
  gpus: number;
  gpusInUse: number;
  /** Containers of the gateway on it, of every endpoint. */
  workers: number;
  /** This endpoint's workers on it. */
  endpointWorkers: number;
  /** The last failed health check, while not up. */
  error: string | null;
  lastSeenAt: string | null;
}

/** `GET /admin/v1/endpoints/{id}/workers` whole: the workers, and the Docker hosts of the pool. */
export interface WorkerListing {
  endpointId: string;
  /** Whether the gateway asked runs the pool (with several gateways only the leader does; the others list no hosts). */
  pool: boolean;
  workers: EndpointWorker[];
  hosts: WorkerHost[];
}

/** One line of a pool worker's log. */
export interface WorkerLogLine {
  at: string;
  /** stdout, stderr, or gantry (the pool's own notes: started, exited, stopping). */
  stream: string;
  line: string;
}

/** One row of a usage report: its groups (those asked for) and what was used and spent. */
export interface UsageLine {
  /** UTC day (YYYY-MM-DD), when grouped by day. */
  day?: string;
  /** The key id, when grouped by key; null for jobs without a key. */
  key?: string | null;
  /** The key's name; null for jobs without a key or a deleted key. */
  keyName?: string | null;
  endpoint?: string;
  jobs: number;
  executionSeconds: number;
  /** Pool worker seconds (start to stop); null in rows grouped by key. */
  workerSeconds: number | null;
  gpuSeconds: number | null;
  megapixels: number;
  /** USD as a JSON number that prints as the exact decimal. */
  cost: number;
  /** The same cost as a decimal string. */
  costUsd: string;
}

/** GET /admin/v1/usage: usage summed over [from, to). */
export interface UsageReport {
  from: string;
  to: string;
  /** The groups, comma-separated (`endpoint`, `day,key`, ...). */
  groupBy: string;
  usage: UsageLine[];
  total: Omit<UsageLine, 'day' | 'key' | 'keyName' | 'endpoint'> & { workerSeconds: number; gpuSeconds: number };
}

/** What usage may be grouped by. */
export type UsageGroup = 'key' | 'endpoint' | 'day';

/** Which usage to sum: a time range (epoch ms or ISO 8601) and the grouping (one group or several). */
export interface UsageQuery {
  from?: number | string;
  to?: number | string;
  groupBy?: UsageGroup | UsageGroup[];
}

/**
 * A failed admin call: a non-2xx answer (`status`, the server's `code` and message) or,
 * with status 0 and code `UNREACHABLE`, no answer at all.
 */
export class AdminApiError extends Error {
  override readonly name = 'AdminApiError';
  constructor(
    message: string,
    readonly status: number,
    readonly code: string,
  ) {
    super(message);
  }
}

/** Where the admin API is and the admin key to call it with. */
export interface AdminClientOptions {
  /** Base URL of the gateway, e.g. `http://localhost:8080`. */
  url: string;
  /** A key with the `admin` scope. Sent as a bearer token, never included in errors. */
  adminKey: string;
  /** Per-request limit; default 30 s. */
  timeoutMs?: number;
  /** Defaults to the global fetch. */
  fetch?: typeof fetch;
}

/** The admin API of a gateway (keys, registry credentials, endpoints, workers, logs, usage). */
export interface AdminClient {
  createKey(request: CreateKeyRequest): Promise<CreatedApiKey>;
  listKeys(): Promise<ApiKeyInfo[]>;
  /** Revokes a key; a managed one (a pool worker's own) only with `force` (409 KEY_MANAGED otherwise). */
  deleteKey(id: string, options?: { force?: boolean }): Promise<{ id: string; deleted: boolean }>;
  /** Sets a key's budget and job cap (a field left out keeps its value, null clears it). */
  setKeyLimits(id: string, limits: KeyLimits): Promise<ApiKeyInfo>;
  /** Saves a registry login; answers its id and name only. */
  createRegistryCredential(request: CreateRegistryCredentialRequest): Promise<{ id: string; name: string }>;
  listRegistryCredentials(): Promise<RegistryCredentialInfo[]>;
  /** 409 REGISTRY_CREDENTIAL_IN_USE while an endpoint names it. */
  deleteRegistryCredential(id: string): Promise<{ id: string; deleted: boolean }>;
  createEndpoint(request: CreateEndpointRequest): Promise<Endpoint>;
  listEndpoints(): Promise<Endpoint[]>;
  getEndpoint(id: string): Promise<Endpoint>;
  updateEndpoint(id: string, changes: EndpointSettings): Promise<Endpoint>;
  deleteEndpoint(id: string): Promise<unknown>;
  listWorkers(endpointId: string): Promise<EndpointWorker[]>;
  /** The workers with the Docker hosts they run on (state, engine, GPUs in use). */
  workerListing(endpointId: string): Promise<WorkerListing>;
  workerLogs(endpointId: string, workerId: string, lines?: number): Promise<WorkerLogLine[]>;
  /** Execution, worker and GPU seconds, megapixels and cost, by key, endpoint and/or day. */
  usage(query?: UsageQuery): Promise<UsageReport>;
  /** The same report as CSV text. */
  usageCsv(query?: UsageQuery): Promise<string>;
}

/**
 * Creates an admin API client.
 *
 * @example
 * const admin = createAdminClient({ url: 'http://localhost:8080', adminKey: process.env.GANTRY_ADMIN_KEY ?? '' });
 * const { key } = await admin.createKey({ name: 'ci', scopes: ['run', 'read'] });
 * await admin.createEndpoint({ id: 'echo', workersMax: 2, worker: { command: 'node echo.js' } });
 */
export function createAdminClient(options: AdminClientOptions): AdminClient {
  const base = options.url.replace(/\/+$/, '');
  const doFetch = options.fetch ?? globalThis.fetch;
  const timeoutMs = options.timeoutMs ?? 30_000;

  async function request<T>(method: string, path: string, body?: unknown): Promise<T> {
    const headers: Record<string, string> = { authorization: `Bearer ${options.adminKey}`, accept: 'application/json' };
    if (body !== undefined) headers['content-type'] = 'application/json';
    let response: Response;
    try {
      response = await doFetch(`${base}${path}`, {
        method,
        headers,
        body: body === undefined ? undefined : JSON.stringify(body),
        signal: AbortSignal.timeout(timeoutMs),
      });
    } catch (err) {
      throw new AdminApiError(`cannot reach gantry at ${base}: ${describeFetchError(err)}`, 0, 'UNREACHABLE');
    }
    const text = await response.text();
    const parsed = parseJson(text);
    if (!response.ok) {
      const error = isRecord(parsed) ? parsed : {};
      const message = typeof error.error === 'string' ? error.error : `HTTP ${response.status} ${response.statusText}`.trim();
      const code = typeof error.code === 'string' ? error.code : `HTTP_${response.status}`;
      throw new AdminApiError(message, response.status, code);
    }
    if (parsed === undefined) {
      throw new AdminApiError(`unexpected answer from ${method} ${path}: not JSON`, response.status, 'BAD_RESPONSE');
    }
    return parsed as T;
  }

  const keyPath = (id: string) => `/admin/v1/keys/${encodeURIComponent(id)}`;
  const endpointPath = (id: string) => `/admin/v1/endpoints/${encodeURIComponent(id)}`;

  return {
    createKey: (body) => request<CreatedApiKey>('POST', '/admin/v1/keys', body),
    listKeys: async () => (await request<{ keys: ApiKeyInfo[] }>('GET', '/admin/v1/keys')).keys,
    deleteKey: (id, options) => request<{ id: string; deleted: boolean }>('DELETE', `${keyPath(id)}${options?.force ? '?force=true' : ''}`),
    setKeyLimits: (id, limits) => request<ApiKeyInfo>('PATCH', keyPath(id), limits),
    createRegistryCredential: (body) => request<{ id: string; name: string }>('POST', '/admin/v1/registry-credentials', body),
    listRegistryCredentials: async () => (await request<{ registryCredentials: RegistryCredentialInfo[] }>('GET', '/admin/v1/registry-credentials')).registryCredentials,
    deleteRegistryCredential: (id) => request<{ id: string; deleted: boolean }>('DELETE', `/admin/v1/registry-credentials/${encodeURIComponent(id)}`),
    createEndpoint: (body) => request<Endpoint>('POST', '/admin/v1/endpoints', body),
    listEndpoints: async () => (await request<{ endpoints: Endpoint[] }>('GET', '/admin/v1/endpoints')).endpoints,
    getEndpoint: (id) => request<Endpoint>('GET', endpointPath(id)),
    updateEndpoint: (id, changes) => request<Endpoint>('PATCH', endpointPath(id), changes),
    deleteEndpoint: (id) => request<unknown>('DELETE', endpointPath(id)),
    listWorkers: async (id) => (await request<WorkerListing>('GET', `${endpointPath(id)}/workers`)).workers,
    workerListing: (id) => request<WorkerListing>('GET', `${endpointPath(id)}/workers`),
    workerLogs: async (id, workerId, lines) =>
      (
        await request<{ lines: WorkerLogLine[] }>(
          'GET',
          `${endpointPath(id)}/workers/${encodeURIComponent(workerId)}/logs${lines === undefined ? '' : `?lines=${lines}`}`,
        )
      ).lines,
    usage: (query = {}) => request<UsageReport>('GET', `/admin/v1/usage${usageSearch(query, 'json')}`),
    usageCsv: (query = {}) => getText({ doFetch, base, adminKey: options.adminKey, timeoutMs }, `/admin/v1/usage${usageSearch(query, 'csv')}`),
  };
}

/** GET of a route that answers text (the usage CSV); a non-2xx answer throws as `request` does. */
async function getText(c: { doFetch: typeof fetch; base: string; adminKey: string; timeoutMs: number }, path: string): Promise<string> {
  let response: Response;
  try {
    response = await c.doFetch(`${c.base}${path}`, { headers: { authorization: `Bearer ${c.adminKey}` }, signal: AbortSignal.timeout(c.timeoutMs) });
  } catch (err) {
    throw new AdminApiError(`cannot reach gantry at ${c.base}: ${describeFetchError(err)}`, 0, 'UNREACHABLE');
  }
  const text = await response.text();
  if (!response.ok) {
    const error = parseJson(text);
    const message = isRecord(error) && typeof error.error === 'string' ? error.error : `HTTP ${response.status}`;
    throw new AdminApiError(message, response.status, isRecord(error) && typeof error.code === 'string' ? error.code : `HTTP_${response.status}`);
  }
  return text;
}

/** `?from=&to=&groupBy=a,b&format=` of a usage query. */
function usageSearch(query: UsageQuery, format: 'json' | 'csv'): string {
  const params = new URLSearchParams();
  if (query.from !== undefined) params.set('from', String(query.from));
  if (query.to !== undefined) params.set('to', String(query.to));
  if (query.groupBy !== undefined) params.set('groupBy', Array.isArray(query.groupBy) ? query.groupBy.join(',') : query.groupBy);
  if (format === 'csv') params.set('format', 'csv');
  const search = params.toString();
  return search ? `?${search}` : '';
}

function parseJson(text: string): unknown {
  if (text.length === 0) return undefined;
  try {
    return JSON.parse(text) as unknown;
  } catch {
    return undefined;
  }
}

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/** fetch wraps the interesting part (ECONNREFUSED, timeout) in `cause`. */
function describeFetchError(err: unknown): string {
  if (err instanceof Error) {
    if (err.name === 'TimeoutError') return 'request timed out';
    const cause = err.cause;
    if (cause instanceof Error) {
      const code = (cause as { code?: unknown }).code;
      return typeof code === 'string' ? code : cause.message;
    }
    return err.message;
  }
  return String(err);
}
