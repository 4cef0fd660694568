import { AppError, invalidParameter } from '../errors.js';
import type { EndpointRecord } from '../store/store.js';

/** Endpoint settings, named as RunPod's, with Gantry's defaults. */
export const ENDPOINT_DEFAULTS = {
  workersMin: 0,
  workersMax: 3,
  idleTimeout: 5,
  executionTimeoutMs: 600_000,
  scalerType: 'QUEUE_DELAY',
  scalerValue: 4,
  maxAttempts: 3,
} as const;

export interface WorkerSettings {
  command: string;
  env?: Record<string, string>;
  cwd?: string;
}

const ID = /^[A-Za-z0-9][A-Za-z0-9_-]{0,63}$/;
/** Words under /v2/ that are not endpoint ids. */
const RESERVED = new Set(['admin', 'console', 'files', 'metrics', 'healthz']);

const INTEGER_FIELDS: Record<string, [number, number]> = {
  workersMin: [0, 1000],
  workersMax: [0, 1000],
  idleTimeout: [1, 86_400],
  executionTimeoutMs: [5_001, 7 * 86_400_000],
  scalerValue: [1, 100_000],
  maxAttempts: [1, 100],
};
const FIELDS = new Set(['id', 'name', 'worker', 'scalerType', 'webhookSecret', ...Object.keys(INTEGER_FIELDS)]);
/** Standard Webhooks secret: `whsec_` and 24–64 random bytes in base64. */
const WEBHOOK_SECRET = /^whsec_[A-Za-z0-9+/]{32,88}={0,2}$/;

function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

function parseWorker(value: unknown): string | null {
  if (value === null) return null;
  if (!isObject(value)) throw invalidParameter('worker', 'must be an object {command, env?, cwd?} or null');
  for (const key of Object.keys(value)) {
    if (!['command', 'env', 'cwd'].includes(key)) throw invalidParameter(`worker.${key}`, 'is not a known field (expected command, env, cwd)');
  }
  if (typeof value.command !== 'string' || value.command.trim() === '') throw invalidParameter('worker.command', 'must be a non-empty string');
  const worker: WorkerSettings = { command: value.command };
  if (value.env !== undefined) {
    if (!isObject(value.env)) throw invalidParameter('worker.env', 'must be an object of strings');
    for (const [k, v] of Object.entries(value.env)) {
      if (typeof v !== 'string') throw invalidParameter(`worker.env.${k}`, 'must be a string');
    }
    worker.env = value.env as Record<string, string>;
  }
  if (value.cwd !== undefined) {
    if (typeof value.cwd !== 'string' || value.cwd === '') throw invalidParameter('worker.cwd', 'must be a non-empty string');
    worker.cwd = value.cwd;
  }
  return JSON.stringify(worker);
}

/**
 * Validates a create (POST) or update (PATCH) body. On update, `existing` supplies the fields
 * not given and `id` may not change. Throws a 400 naming the field. `seal` encrypts a given
 * `webhookSecret` for storage (null removes it).
 */
export function parseEndpointSettings(body: unknown, existing: EndpointRecord | undefined, now: number, seal: (plain: string) => string): EndpointRecord {
  if (!isObject(body)) throw new AppError(400, 'INVALID_BODY', 'Invalid request body: expected a JSON object');
  for (const key of Object.keys(body)) {
    if (!FIELDS.has(key)) throw invalidParameter(key, 'is not a known endpoint setting');
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
    : { id, name: id, ...ENDPOINT_DEFAULTS, workerJson: null, webhookSecret: null, createdAt: now, updatedAt: now };
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
  if (body.scalerType !== undefined) {
    if (body.scalerType !== 'QUEUE_DELAY' && body.scalerType !== 'REQUEST_COUNT') throw invalidParameter('scalerType', 'must be QUEUE_DELAY or REQUEST_COUNT');
    record.scalerType = body.scalerType;
  }
  if (body.worker !== undefined) record.workerJson = parseWorker(body.worker);
  if (body.webhookSecret !== undefined) {
    if (body.webhookSecret !== null && (typeof body.webhookSecret !== 'string' || !WEBHOOK_SECRET.test(body.webhookSecret))) {
      throw invalidParameter('webhookSecret', 'must be a Standard Webhooks secret: whsec_ and 24-64 random bytes in base64, or null');
    }
    record.webhookSecret = body.webhookSecret === null ? null : seal(body.webhookSecret);
  }
  if (record.workersMin > record.workersMax) throw invalidParameter('workersMin', `must not exceed workersMax (${record.workersMax})`);
  return record;
}

/** The endpoint as the admin API shows it; the webhook secret never leaves, only whether one is set. */
export function renderEndpoint(endpoint: EndpointRecord) {
  const { workerJson, webhookSecret, createdAt, updatedAt, ...settings } = endpoint;
  return {
    ...settings,
    webhookSigning: webhookSecret !== null,
    worker: workerJson === null ? null : (JSON.parse(workerJson) as WorkerSettings),
    createdAt: new Date(createdAt).toISOString(),
    updatedAt: new Date(updatedAt).toISOString(),
  };
}
