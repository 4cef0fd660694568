/**
 * `gantry keys ...` and `gantry endpoints ...`: the admin API from the command line.
 * Exit codes: 0 done, 1 the server refused or could not be reached (its message on stderr),
 * 2 a bad flag or value (a one-line message on stderr, nothing sent).
 * The admin key comes from --admin-key or GANTRY_ADMIN_KEY and is never printed.
 */
import { parseFlags, parseInteger, parseKeyValues, parseList, UsageError, type ParsedFlags } from './args.js';
import {
  AdminApiError,
  createAdminClient,
  SCALER_TYPES,
  SCOPES,
  type AdminClient,
  type ApiKeyInfo,
  type Endpoint,
  type EndpointSettings,
  type EndpointWorker,
  type ScalerType,
  type Scope,
  type WorkerSpec,
} from '../sdk/admin-client.js';

const DEFAULT_URL = 'http://localhost:8080';

const CONNECTION_HELP = `connection:
  --url URL            gateway address (env GANTRY_URL, default ${DEFAULT_URL})
  --admin-key KEY      a key with the admin scope (env GANTRY_ADMIN_KEY)
  --json               print the server's answer as JSON
  -h, --help           show this help`;

const COMMON_OPTIONS = {
  url: { type: 'string' },
  'admin-key': { type: 'string' },
  json: { type: 'boolean' },
  help: { type: 'boolean', short: 'h' },
} as const;

const ENDPOINT_OPTIONS = {
  ...COMMON_OPTIONS,
  name: { type: 'string' },
  'workers-min': { type: 'string' },
  'workers-max': { type: 'string' },
  'idle-timeout': { type: 'string' },
  'execution-timeout-ms': { type: 'string' },
  'scaler-type': { type: 'string' },
  'scaler-value': { type: 'string' },
  'max-attempts': { type: 'string' },
  'worker-command': { type: 'string' },
  'worker-env': { type: 'string', multiple: true },
  'worker-cwd': { type: 'string' },
  'webhook-secret': { type: 'string' },
} as const;

const ENDPOINT_UPDATE_OPTIONS = { ...ENDPOINT_OPTIONS, 'no-worker': { type: 'boolean' } } as const;

const ENDPOINT_SETTINGS_HELP = `settings:
  --name NAME                    display name
  --workers-min N                workers kept running (integer >= 0)
  --workers-max N                most workers started (integer >= 0)
  --idle-timeout S               seconds an idle worker is kept (integer >= 0)
  --execution-timeout-ms MS      longest a job may run (integer >= 1)
  --scaler-type TYPE             QUEUE_DELAY or REQUEST_COUNT
  --scaler-value N               seconds of queue delay / requests per worker (integer >= 1)
  --max-attempts N               runs of a job before a lost worker fails it (integer >= 1)
  --worker-command CMD           command the autoscaler starts as a worker
  --worker-env K=V               environment of that command (repeatable)
  --worker-cwd DIR               working directory of that command
  --webhook-secret SECRET        whsec_… secret that signs webhook calls (Standard Webhooks);
                                 "none" removes it`;

/** One subcommand: its help text and what it does once its flags are parsed. */
interface Subcommand {
  usage: string;
  run(argv: string[]): Promise<number>;
}

const KEYS_USAGE = `usage: gantry keys <create|list|delete> [options]

  create --name NAME --scopes S[,S] [--endpoints ID[,ID]]   create a key; prints it once
  list                                                      list keys (never the keys themselves)
  delete ID                                                 delete a key

scopes: ${SCOPES.join(', ')}. Run 'gantry keys <subcommand> --help' for its options.`;

const ENDPOINTS_USAGE = `usage: gantry endpoints <create|list|get|update|delete|workers|logs> [options]

  create ID [settings]     create an endpoint
  list                     list endpoints
  get ID                   show one endpoint
  update ID [settings]     change the given settings of an endpoint
  delete ID                delete an endpoint with its jobs and workers
  workers ID               list its workers: state, pid, restarts, why unhealthy
  logs ID WORKER_ID        show the last output lines of a pool worker

Run 'gantry endpoints <subcommand> --help' for its options.`;

