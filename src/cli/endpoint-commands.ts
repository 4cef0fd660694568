/**
 * `gantry endpoints create|list|get|update|delete|workers|logs`: endpoints through the admin
 * API. The ranges in the help and the checks before sending are the server's own
 * (jobs/endpoint-settings.ts), so a value the server would refuse never leaves.
 */
import { DEFAULT_LOG_LINES, MAX_LOG_LINES } from '../http/pool-routes.js';
import { ENDPOINT_DEFAULTS, INTEGER_FIELDS } from '../jobs/endpoint-settings.js';
import { isObject } from '../model/json.js';
import { SCALER_TYPES, type ColdStartSummary, type Endpoint, type EndpointRateLimits, type EndpointSettings, type EndpointWorker, type ScalerType, type WorkerHost, type WorkerListing } from '../sdk/admin-client.js';
import { expectPositionals, parseFlags, parseInteger, range, UsageError, type ParsedFlags } from './args.js';
import { ADMIN_CONNECTION_HELP, ADMIN_OPTIONS, connectAdmin } from './connection.js';
import { formatTable, formatTime, printFields, printJson } from './output.js';
import { formatLogLine } from './logs-command.js';
import { dispatch, listSubcommands, type Subcommand } from './subcommands.js';
import { describeWorker, isContainerSpec, namesWholeWorker, WORKER_HELP, WORKER_OPTIONS, workerFlagsGiven, workerFromFlags } from './worker-flags.js';

const ENDPOINT_OPTIONS = {
  ...ADMIN_OPTIONS,
  name: { type: 'string' },
  'workers-min': { type: 'string' },
  'workers-max': { type: 'string' },
  'idle-timeout': { type: 'string' },
  'execution-timeout-ms': { type: 'string' },
  'scaler-type': { type: 'string' },
  'scaler-value': { type: 'string' },
  'max-attempts': { type: 'string' },
  ...WORKER_OPTIONS,
  'webhook-secret': { type: 'string' },
  'rate-limits': { type: 'string' },
  'price-per-second': { type: 'string' },
  priority: { type: 'string' },
  'share-weight': { type: 'string' },
  preemptible: { type: 'string' },
  flashboot: { type: 'string' },
} as const;

const ENDPOINT_UPDATE_OPTIONS = { ...ENDPOINT_OPTIONS, 'no-worker': { type: 'boolean' } } as const;

type EndpointFlags = ParsedFlags<typeof ENDPOINT_OPTIONS>['values'];
type IntegerSetting = keyof typeof INTEGER_FIELDS;

/** The integer flags, each with its setting; ranges and defaults come from the server's tables. */
const INTEGER_FLAGS: [flag: keyof EndpointFlags & string, setting: IntegerSetting, meaning: string][] = [
  ['workers-min', 'workersMin', 'workers kept running'],
  ['workers-max', 'workersMax', 'most workers started'],
  ['idle-timeout', 'idleTimeout', 'seconds an idle worker is kept'],
  ['execution-timeout-ms', 'executionTimeoutMs', 'longest a job may run, ms'],
  ['scaler-value', 'scalerValue', 'seconds of queue delay / requests per worker'],
  ['max-attempts', 'maxAttempts', 'runs of a job before a lost worker fails it'],
  ['priority', 'priority', "who gets the fleet's GPUs first, higher first"],
  ['share-weight', 'shareWeight', 'weight of its GPU share among equal priorities'],
];

const SETTINGS_HELP = `settings:
  --name NAME                    display name (1–128 characters, default: the id)
${INTEGER_FLAGS.map(([flag, setting, meaning]) => `  ${`--${flag} N`.padEnd(31)}${meaning}: ${range(...INTEGER_FIELDS[setting], ENDPOINT_DEFAULTS[setting])}`).join('\n')}
  --scaler-type TYPE             ${SCALER_TYPES.join(' or ')} (default ${ENDPOINT_DEFAULTS.scalerType})
${WORKER_HELP}
  --webhook-secret SECRET        whsec_… secret that signs webhook calls (Standard Webhooks);
                                 "none" removes it
  --rate-limits LIMITS           this endpoint's rate limits: "off", "default", or JSON such as
                                 '{"run":{"per10s":5000,"concurrent":500},"status":"off"}'
  --price-per-second USD         USD per second of execution (at most 10 decimals), billed to
                                 the submitting key in 'gantry usage'; "none" removes it
  --preemptible true|false       its running workers may be stopped for a higher priority,
                                 their jobs requeued uncounted (default false)
  --flashboot true|false         idle container workers are paused with their GPUs and resumed
                                 for the next job: a warm pool (default false)`;

