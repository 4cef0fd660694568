import { AppError, invalidParameter } from '../model/errors.js';
import type { EndpointRecord } from '../model/records.js';
import { isObject } from '../model/json.js';
import { usdNumber, usdToUnits } from '../model/money.js';
import { GPU_TYPE } from '../config/docker-config.js';

/** Endpoint settings, named as RunPod's, with Gantry's defaults. */
export const ENDPOINT_DEFAULTS = {
  workersMin: 0,
  workersMax: 3,
  idleTimeout: 5,
  executionTimeoutMs: 600_000,
  scalerType: 'QUEUE_DELAY',
  scalerValue: 4,
  maxAttempts: 3,
  priority: 50,
  preemptible: false,
  flashboot: false,
  shareWeight: 1,
} as const;

/** A worker run as a local process: a shell command, its environment and folder. */
export interface ProcessWorkerSettings {
  command: string;
  env?: Record<string, string>;
  cwd?: string;
}

/**
 * A worker run as a container of `image` on a Docker host (docs/scaling.md): `command`
 * overrides the image's CMD (a string through `/bin/sh -c`, an array as is), `gpus` is a count
 * or exact device ids, `memoryMb` a hard limit, `volumes` Docker binds (`source:target[:ro]`).
 */
export interface ContainerWorkerSettings {
  image: string;
  command?: string | string[];
  env?: Record<string, string>;
  gpus?: number | string[];
  /** Acceptable GPU models for a count of `gpus`, most preferred first (up to three, as RunPod's `gpuTypeIds`). */
  gpuTypes?: string[];
  memoryMb?: number;
  volumes?: string[];
  /** The id of a saved registry login (POST /admin/v1/registry-credentials) the image is pulled with. */
  registryCredentials?: string;
  /** Pull the image to every eligible host in the background when the endpoint is created or its image changes. */
  prepull?: boolean;
}

/** How the worker pool starts an endpoint's workers: a local command, or a container image. */
export type WorkerSettings = ProcessWorkerSettings | ContainerWorkerSettings;

/** Whether worker settings name an image (the Docker driver runs them). */
export function isContainerWorker(settings: WorkerSettings): settings is ContainerWorkerSettings {
  return 'image' in settings && typeof settings.image === 'string';
}

const ID = /^[A-Za-z0-9][A-Za-z0-9_-]{0,63}$/;
/** Words under /v2/ that are not endpoint ids. */
const RESERVED = new Set(['admin', 'console', 'files', 'metrics', 'healthz']);

/** The integer settings and their [min, max], as the API enforces them (the CLI's help and checks read them too). */
export const INTEGER_FIELDS: Readonly<Record<'workersMin' | 'workersMax' | 'idleTimeout' | 'executionTimeoutMs' | 'scalerValue' | 'maxAttempts' | 'priority' | 'shareWeight', readonly [number, number]>> = {
  workersMin: [0, 1000],
  workersMax: [0, 1000],
  idleTimeout: [1, 86_400],
  executionTimeoutMs: [5_001, 7 * 86_400_000],
  scalerValue: [1, 100_000],
  maxAttempts: [1, 100],
  priority: [0, 100],
  shareWeight: [1, 100],
};
/** The true/false settings (the allocator's, docs/scaling.md). */
export const BOOLEAN_FIELDS = ['preemptible', 'flashboot'] as const;
/** Every field a create or update body may have (anything else is refused; /openapi.json's EndpointSettings lists the same). */
export const SETTING_FIELDS: ReadonlySet<string> = new Set(['id', 'name', 'worker', 'scalerType', 'webhookSecret', 'rateLimits', 'pricePerSecond', ...Object.keys(INTEGER_FIELDS), ...BOOLEAN_FIELDS]);
/** The operations an endpoint's `rateLimits` may name (the rows of the spec's table, plus long-poll and openai). */
export const RATE_LIMITED_OPERATIONS = ['run', 'runsync', 'status', 'long-poll', 'cancel', 'purge-queue', 'requests', 'openai'] as const;
/** The largest `per10s` or `concurrent` a `rateLimits` entry may name. */
export const MAX_RATE = 1_000_000_000;
/** The largest `pricePerSecond` in USD (a price past it is a typing error, and its units stay exact in a double). */
export const MAX_PRICE_PER_SECOND_USD = 1000;
/** Standard Webhooks secret: `whsec_` and 24–64 random bytes in base64. */
const WEBHOOK_SECRET = /^whsec_[A-Za-z0-9+/]{32,88}={0,2}$/;