const keySubcommands: Record<string, Subcommand> = {
  create: {
    usage: `usage: gantry keys create --name NAME --scopes S[,S] [--endpoints ID[,ID]] [options]

  --name NAME          what the key is for
  --scopes S[,S]       any of ${SCOPES.join(', ')}
  --endpoints ID[,ID]  limit the key to these endpoints (default: all)

The key is printed once; only its hash is stored.

${CONNECTION_HELP}`,
    run: keysCreate,
  },
  list: { usage: `usage: gantry keys list [options]\n\n${CONNECTION_HELP}`, run: keysList },
  delete: { usage: `usage: gantry keys delete ID [options]\n\n${CONNECTION_HELP}`, run: keysDelete },
};

const endpointSubcommands: Record<string, Subcommand> = {
  create: {
    usage: `usage: gantry endpoints create ID [settings] [options]\n\n${ENDPOINT_SETTINGS_HELP}\n\n${CONNECTION_HELP}`,
    run: endpointsCreate,
  },
  list: { usage: `usage: gantry endpoints list [options]\n\n${CONNECTION_HELP}`, run: endpointsList },
  get: { usage: `usage: gantry endpoints get ID [options]\n\n${CONNECTION_HELP}`, run: endpointsGet },
  update: {
    usage: `usage: gantry endpoints update ID [settings] [options]

Only the given settings change. --worker-env or --worker-cwd alone keep the current command;
--worker-env replaces the whole environment.

${ENDPOINT_SETTINGS_HELP}
  --no-worker                    remove the worker command (workers are connected by hand)

${CONNECTION_HELP}`,
    run: endpointsUpdate,
  },
  delete: { usage: `usage: gantry endpoints delete ID [options]\n\n${CONNECTION_HELP}`, run: endpointsDelete },
  workers: { usage: `usage: gantry endpoints workers ID [options]\n\n${CONNECTION_HELP}`, run: endpointsWorkers },
  logs: {
    usage: `usage: gantry endpoints logs ID WORKER_ID [--lines N] [options]\n\n  --lines N            how many of the last lines (default 100)\n\n${CONNECTION_HELP}`,
    run: endpointsLogs,
  },
};

/**
 * `gantry keys <create|list|delete>`; returns the exit code.
 *
 * @example
 * // GANTRY_ADMIN_KEY=... gantry keys create --name ci --scopes run,read
 * const code = await keysCommand(['create', '--name', 'ci', '--scopes', 'run,read']);
 */
export async function keysCommand(argv: string[]): Promise<number> {
  return dispatch('gantry keys', KEYS_USAGE, keySubcommands, argv);
}

/**
 * `gantry endpoints <create|list|get|update|delete>`; returns the exit code.
 *
 * @example
 * const code = await endpointsCommand(['create', 'echo', '--workers-max', '2', '--worker-command', 'node echo.js']);
 */
export async function endpointsCommand(argv: string[]): Promise<number> {
  return dispatch('gantry endpoints', ENDPOINTS_USAGE, endpointSubcommands, argv);
}

async function dispatch(prefix: string, usage: string, subcommands: Record<string, Subcommand>, argv: string[]): Promise<number> {
  const [name, ...rest] = argv;
  if (!name || name === '--help' || name === '-h' || name === 'help') {
    if (name) console.log(usage);
    else console.error(usage);
    return name ? 0 : 2;
  }
  const sub = Object.hasOwn(subcommands, name) ? subcommands[name] : undefined;
  if (!sub) {
    console.error(`${prefix}: unknown subcommand '${name}' (see '${prefix} --help')`);
    return 2;
  }
  if (wantsHelp(rest)) {
    console.log(sub.usage);
    return 0;
  }
  try {
    return await sub.run(rest);
  } catch (err) {
    if (err instanceof UsageError) {
      console.error(`${prefix} ${name}: ${err.message} (see '${prefix} ${name} --help')`);
      return 2;
    }
    if (err instanceof AdminApiError) {
      console.error(`${prefix} ${name}: ${err.message}`);
      return 1;
    }
    throw err;
  }
}