const endpointSubcommands: Record<string, Subcommand> = {
  create: { summary: 'create an endpoint', usage: `usage: gantry endpoints create ID [settings] [options]\n\n${SETTINGS_HELP}\n\n${ADMIN_CONNECTION_HELP}`, run: endpointsCreate },
  list: { summary: 'list endpoints', usage: `usage: gantry endpoints list [options]\n\n${ADMIN_CONNECTION_HELP}`, run: endpointsList },
  get: { summary: 'show one endpoint', usage: `usage: gantry endpoints get ID [options]\n\n${ADMIN_CONNECTION_HELP}`, run: endpointsGet },
  update: {
    summary: 'change the given settings of an endpoint',
    usage: `usage: gantry endpoints update ID [settings] [options]

Only the given settings change. --worker-* flags without --worker-command or --worker-image
change the endpoint's current worker and keep the rest of it; --worker-env replaces the whole
environment. --worker-command on an image worker overrides the image's CMD; to turn an image
worker into a command worker, give --no-worker first.

${SETTINGS_HELP}
  --no-worker                    remove the worker setting (workers are connected by hand)

${ADMIN_CONNECTION_HELP}`,
    run: endpointsUpdate,
  },
  delete: { summary: 'delete an endpoint with its jobs and workers', usage: `usage: gantry endpoints delete ID [options]\n\n${ADMIN_CONNECTION_HELP}`, run: endpointsDelete },
  workers: { summary: 'its workers (state, pid, restarts, why unhealthy) and Docker hosts', usage: `usage: gantry endpoints workers ID [options]\n\n${ADMIN_CONNECTION_HELP}`, run: endpointsWorkers },
  logs: {
    summary: 'the last output lines of a pool worker',
    usage: `usage: gantry endpoints logs ID WORKER_ID [--lines N] [options]\n\n  --lines N            how many of the last lines: ${range(1, MAX_LOG_LINES, DEFAULT_LOG_LINES)}\n\n${ADMIN_CONNECTION_HELP}`,
    run: endpointsLogs,
  },
};

const ARGUMENTS: Record<string, string> = { create: 'create ID [settings]', get: 'get ID', update: 'update ID [settings]', delete: 'delete ID', workers: 'workers ID', logs: 'logs ID WORKER_ID' };

const ENDPOINTS_USAGE = `usage: gantry endpoints <${Object.keys(endpointSubcommands).join('|')}> [options]

${listSubcommands(endpointSubcommands, (n) => ARGUMENTS[n] ?? n)}

Run 'gantry endpoints <subcommand> --help' for its options.`;

/** `gantry endpoints`, for the list of commands. */
export const endpointsCommand: Subcommand = {
  summary: 'create, list, change and delete endpoints; their workers and logs (admin key)',
  usage: ENDPOINTS_USAGE,
  run: (argv) => dispatch('gantry endpoints', ENDPOINTS_USAGE, endpointSubcommands, argv),
};

async function endpointsCreate(argv: string[]): Promise<number> {
  const { values, positionals } = parseFlags(argv, ENDPOINT_OPTIONS);
  const [id] = expectPositionals(positionals, ['ID']);
  const settings = endpointSettings(values);
  if (workerFlagsGiven(values)) {
    if (!namesWholeWorker(values)) throw new UsageError('--worker-* flags need --worker-command or --worker-image');
    settings.worker = workerFromFlags(values, undefined);
  }
  printEndpoint(await connectAdmin(values).createEndpoint({ id, ...settings }), values.json);
  return 0;
}

async function endpointsList(argv: string[]): Promise<number> {
  const { values, positionals } = parseFlags(argv, ADMIN_OPTIONS);
  expectPositionals(positionals, []);
  const endpoints = await connectAdmin(values).listEndpoints();
  if (values.json) printJson(endpoints);
  else if (endpoints.length === 0) console.log('no endpoints');
  else console.log(formatTable(['ID', 'NAME', 'WORKERS', 'SCALER', 'IDLE', 'EXEC TIMEOUT', 'ATTEMPTS', 'WORKER'], endpoints.map(endpointRow)));
  return 0;
}

async function endpointsGet(argv: string[]): Promise<number> {
  const { values, positionals } = parseFlags(argv, ADMIN_OPTIONS);
  const [id] = expectPositionals(positionals, ['ID']);
  printEndpoint(await connectAdmin(values).getEndpoint(id), values.json);
  return 0;
}