const PROCESS_FIELDS = ['command', 'env', 'cwd'];
const CONTAINER_FIELDS = ['image', 'command', 'env', 'gpus', 'gpuTypes', 'memoryMb', 'volumes', 'registryCredentials', 'prepull'];
/** A registry credential's id (registry-credentials.ts makes them: `rc_` and 16 hex). */
export const CREDENTIAL_ID = /^rc_[A-Za-z0-9]{1,64}$/;
/** Docker's image reference grammar: [registry[:port]/]path[:tag][@sha256:digest]. */
const PATH_PART = '[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*';
const REGISTRY = '(?:[A-Za-z0-9](?:[A-Za-z0-9-]*[A-Za-z0-9])?(?:\\.[A-Za-z0-9](?:[A-Za-z0-9-]*[A-Za-z0-9])?)*(?::[0-9]+)?/)?';
const IMAGE = new RegExp(`^${REGISTRY}${PATH_PART}(?:/${PATH_PART})*(?::[A-Za-z0-9_][A-Za-z0-9_.-]{0,127})?(?:@sha256:[a-f0-9]{64})?$`);
/** `source:target[:ro|rw]`: an absolute host path or a named volume, mounted at an absolute path. */
const VOLUME = /^(\/[^:\0]*|[A-Za-z0-9][A-Za-z0-9_.-]*):\/[^:\0]*(:(ro|rw))?$/;
const GPU_ID = /^[A-Za-z0-9][A-Za-z0-9_.:-]{0,127}$/;
const MAX_TEXT = 65_536;

function parseEnv(value: unknown): Record<string, string> {
  if (!isObject(value)) throw invalidParameter('worker.env', 'must be an object of strings');
  if (Object.keys(value).length > 512) throw invalidParameter('worker.env', 'has more than 512 variables');
  for (const [k, v] of Object.entries(value)) {
    if (typeof v !== 'string') throw invalidParameter(`worker.env.${k}`, 'must be a string');
    if (k === '' || /[=\0]/.test(k) || v.includes('\0')) throw invalidParameter(`worker.env.${k}`, 'must be a variable name without = or NUL, and a value without NUL');
  }
  return value as Record<string, string>;
}

function checkFields(value: Record<string, unknown>, fields: string[], kind: string): void {
  for (const key of Object.keys(value)) {
    if (!fields.includes(key)) throw invalidParameter(`worker.${key}`, `is not a known field of ${kind} (expected ${fields.join(', ')})`);
  }
}

function parseProcessWorker(value: Record<string, unknown>): ProcessWorkerSettings {
  checkFields(value, PROCESS_FIELDS, 'a command worker');
  if (typeof value.command !== 'string' || value.command.trim() === '') throw invalidParameter('worker.command', 'must be a non-empty string');
  const worker: ProcessWorkerSettings = { command: value.command };
  if (value.env !== undefined) worker.env = parseEnv(value.env);
  if (value.cwd !== undefined) {
    if (typeof value.cwd !== 'string' || value.cwd === '') throw invalidParameter('worker.cwd', 'must be a non-empty string');
    worker.cwd = value.cwd;
  }
  return worker;
}

function parseContainerCommand(value: unknown): string | string[] {
  const ok = (s: unknown): s is string => typeof s === 'string' && s.length <= MAX_TEXT && !s.includes('\0');
  if (typeof value === 'string' && value.trim() !== '' && ok(value)) return value;
  if (Array.isArray(value) && value.length > 0 && value.length <= 1024 && value.every(ok) && (value[0] as string) !== '') return value as string[];
  throw invalidParameter('worker.command', 'must be a non-empty string (run by /bin/sh -c) or a non-empty array of strings (exec form)');
}