/** --help anywhere before a `--` wins over every other flag, valid or not. */
function wantsHelp(argv: string[]): boolean {
  for (const arg of argv) {
    if (arg === '--') return false;
    if (arg === '--help' || arg === '-h') return true;
  }
  return false;
}

// ---- keys -------------------------------------------------------------------------------

async function keysCreate(argv: string[]): Promise<number> {
  const { values, positionals } = parseFlags(argv, {
    ...COMMON_OPTIONS,
    name: { type: 'string' },
    scopes: { type: 'string' },
    endpoints: { type: 'string' },
  });
  expectPositionals(positionals, []);
  const name = values.name?.trim();
  if (!name) throw new UsageError('--name is required');
  if (values.scopes === undefined) throw new UsageError(`--scopes is required (any of ${SCOPES.join(', ')})`);
  const scopes = parseScopes(values.scopes);
  let endpoints: string[] | undefined;
  if (values.endpoints !== undefined) {
    endpoints = parseList(values.endpoints);
    if (endpoints.length === 0) throw new UsageError('--endpoints needs at least one endpoint id');
  }
  const client = connect(values);

  const created = await client.createKey({ name, scopes, ...(endpoints ? { endpoints } : {}) });
  if (values.json) {
    printJson(created);
  } else {
    printFields([
      ['id', created.id],
      ['name', created.name],
      ['scopes', created.scopes.join(',')],
      ['endpoints', formatEndpointList(created.endpoints)],
      ['key', created.key],
    ]);
    console.error('The key is shown only now; store it somewhere safe.');
  }
  return 0;
}

async function keysList(argv: string[]): Promise<number> {
  const { values, positionals } = parseFlags(argv, COMMON_OPTIONS);
  expectPositionals(positionals, []);
  const keys = await connect(values).listKeys();
  if (values.json) printJson(keys);
  else if (keys.length === 0) console.log('no keys');
  else console.log(formatTable(['ID', 'NAME', 'SCOPES', 'ENDPOINTS', 'CREATED'], keys.map(keyRow)));
  return 0;
}

async function keysDelete(argv: string[]): Promise<number> {
  const { values, positionals } = parseFlags(argv, COMMON_OPTIONS);
  const [id] = expectPositionals(positionals, ['ID']);
  const result = await connect(values).deleteKey(id);
  if (values.json) printJson(result);
  else console.log(`deleted key ${id}`);
  return 0;
}

function parseScopes(value: string): Scope[] {
  const scopes = parseList(value);
  if (scopes.length === 0) throw new UsageError(`--scopes needs at least one of ${SCOPES.join(', ')}`);
  for (const scope of scopes) {
    if (!(SCOPES as readonly string[]).includes(scope)) {
      throw new UsageError(`unknown scope '${scope}' (scopes: ${SCOPES.join(', ')})`);
    }
  }
  return [...new Set(scopes)] as Scope[];
}

function keyRow(key: ApiKeyInfo): string[] {
  return [key.id, key.name, key.scopes.join(','), formatEndpointList(key.endpoints), formatTime(key.createdAt)];
}

// ---- endpoints --------------------------------------------------------------------------

type EndpointFlags = ParsedFlags<typeof ENDPOINT_OPTIONS>['values'];