async function endpointsUpdate(argv: string[]): Promise<number> {
  const { values, positionals } = parseFlags(argv, ENDPOINT_UPDATE_OPTIONS);
  const [id] = expectPositionals(positionals, ['ID']);
  const changes = endpointSettings(values);
  const workerFlags = workerFlagsGiven(values);
  if (values['no-worker']) {
    if (workerFlags) throw new UsageError('--no-worker cannot be combined with --worker-* flags');
    changes.worker = null;
  }
  if (Object.keys(changes).length === 0 && !workerFlags) throw new UsageError('nothing to update: give at least one setting');
  const client = connectAdmin(values);
  if (workerFlags) {
    // PATCH replaces the worker setting as a whole: what the flags leave out is kept from now.
    const current = (await client.getEndpoint(id)).worker ?? undefined;
    if (!current && !namesWholeWorker(values)) throw new UsageError(`endpoint ${id} has no worker; give --worker-command or --worker-image`);
    changes.worker = workerFromFlags(values, current);
  }
  printEndpoint(await client.updateEndpoint(id, changes), values.json);
  return 0;
}

async function endpointsDelete(argv: string[]): Promise<number> {
  const { values, positionals } = parseFlags(argv, ADMIN_OPTIONS);
  const [id] = expectPositionals(positionals, ['ID']);
  const result = await connectAdmin(values).deleteEndpoint(id);
  if (values.json) printJson(result);
  else console.log(`deleted endpoint ${id}`);
  return 0;
}

async function endpointsWorkers(argv: string[]): Promise<number> {
  const { values, positionals } = parseFlags(argv, ADMIN_OPTIONS);
  const [id] = expectPositionals(positionals, ['ID']);
  const listing = await connectAdmin(values).workerListing(id);
  if (values.json) printJson(listing.workers);
  else console.log(formatWorkerListing(listing));
  return 0;
}

/**
 * `gantry endpoints workers` for people: the workers' table and, under it, the Docker hosts'
 * (state, engine, GPUs in use, containers, why down) once the gateway has used them: a
 * gateway whose driver never started a container (all hosts still `unknown`, no worker on a
 * host) lists its default host too, which says nothing there.
 *
 * @example formatWorkerListing(await admin.workerListing('sd'))
 */
export function formatWorkerListing(listing: Pick<WorkerListing, 'workers' | 'hosts' | 'coldStarts'>): string {
  const { workers } = listing;
  const hosts = listing.hosts ?? []; // gateways before the hosts view send none
  const parts = [workers.length === 0 ? 'no workers' : formatTable(['ID', 'STATE', 'MANAGED', 'PID', 'HOST', 'CONTAINER', 'JOBS', 'RESTARTS', 'STARTED', 'REASON'], workers.map(workerRow))];
  const used = hosts.some((h) => h.state !== 'unknown') || workers.some((w) => w.host);
  if (hosts.length > 0 && used) parts.push(formatTable(['HOST', 'STATE', 'ENGINE', 'GPUS USED/TOTAL', 'WORKERS', 'ERROR'], hosts.map(hostRow)));
  const cold = listing.coldStarts;
  if (cold && cold.count > 0) {
    const ms = (v: number | null): string => (v === null ? '-' : `${v} ms`);
    const row = (kind: string, c: ColdStartSummary): string[] => [kind, String(c.count), ms(c.p70Ms), ms(c.p90Ms), ms(c.p98Ms), ms(c.lastMs)];
    parts.push(formatTable(['COLD STARTS', 'COUNT', 'P70', 'P90', 'P98', 'LAST'], [row('all', cold), row('start', cold.start), row('resume', cold.resume)]));
  }
  return parts.join('\n\n');
}

function workerRow(w: EndpointWorker): string[] {
  const started = w.managed ? formatTime(w.startedAt) : formatTime(w.lastSeenAt);
  return [w.id, w.state, w.managed ? 'pool' : 'by hand', String(w.pid ?? '-'), w.host ?? '-', w.container ?? '-', String(w.jobs), String(w.restarts ?? '-'), started, [w.progress, w.reason].filter(Boolean).join('; ')];
}

/** A Docker host's row: WORKERS counts the gateway's containers there, of every endpoint. */
function hostRow(h: WorkerHost): string[] {
  return [h.name, h.state, h.engine ?? '-', `${h.gpusInUse}/${h.gpus}`, String(h.workers), h.error ?? ''];
}

async function endpointsLogs(argv: string[]): Promise<number> {
  const { values, positionals } = parseFlags(argv, { ...ADMIN_OPTIONS, lines: { type: 'string' } });
  const [id, workerId] = expectPositionals(positionals, ['ID', 'WORKER_ID']);
  const lines = values.lines === undefined ? undefined : parseInteger('--lines', values.lines, 1, MAX_LOG_LINES);
  const log = await connectAdmin(values).workerLogs(id, workerId, lines);
  if (values.json) printJson(log);
  else for (const l of log) console.log(formatLogLine(l));
  return 0;
}