function parseGpus(value: unknown): number | string[] {
  if (typeof value === 'number' && Number.isInteger(value) && value >= 0 && value <= 64) return value;
  if (Array.isArray(value) && value.length > 0 && value.length <= 64 && value.every((id) => typeof id === 'string' && GPU_ID.test(id)) && new Set(value).size === value.length) {
    return value as string[];
  }
  throw invalidParameter('worker.gpus', 'must be a GPU count from 0 to 64, or a list of distinct device ids (e.g. ["0", "1"])');
}

/** `worker.gpuTypes`: one to three distinct model names, most preferred first; only with a count of `gpus`. */
function parseGpuTypes(value: unknown, gpus: number | string[] | undefined): string[] {
  if (!Array.isArray(value) || value.length === 0 || value.length > 3 || !value.every((t) => typeof t === 'string' && GPU_TYPE.test(t)) || new Set(value).size !== value.length) {
    throw invalidParameter('worker.gpuTypes', 'must be 1 to 3 distinct GPU model names in order of preference (e.g. ["L4", "A100-80GB"]), as the Docker hosts name them in GANTRY_DOCKER_HOSTS');
  }
  if (typeof gpus !== 'number' || gpus < 1) throw invalidParameter('worker.gpuTypes', 'needs worker.gpus as a count of at least 1 (exact device ids already say which devices)');
  return value as string[];
}

function parseVolumes(value: unknown): string[] {
  if (!Array.isArray(value) || value.length > 32) throw invalidParameter('worker.volumes', 'must be an array of at most 32 "source:target[:ro]" strings');
  for (const [i, v] of value.entries()) {
    if (typeof v !== 'string' || v.length > 4096 || !VOLUME.test(v)) {
      throw invalidParameter(`worker.volumes[${i}]`, 'must be "source:target[:ro|rw]": an absolute host path or a volume name, and an absolute path in the container');
    }
  }
  return value as string[];
}

function parseContainerWorker(value: Record<string, unknown>): ContainerWorkerSettings {
  checkFields(value, CONTAINER_FIELDS, 'an image worker');
  if (typeof value.image !== 'string' || value.image.length > 512 || !IMAGE.test(value.image)) {
    throw invalidParameter('worker.image', 'must be an image reference such as "repo/name:tag" or "registry:5000/name@sha256:<digest>"');
  }
  const worker: ContainerWorkerSettings = { image: value.image };
  if (value.command !== undefined) worker.command = parseContainerCommand(value.command);
  if (value.env !== undefined) worker.env = parseEnv(value.env);
  if (value.gpus !== undefined) worker.gpus = parseGpus(value.gpus);
  if (value.gpuTypes !== undefined) worker.gpuTypes = parseGpuTypes(value.gpuTypes, worker.gpus);
  if (value.memoryMb !== undefined) {
    const mb = value.memoryMb;
    if (typeof mb !== 'number' || !Number.isInteger(mb) || mb < 6 || mb > 4_194_304) throw invalidParameter('worker.memoryMb', 'must be an integer from 6 to 4194304 (MiB)');
    worker.memoryMb = mb;
  }
  if (value.volumes !== undefined) worker.volumes = parseVolumes(value.volumes);
  if (value.registryCredentials !== undefined) {
    if (typeof value.registryCredentials !== 'string' || !CREDENTIAL_ID.test(value.registryCredentials)) {
      throw invalidParameter('worker.registryCredentials', 'must be the id of a saved registry credential (rc_…, from POST /admin/v1/registry-credentials)');
    }
    worker.registryCredentials = value.registryCredentials;
  }
  if (value.prepull !== undefined) {
    if (typeof value.prepull !== 'boolean') throw invalidParameter('worker.prepull', 'must be true or false');
    worker.prepull = value.prepull;
  }
  return worker;
}