async function endpointsCreate(argv: string[]): Promise<number> {
  const { values, positionals } = parseFlags(argv, ENDPOINT_OPTIONS);
  const [id] = expectPositionals(positionals, ['ID']);
  const settings = endpointSettings(values);
  if (settings.worker === undefined && (values['worker-env'] !== undefined || values['worker-cwd'] !== undefined)) {
    throw new UsageError('--worker-env and --worker-cwd need --worker-command');
  }
  const client = connect(values);
  const endpoint = await client.createEndpoint({ id, ...settings });
  printEndpoint(endpoint, values.json);
  return 0;
}

async function endpointsList(argv: string[]): Promise<number> {
  const { values, positionals } = parseFlags(argv, COMMON_OPTIONS);
  expectPositionals(positionals, []);
  const endpoints = await connect(values).listEndpoints();
  if (values.json) printJson(endpoints);
  else if (endpoints.length === 0) console.log('no endpoints');
  else {
    const headers = ['ID', 'NAME', 'WORKERS', 'SCALER', 'IDLE', 'EXEC TIMEOUT', 'ATTEMPTS', 'WORKER COMMAND'];
    console.log(formatTable(headers, endpoints.map(endpointRow)));
  }
  return 0;
}

async function endpointsGet(argv: string[]): Promise<number> {
  const { values, positionals } = parseFlags(argv, COMMON_OPTIONS);
  const [id] = expectPositionals(positionals, ['ID']);
  printEndpoint(await connect(values).getEndpoint(id), values.json);
  return 0;
}

async function endpointsUpdate(argv: string[]): Promise<number> {
  const { values, positionals } = parseFlags(argv, ENDPOINT_UPDATE_OPTIONS);
  const [id] = expectPositionals(positionals, ['ID']);
  const changes = endpointSettings(values);
  if (values['no-worker']) {
    if (values['worker-command'] !== undefined || values['worker-env'] !== undefined || values['worker-cwd'] !== undefined) {
      throw new UsageError('--no-worker cannot be combined with --worker-command, --worker-env or --worker-cwd');
    }
    changes.worker = null;
  }
  const workerEnv = values['worker-env'];
  const workerCwd = values['worker-cwd'];
  const partialWorker = changes.worker === undefined && (workerEnv !== undefined || workerCwd !== undefined);
  if (Object.keys(changes).length === 0 && !partialWorker) {
    throw new UsageError('nothing to update: give at least one setting');
  }
  const client = connect(values);
  if (partialWorker) {
    // PATCH replaces the worker spec as a whole, so keep the command the endpoint has now.
    const current = await client.getEndpoint(id);
    if (!current.worker) throw new UsageError(`endpoint ${id} has no worker command; give --worker-command`);
    changes.worker = mergeWorker(current.worker, workerEnv, workerCwd);
  }
  printEndpoint(await client.updateEndpoint(id, changes), values.json);
  return 0;
}

async function endpointsDelete(argv: string[]): Promise<number> {
  const { values, positionals } = parseFlags(argv, COMMON_OPTIONS);
  const [id] = expectPositionals(positionals, ['ID']);
  const result = await connect(values).deleteEndpoint(id);
  if (values.json) printJson(result);
  else console.log(`deleted endpoint ${id}`);
  return 0;
}

async function endpointsWorkers(argv: string[]): Promise<number> {
  const { values, positionals } = parseFlags(argv, COMMON_OPTIONS);
  const [id] = expectPositionals(positionals, ['ID']);
  const workers = await connect(values).listWorkers(id);
  if (values.json) printJson(workers);
  else if (workers.length === 0) console.log('no workers');
  else console.log(formatTable(['ID', 'STATE', 'MANAGED', 'PID', 'JOBS', 'RESTARTS', 'STARTED', 'REASON'], workers.map(workerRow)));
  return 0;
}

function workerRow(w: EndpointWorker): string[] {
  const started = w.managed ? formatTime(w.startedAt) : formatTime(w.lastSeenAt);
  return [w.id, w.state, w.managed ? 'pool' : 'by hand', String(w.pid ?? '-'), String(w.jobs), String(w.restarts ?? '-'), started, w.reason ?? ''];
}

