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
  /** 0–100 (default 50): who gets the fleet's GPUs first (docs/scaling.md, the allocator). */
  priority?: number;
  /** 1–100 (default 1): the weight of its fair share of GPUs among endpoints of the same priority. */
  shareWeight?: number;
  /** Its running workers may be stopped for a higher priority, their jobs requeued without counting an attempt (default false). */
  preemptible?: boolean;
  /** Idle container workers are paused in a warm pool (GPUs kept) and resumed for the next job, instead of stopped (default false). */
  flashboot?: boolean;
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
  priority?: number;
  shareWeight?: number;
  preemptible?: boolean;
  flashboot?: boolean;
  createdAt: number | string;
  updatedAt: number | string;
}

/** A worker of an endpoint as `GET /admin/v1/endpoints/{id}/workers` lists it. */
export interface EndpointWorker {
  id: string;
  /** initializing, idle, running, draining, throttled, unhealthy, paused (flashboot's warm pool), or stopped (gone; its log is kept for a while). */
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
  firstSeenAt?: string;
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

/** Cold starts counted since the pool was made, with p70/p90/p98 (ms) over the last ones; null while there were none. */
export interface ColdStartSummary {
  count: number;
  /** How many of the latest cold starts the quantiles are over. */
  window: number;
  p70Ms: number | null;
  p90Ms: number | null;
  p98Ms: number | null;
  lastMs: number | null;
}

/** An endpoint's cold starts (a worker started while a job waited, timed to its first job-take): all, then new starts and resumes from the warm pool. */
export interface ColdStarts extends ColdStartSummary {
  start: ColdStartSummary;
  resume: ColdStartSummary;
}

/** `GET /admin/v1/endpoints/{id}/workers` whole: the workers, the Docker hosts of the pool, and its cold starts. */
export interface WorkerListing {
  endpointId: string;
  /** Whether the gateway asked runs the pool (with several gateways only the leader does; the others list no hosts). */
  pool: boolean;
  workers: EndpointWorker[];
  hosts: WorkerHost[];
  /** Null where the gateway asked runs no pool for the endpoint. */
  coldStarts?: ColdStarts | null;
}

/** One line of a pool worker's log. */
export interface WorkerLogLine {
  at: string;
  /** stdout, stderr, or gantry (the pool's own notes: started, exited, stopping). */
  stream: string;
  line: string;
  /** `debug`, `info`, `warn`, `error`, … when the line says; null otherwise (gateways before the stored logs send none). */
  level?: string | null;
  /** The line without its JSON or level word around it. */
  message?: string;
  /** The job it belongs to, when known. */
  jobId?: string | null;
}

/** One stored line of GET /admin/v1/logs (docs/logs.md). */
export interface LogLine {
  /** The line's id: the cursor of pages and follows. */
  id: string;
  at: string;
  level: string | null;
  message: string;
  stream: string;
  endpointId: string;
  workerId: string;
  jobId: string | null;
  /** The line as the worker printed it (a JSON line whole). */
  line: string;
}

/** Filters of GET /admin/v1/logs; times are ISO 8601 or epoch ms. */
export interface LogQuery {
  endpoint?: string;
  worker?: string;
  job?: string;
  since?: string | number;
  until?: string | number;
  /** Text the line holds, ASCII letters in any case. */
  q?: string;
  /** Lines per page (default 100, at most 1,000). */
  limit?: number;
  /** The `cursor` of the page after which to read older lines. */
  cursor?: string;
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
  /** The newest stored lines matching the filters, oldest first, and the cursor of the page before (null at the start). */
  logs(query?: LogQuery): Promise<{ lines: LogLine[]; cursor: string | null }>;
  /**
   * The newest `limit` lines, then each new one as it is stored (server-sent events), until
   * `signal` aborts; a dropped connection is resumed after the last line seen.
   */
  followLogs(query: LogQuery, onLine: (line: LogLine) => void, signal?: AbortSignal): Promise<void>;
  /** Execution, worker and GPU seconds, megapixels and cost, by key, endpoint and/or day. */
  usage(query?: UsageQuery): Promise<UsageReport>;
  /** The same report as CSV text. */
  usageCsv(query?: UsageQuery): Promise<string>;
  /** A page of the audit log, newest first; pass `nextCursor` as `cursor` for the next. */
  audit(query?: AuditQuery): Promise<AuditPage>;
}

/** Filters of GET /admin/v1/audit (docs/api.md, "Audit log"). */
export interface AuditQuery {
  /** A key id, key name or console session reference. */
  actor?: string;
  /** An action (`endpoint.update`), or a prefix ending in a dot (`endpoint.`). */
  action?: string;
  /** The changed thing's id (an endpoint id, key id, registry credential id). */
  target?: string;
  /** Epoch milliseconds or ISO 8601; `until` exclusive. */
  since?: number | string;
  until?: number | string;
  /** 1-1000 entries (default 100). */
  limit?: number;
  cursor?: string;
}

/** One audit entry: who did what, when, from where. Never holds a secret value. */
export interface AuditEntry {
  id: string;
  at: string;
  action: string;
  outcome: 'ok' | 'failed' | 'limited';
  actor: { kind: 'key' | 'console' | 'anonymous'; keyId: string | null; keyName: string | null; session: string | null };
  address: string;
  target: { kind: string; id: string } | null;
  detail: Record<string, unknown>;
}

/** A page of entries and the cursor of the next (null on the last). */
export interface AuditPage {
  entries: AuditEntry[];
  nextCursor: string | null;
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
      (await request<{ lines: WorkerLogLine[] }>('GET', `${endpointPath(id)}/workers/${encodeURIComponent(workerId)}/logs${lines === undefined ? '' : `?lines=${lines}`}`)).lines,
    ...logMethods(request, { doFetch, base, adminKey: options.adminKey }),
    usage: (query = {}) => request<UsageReport>('GET', `/admin/v1/usage${usageSearch(query, 'json')}`),
    usageCsv: (query = {}) => getText({ doFetch, base, adminKey: options.adminKey, timeoutMs }, `/admin/v1/usage${usageSearch(query, 'csv')}`),
    audit: (query = {}) => request<AuditPage>('GET', `/admin/v1/audit${auditSearch(query)}`),
  };
}