/** The settings named by flags, checked against the server's ranges; flags not given are left out. */
function endpointSettings(values: EndpointFlags): EndpointSettings {
  const settings: EndpointSettings = {};
  if (values.name !== undefined) {
    const name = values.name.trim();
    if (!name || name.length > 128) throw new UsageError('--name must be 1–128 characters');
    settings.name = name;
  }
  for (const [flag, setting] of INTEGER_FLAGS) {
    const value = values[flag];
    if (typeof value === 'string') Object.assign(settings, { [setting]: parseInteger(`--${flag}`, value, ...INTEGER_FIELDS[setting]) });
  }
  if (settings.workersMin !== undefined && settings.workersMax !== undefined && settings.workersMin > settings.workersMax) {
    throw new UsageError(`--workers-min (${settings.workersMin}) is more than --workers-max (${settings.workersMax})`);
  }
  if (values['scaler-type'] !== undefined) settings.scalerType = parseScalerType(values['scaler-type']);
  const secret = values['webhook-secret'];
  if (secret !== undefined) settings.webhookSecret = secret === 'none' ? null : secret;
  if (values['rate-limits'] !== undefined) settings.rateLimits = parseRateLimitsFlag(values['rate-limits']);
  for (const flag of ['preemptible', 'flashboot'] as const) {
    const value = values[flag];
    if (value === undefined) continue;
    if (value !== 'true' && value !== 'false') throw new UsageError(`--${flag} must be true or false, got '${value}'`);
    settings[flag] = value === 'true';
  }
  const price = values['price-per-second'];
  if (price !== undefined) {
    if (price !== 'none' && !/^\d+(\.\d{1,10})?$/.test(price)) throw new UsageError(`--price-per-second must be USD with at most 10 decimals, or none, got '${price}'`);
    settings.pricePerSecond = price === 'none' ? null : price;
  }
  return settings;
}

/** --rate-limits: "off", "default" (the gateway's limits), or a JSON object; the server checks the operations and numbers. */
function parseRateLimitsFlag(value: string): EndpointRateLimits | null {
  const text = value.trim();
  if (text === 'off') return 'off';
  if (text === 'default') return null;
  try {
    const parsed = JSON.parse(text) as unknown;
    if (isObject(parsed)) return parsed as EndpointRateLimits;
  } catch {
    // reported below
  }
  throw new UsageError(`--rate-limits must be off, default or a JSON object such as '{"run":{"per10s":5000}}', got '${value}'`);
}

function parseScalerType(value: string): ScalerType {
  const upper = value.trim().toUpperCase();
  const found = SCALER_TYPES.find((t) => t === upper);
  if (!found) throw new UsageError(`--scaler-type must be ${SCALER_TYPES.join(' or ')}, got '${value}'`);
  return found;
}

function printEndpoint(endpoint: Endpoint, json: boolean | undefined): void {
  if (json) return printJson(endpoint);
  const worker = endpoint.worker;
  const fields: [string, string][] = [
    ['id', endpoint.id],
    ['name', endpoint.name],
    ['workers', `${endpoint.workersMin}..${endpoint.workersMax}`],
    ['idle timeout', `${endpoint.idleTimeout} s`],
    ['execution timeout', `${endpoint.executionTimeoutMs} ms`],
    ['scaler', `${endpoint.scalerType} ${endpoint.scalerValue}`],
    ['max attempts', String(endpoint.maxAttempts)],
    worker && isContainerSpec(worker) ? ['worker image', describeWorker(worker)] : ['worker command', worker?.command ?? '-'],
    ['webhook signing', endpoint.webhookSigning ? 'on' : 'off'],
    ['rate limits', endpoint.rateLimits == null ? 'default' : JSON.stringify(endpoint.rateLimits)],
  ];
  const env = Object.entries(worker?.env ?? {});
  if (env.length > 0) fields.push(['worker env', env.map(([k, v]) => `${k}=${v}`).join(' ')]);
  if (worker && !isContainerSpec(worker) && worker.cwd) fields.push(['worker cwd', worker.cwd]);
  if (worker && isContainerSpec(worker) && worker.command !== undefined) fields.push(['worker command', Array.isArray(worker.command) ? JSON.stringify(worker.command) : worker.command]);
  if (worker && isContainerSpec(worker) && worker.volumes?.length) fields.push(['worker volumes', worker.volumes.join(' ')]);
  fields.push(['created', formatTime(endpoint.createdAt)], ['updated', formatTime(endpoint.updatedAt)]);
  printFields(fields);
}

function endpointRow(ep: Endpoint): string[] {
  return [ep.id, ep.name, `${ep.workersMin}..${ep.workersMax}`, `${ep.scalerType} ${ep.scalerValue}`, `${ep.idleTimeout}s`, `${ep.executionTimeoutMs}ms`, String(ep.maxAttempts), describeWorker(ep.worker)];
}