async function endpointsLogs(argv: string[]): Promise<number> {
  const { values, positionals } = parseFlags(argv, { ...COMMON_OPTIONS, lines: { type: 'string' } });
  const [id, workerId] = expectPositionals(positionals, ['ID', 'WORKER_ID']);
  const lines = values.lines === undefined ? undefined : parseInteger('--lines', values.lines, 1);
  const log = await connect(values).workerLogs(id, workerId, lines);
  if (values.json) printJson(log);
  else for (const l of log) console.log(`${l.at} ${l.stream.padEnd(6)} ${l.line}`);
  return 0;
}

/** The settings named by flags, validated; flags not given are left out. */
function endpointSettings(values: EndpointFlags): EndpointSettings {
  const settings: EndpointSettings = {};
  if (values.name !== undefined) {
    const name = values.name.trim();
    if (!name) throw new UsageError('--name must not be empty');
    settings.name = name;
  }
  const int = (flag: keyof EndpointFlags & string, min: number): number | undefined => {
    const value = values[flag];
    return typeof value === 'string' ? parseInteger(`--${flag}`, value, min) : undefined;
  };
  const numbers: [keyof EndpointSettings, number | undefined][] = [
    ['workersMin', int('workers-min', 0)],
    ['workersMax', int('workers-max', 0)],
    ['idleTimeout', int('idle-timeout', 0)],
    ['executionTimeoutMs', int('execution-timeout-ms', 1)],
    ['scalerValue', int('scaler-value', 1)],
    ['maxAttempts', int('max-attempts', 1)],
  ];
  for (const [key, value] of numbers) {
    if (value !== undefined) Object.assign(settings, { [key]: value });
  }
  if (settings.workersMin !== undefined && settings.workersMax !== undefined && settings.workersMin > settings.workersMax) {
    throw new UsageError(`--workers-min (${settings.workersMin}) is more than --workers-max (${settings.workersMax})`);
  }
  if (values['scaler-type'] !== undefined) settings.scalerType = parseScalerType(values['scaler-type']);
  const secret = values['webhook-secret'];
  if (secret !== undefined) settings.webhookSecret = secret === 'none' ? null : secret;
  if (values['worker-command'] !== undefined) {
    settings.worker = mergeWorker(undefined, values['worker-env'], values['worker-cwd'], values['worker-command']);
  }
  return settings;
}

function mergeWorker(current: WorkerSpec | undefined, env: string[] | undefined, cwd: string | undefined, command?: string): WorkerSpec {
  const cmd = (command ?? current?.command ?? '').trim();
  if (!cmd) throw new UsageError('--worker-command must not be empty');
  const worker: WorkerSpec = { command: cmd };
  const newEnv = env !== undefined ? parseKeyValues('--worker-env', env) : current?.env;
  if (newEnv !== undefined) worker.env = newEnv;
  if (cwd !== undefined && !cwd.trim()) throw new UsageError('--worker-cwd must not be empty');
  const newCwd = cwd ?? current?.cwd;
  if (newCwd !== undefined) worker.cwd = newCwd;
  return worker;
}

function parseScalerType(value: string): ScalerType {
  const upper = value.trim().toUpperCase();
  const found = SCALER_TYPES.find((t) => t === upper);
  if (!found) throw new UsageError(`--scaler-type must be ${SCALER_TYPES.join(' or ')}, got '${value}'`);
  return found;
}