function parseWorker(value: unknown): string | null {
  if (value === null) return null;
  if (!isObject(value)) throw invalidParameter('worker', 'must be an object {command, env?, cwd?} or {image, command?, env?, gpus?, gpuTypes?, memoryMb?, volumes?, registryCredentials?, prepull?}, or null');
  return JSON.stringify(value.image !== undefined ? parseContainerWorker(value) : parseProcessWorker(value));
}

function parseRate(op: string, value: unknown): unknown {
  if (value === 'off') return value;
  if (!isObject(value)) throw invalidParameter(`rateLimits.${op}`, 'must be "off" or an object {per10s?, concurrent?}');
  for (const [key, n] of Object.entries(value)) {
    if (key !== 'per10s' && key !== 'concurrent') throw invalidParameter(`rateLimits.${op}.${key}`, 'is not a known field (expected per10s, concurrent)');
    if (typeof n !== 'number' || !Number.isInteger(n) || n < 1 || n > MAX_RATE) throw invalidParameter(`rateLimits.${op}.${key}`, `must be an integer from 1 to ${MAX_RATE}`);
  }
  return value;
}

/**
 * An endpoint's `rateLimits` as stored JSON text: `"off"` (no limits for this endpoint), an
 * object raising or lowering the defaults per operation (`{run: {per10s, concurrent}, status:
 * "off"}`), or null (the defaults).
 */
function parseRateLimits(value: unknown): string | null {
  if (value === null) return null;
  if (value === 'off') return JSON.stringify(value);
  if (!isObject(value)) throw invalidParameter('rateLimits', 'must be "off", null, or an object of operations ({"run": {"per10s": 5000, "concurrent": 500}, "status": "off"})');
  const known: readonly string[] = RATE_LIMITED_OPERATIONS;
  const limits: Record<string, unknown> = {};
  for (const [op, rate] of Object.entries(value)) {
    if (!known.includes(op)) throw invalidParameter(`rateLimits.${op}`, `is not a rate-limited operation (expected ${known.join(', ')})`);
    limits[op] = parseRate(op, rate);
  }
  return JSON.stringify(limits);
}

/** `pricePerSecond`: USD per second of execution (at most 10 decimals), or null for none; stored in units of 1e-10 USD. */
function parsePricePerSecond(value: unknown): number | null {
  if (value === null) return null;
  const units = usdToUnits(value);
  if (units === null || units > MAX_PRICE_PER_SECOND_USD * 1e10) {
    throw invalidParameter('pricePerSecond', `must be USD per second of execution from 0 to ${MAX_PRICE_PER_SECOND_USD} with at most 10 decimals (a number or decimal text), or null`);
  }
  return units;
}

/**
 * Validates a create (POST) or update (PATCH) body. On update, `existing` supplies the fields
 * not given and `id` may not change. Throws a 400 naming the field. `seal` encrypts a given
 * `webhookSecret` for storage (null removes it).
 */