/** `logs` and `followLogs` of the client. */
function logMethods(request: <T>(method: string, path: string) => Promise<T>, c: { doFetch: typeof fetch; base: string; adminKey: string }): Pick<AdminClient, 'logs' | 'followLogs'> {
  return {
    logs: (query = {}) => request<{ lines: LogLine[]; cursor: string | null }>('GET', `/admin/v1/logs${logSearch(query)}`),
    followLogs: (query, onLine, signal) => followLogs(c, logSearch(query), onLine, signal),
  };
}

/** The query string of a logs request. */
function logSearch(query: LogQuery): string {
  const params = new URLSearchParams();
  for (const [name, value] of Object.entries(query)) if (value !== undefined && value !== '') params.set(name, String(value));
  const text = params.toString();
  return text ? `?${text}` : '';
}

/** Waits before a dropped follow connects again. */
const FOLLOW_RETRY_MS = 1_000;

/**
 * GET /admin/v1/logs as server-sent events: each `data:` is a line; the `id:` of the last one
 * is sent back as Last-Event-ID when the connection is made again. A refusal (4xx) throws.
 */
async function followLogs(c: { doFetch: typeof fetch; base: string; adminKey: string }, search: string, onLine: (line: LogLine) => void, signal?: AbortSignal): Promise<void> {
  let lastId: string | undefined;
  while (!signal?.aborted) {
    try {
      const headers: Record<string, string> = { authorization: `Bearer ${c.adminKey}`, accept: 'text/event-stream', ...(lastId ? { 'last-event-id': lastId } : {}) };
      const response = await c.doFetch(`${c.base}/admin/v1/logs${search}`, { headers, ...(signal ? { signal } : {}) });
      if (response.status >= 400 && response.status < 500) {
        const error = parseJson(await response.text());
        const body = isRecord(error) ? error : {};
        throw new AdminApiError(typeof body.error === 'string' ? body.error : `HTTP ${response.status}`, response.status, typeof body.code === 'string' ? body.code : `HTTP_${response.status}`);
      }
      if (response.ok && response.body) {
        for await (const event of sseEvents(response.body)) {
          if (event.id !== undefined) lastId = event.id;
          if (event.data !== '') onLine(JSON.parse(event.data) as LogLine);
        }
      }
    } catch (err) {
      if (signal?.aborted) return;
      if (err instanceof AdminApiError) throw err;
    }
    if (!signal?.aborted) await new Promise((resolve) => setTimeout(resolve, FOLLOW_RETRY_MS));
  }
}

/** The events of a text/event-stream body: their `id` and `data` fields (comments skipped). */
async function* sseEvents(body: ReadableStream<Uint8Array>): AsyncGenerator<{ id?: string; data: string }> {
  const decoder = new TextDecoder();
  let text = '';
  for await (const chunk of body as unknown as AsyncIterable<Uint8Array>) {
    text += decoder.decode(chunk, { stream: true });
    let end: number;
    while ((end = text.indexOf('\n\n')) >= 0) {
      const block = text.slice(0, end);
      text = text.slice(end + 2);
      let id: string | undefined;
      const data: string[] = [];
      for (const line of block.split('\n')) {
        if (line.startsWith('id: ')) id = line.slice(4);
        else if (line.startsWith('data: ')) data.push(line.slice(6));
      }
      if (id !== undefined || data.length > 0) yield { ...(id === undefined ? {} : { id }), data: data.join('\n') };
    }
  }
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

/** `?actor=&action=…` of an audit query; fields left out are not sent. */
function auditSearch(query: AuditQuery): string {
  const params = new URLSearchParams();
  for (const [name, value] of Object.entries(query)) if (value !== undefined) params.set(name, String(value));
  const text = params.toString();
  return text === '' ? '' : `?${text}`;
}