function printEndpoint(endpoint: Endpoint, json: boolean | undefined): void {
  if (json) {
    printJson(endpoint);
    return;
  }
  const worker = endpoint.worker;
  const fields: [string, string][] = [
    ['id', endpoint.id],
    ['name', endpoint.name],
    ['workers', `${endpoint.workersMin}..${endpoint.workersMax}`],
    ['idle timeout', `${endpoint.idleTimeout} s`],
    ['execution timeout', `${endpoint.executionTimeoutMs} ms`],
    ['scaler', `${endpoint.scalerType} ${endpoint.scalerValue}`],
    ['max attempts', String(endpoint.maxAttempts)],
    ['worker command', worker?.command ?? '-'],
    ['webhook signing', endpoint.webhookSigning ? 'on' : 'off'],
  ];
  const env = Object.entries(worker?.env ?? {});
  if (env.length > 0) fields.push(['worker env', env.map(([k, v]) => `${k}=${v}`).join(' ')]);
  if (worker?.cwd) fields.push(['worker cwd', worker.cwd]);
  fields.push(['created', formatTime(endpoint.createdAt)], ['updated', formatTime(endpoint.updatedAt)]);
  printFields(fields);
}

function endpointRow(ep: Endpoint): string[] {
  return [
    ep.id,
    ep.name,
    `${ep.workersMin}..${ep.workersMax}`,
    `${ep.scalerType} ${ep.scalerValue}`,
    `${ep.idleTimeout}s`,
    `${ep.executionTimeoutMs}ms`,
    String(ep.maxAttempts),
    ep.worker?.command ?? '-',
  ];
}

// ---- shared -----------------------------------------------------------------------------

/** Builds the client from --url/--admin-key or GANTRY_URL/GANTRY_ADMIN_KEY. */
function connect(values: { url?: string; 'admin-key'?: string }): AdminClient {
  const url = values.url ?? (process.env.GANTRY_URL || DEFAULT_URL);
  let parsed: URL;
  try {
    parsed = new URL(url);
  } catch {
    throw new UsageError(`--url / GANTRY_URL is not a URL: '${url}'`);
  }
  if (parsed.protocol !== 'http:' && parsed.protocol !== 'https:') {
    throw new UsageError(`--url / GANTRY_URL must be http(s), got '${parsed.protocol}'`);
  }
  const adminKey = values['admin-key'] ?? process.env.GANTRY_ADMIN_KEY;
  if (!adminKey) throw new UsageError('no admin key: pass --admin-key or set GANTRY_ADMIN_KEY');
  return createAdminClient({ url, adminKey });
}

/** Checks the count of positional arguments and returns them. */
function expectPositionals<N extends string[]>(positionals: string[], names: [...N]): { [K in keyof N]: string } {
  if (positionals.length < names.length) throw new UsageError(`missing ${names.slice(positionals.length).join(' ')}`);
  if (positionals.length > names.length) {
    throw new UsageError(`unexpected argument '${positionals[names.length] ?? ''}'`);
  }
  for (const [i, value] of positionals.entries()) {
    if (!value.trim()) throw new UsageError(`${names[i] ?? 'argument'} must not be empty`);
  }
  return positionals as { [K in keyof N]: string };
}

function printJson(value: unknown): void {
  console.log(JSON.stringify(value, null, 2));
}

function printFields(fields: [string, string][]): void {
  const width = Math.max(...fields.map(([label]) => label.length)) + 1;
  console.log(fields.map(([label, value]) => `${`${label}:`.padEnd(width)} ${value}`).join('\n'));
}

function formatTable(headers: string[], rows: string[][]): string {
  const widths = headers.map((h, i) => Math.max(h.length, ...rows.map((r) => (r[i] ?? '').length)));
  const line = (cells: string[]) =>
    cells
      .map((c, i) => c.padEnd(widths[i] ?? 0))
      .join('  ')
      .trimEnd();
  return [line(headers), ...rows.map(line)].join('\n');
}

function formatEndpointList(endpoints: string[] | null | undefined): string {
  return endpoints && endpoints.length > 0 ? endpoints.join(',') : 'all';
}

function formatTime(t: number | string | null | undefined): string {
  if (typeof t === 'number' && Number.isFinite(t)) return new Date(t).toISOString();
  return typeof t === 'string' && t ? t : '-';
}