export function parseEndpointSettings(body: unknown, existing: EndpointRecord | undefined, now: number, seal: (plain: string) => string): EndpointRecord {
  if (!isObject(body)) throw new AppError('INVALID_BODY', 'Invalid request body: expected a JSON object');
  for (const key of Object.keys(body)) {
    if (!SETTING_FIELDS.has(key)) throw invalidParameter(key, 'is not a known endpoint setting');
  }
  let id: string;
  if (existing) {
    if (body.id !== undefined && body.id !== existing.id) throw invalidParameter('id', 'cannot be changed');
    id = existing.id;
  } else {
    if (typeof body.id !== 'string' || !ID.test(body.id)) {
      throw invalidParameter('id', 'must be 1-64 letters, digits, - or _, starting with a letter or digit');
    }
    if (RESERVED.has(body.id)) throw invalidParameter('id', `"${body.id}" is reserved`);
    id = body.id;
  }
  const record: EndpointRecord = existing
    ? { ...existing, updatedAt: now }
    : { id, name: id, ...ENDPOINT_DEFAULTS, workerJson: null, webhookSecret: null, rateLimitsJson: null, priceUnitsPerSecond: null, createdAt: now, updatedAt: now };
  if (body.name !== undefined) {
    if (typeof body.name !== 'string' || body.name.length === 0 || body.name.length > 128) throw invalidParameter('name', 'must be a string of 1-128 characters');
    record.name = body.name;
  }
  for (const [field, [min, max]] of Object.entries(INTEGER_FIELDS)) {
    const value = body[field];
    if (value === undefined) continue;
    if (typeof value !== 'number' || !Number.isInteger(value)) throw invalidParameter(field, 'must be an integer');
    if (value < min || value > max) throw invalidParameter(field, `must be from ${min} to ${max}`);
    (record as unknown as Record<string, number>)[field] = value;
  }
  for (const field of BOOLEAN_FIELDS) {
    const value = body[field];
    if (value === undefined) continue;
    if (typeof value !== 'boolean') throw invalidParameter(field, 'must be true or false');
    record[field] = value;
  }
  if (body.scalerType !== undefined) {
    if (body.scalerType !== 'QUEUE_DELAY' && body.scalerType !== 'REQUEST_COUNT') throw invalidParameter('scalerType', 'must be QUEUE_DELAY or REQUEST_COUNT');
    record.scalerType = body.scalerType;
  }
  if (body.worker !== undefined) record.workerJson = parseWorker(body.worker);
  if (body.rateLimits !== undefined) record.rateLimitsJson = parseRateLimits(body.rateLimits);
  if (body.pricePerSecond !== undefined) record.priceUnitsPerSecond = parsePricePerSecond(body.pricePerSecond);
  if (body.webhookSecret !== undefined) {
    if (body.webhookSecret !== null && (typeof body.webhookSecret !== 'string' || !WEBHOOK_SECRET.test(body.webhookSecret))) {
      throw invalidParameter('webhookSecret', 'must be a Standard Webhooks secret: whsec_ and 24-64 random bytes in base64, or null');
    }
    record.webhookSecret = body.webhookSecret === null ? null : seal(body.webhookSecret);
  }
  if (record.workersMin > record.workersMax) throw invalidParameter('workersMin', `must not exceed workersMax (${record.workersMax})`);
  return record;
}

/** An endpoint as the admin API shows it (renderEndpoint): its settings, with times as ISO text. */
export interface RenderedEndpoint extends Omit<EndpointRecord, 'workerJson' | 'webhookSecret' | 'rateLimitsJson' | 'priceUnitsPerSecond' | 'createdAt' | 'updatedAt'> {
  /** USD per second of execution; null when the endpoint is not priced by time. */
  pricePerSecond: number | null;
  /** Whether webhook calls are signed; the secret itself never leaves. */
  webhookSigning: boolean;
  worker: WorkerSettings | null;
  /** The endpoint's own rate limits as stored; null: the gateway's defaults. */
  rateLimits: unknown;
  createdAt: string;
  updatedAt: string;
}

/** The endpoint as the admin API shows it; the webhook secret never leaves, only whether one is set. */
export function renderEndpoint(endpoint: EndpointRecord): RenderedEndpoint {
  const { workerJson, webhookSecret, rateLimitsJson, priceUnitsPerSecond, createdAt, updatedAt, ...settings } = endpoint;
  return {
    ...settings,
    pricePerSecond: priceUnitsPerSecond === null ? null : usdNumber(BigInt(priceUnitsPerSecond)),
    webhookSigning: webhookSecret !== null,
    worker: workerJson === null ? null : (JSON.parse(workerJson) as WorkerSettings),
    rateLimits: rateLimitsJson === null ? null : (JSON.parse(rateLimitsJson) as unknown),
    createdAt: new Date(createdAt).toISOString(),
    updatedAt: new Date(updatedAt).toISOString(),
  };
}
