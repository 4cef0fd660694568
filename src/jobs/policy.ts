import { AppError, invalidParameter } from '../model/errors.js';
import { isObject, RawJson, type JsonTextOrBytes } from '../model/json.js';

/** Spec limits of the `policy` object (RunPod's spec; docs/api.md, POST `/run` body fields). */
export const POLICY_LIMITS = {
  defaultExecutionTimeoutMs: 600_000,
  minExecutionTimeoutMs: 5_000, // exclusive: "must be greater than 5000"
  maxExecutionTimeoutMs: 7 * 86_400_000,
  defaultTtlMs: 86_400_000,
  minTtlMs: 10_000,
  maxTtlMs: 7 * 86_400_000,
} as const;

/** A job's own S3 bucket for its outputs (the spec's s3Config). */
export interface S3Config {
  accessId: string;
  accessSecret: string;
  bucketName: string;
  endpointUrl: string;
}

/** A validated submit body (/run, /runsync). */
export interface SubmitRequest {
  /**
   * `input` as parsed (what an endpoint's validateInput hook checks); undefined when a large body
   * was parsed off the event loop and `input` came as its text's bytes only (parse inputJson when needed).
   */
  input: Record<string, unknown> | undefined;
  /**
   * `input`, re-serialised once: the stored text is always canonical JSON of an object. A large
   * body's comes as a RawJson (its UTF-8 bytes, as sent), passed on as it is: decode it
   * (`textOf`) only where a string is needed.
   */
  inputJson: JsonTextOrBytes;
  webhook: string | null;
  s3Config: S3Config | null;
  executionTimeoutMs: number;
  lowPriority: boolean;
  ttlMs: number;
}

const BODY_FIELDS = new Set(['input', 'webhook', 'policy', 's3Config']);
const POLICY_FIELDS = new Set(['executionTimeout', 'lowPriority', 'ttl']);
const S3_FIELDS = ['accessId', 'accessSecret', 'bucketName', 'endpointUrl'] as const;

function integerIn(field: string, value: unknown, min: number, max: number, minExclusive = false): number {
  if (typeof value !== 'number' || !Number.isInteger(value)) throw invalidParameter(field, 'must be an integer (milliseconds)');
  if (minExclusive ? value <= min : value < min) {
    throw invalidParameter(field, minExclusive ? `must be greater than ${min}` : `must be at least ${min}`);
  }
  if (value > max) throw invalidParameter(field, `must be at most ${max}`);
  return value;
}

/**
 * Validates a submit body and applies the defaults; throws a 400 AppError naming the field.
 *
 * @example parseSubmitBody({ input: { prompt: 'hi' }, policy: { ttl: 60000 } }, 600000).ttlMs === 60000
 */
export function parseSubmitBody(body: unknown, endpointExecutionTimeoutMs: number): SubmitRequest {
  if (!isObject(body)) throw new AppError('INVALID_BODY', 'Invalid request body: expected a JSON object with an "input" field');
  for (const key of Object.keys(body)) {
    if (!BODY_FIELDS.has(key)) throw invalidParameter(key, 'is not a known field (expected input, webhook, policy, s3Config)');
  }
  if (body.input === undefined) throw invalidParameter('input', 'is required');
  const raw = body.input instanceof RawJson ? body.input : undefined;
  if (raw ? raw.kind !== 'object' : !isObject(body.input)) throw invalidParameter('input', 'must be a JSON object');

  let webhook: string | null = null;
  if (body.webhook !== undefined && body.webhook !== null) {
    if (typeof body.webhook !== 'string') throw invalidParameter('webhook', 'must be a URL string');
    let url: URL;
    try {
      url = new URL(body.webhook);
    } catch {
      throw invalidParameter('webhook', 'must be an absolute http(s) URL');
    }
    if (url.protocol !== 'http:' && url.protocol !== 'https:') throw invalidParameter('webhook', 'must be an absolute http(s) URL');
    if (body.webhook.length > 2048) throw invalidParameter('webhook', 'must be at most 2048 characters');
    webhook = body.webhook;
  }

  let executionTimeoutMs = endpointExecutionTimeoutMs;
  let lowPriority = false;
  let ttlMs: number = POLICY_LIMITS.defaultTtlMs;
  if (body.policy !== undefined && body.policy !== null) {
    if (!isObject(body.policy)) throw invalidParameter('policy', 'must be an object');
    const policy = body.policy;
    for (const key of Object.keys(policy)) {
      if (!POLICY_FIELDS.has(key)) throw invalidParameter(`policy.${key}`, 'is not a known field (expected executionTimeout, lowPriority, ttl)');
    }
    if (policy.executionTimeout !== undefined) {
      executionTimeoutMs = integerIn('policy.executionTimeout', policy.executionTimeout, POLICY_LIMITS.minExecutionTimeoutMs, POLICY_LIMITS.maxExecutionTimeoutMs, true);
    }
    if (policy.lowPriority !== undefined) {
      if (typeof policy.lowPriority !== 'boolean') throw invalidParameter('policy.lowPriority', 'must be a boolean');
      lowPriority = policy.lowPriority;
    }
    if (policy.ttl !== undefined) ttlMs = integerIn('policy.ttl', policy.ttl, POLICY_LIMITS.minTtlMs, POLICY_LIMITS.maxTtlMs);
  }

  let s3Config: S3Config | null = null;
  if (body.s3Config !== undefined && body.s3Config !== null) {
    if (!isObject(body.s3Config)) throw invalidParameter('s3Config', 'must be an object');
    const raw = body.s3Config;
    for (const key of Object.keys(raw)) {
      if (!(S3_FIELDS as readonly string[]).includes(key)) throw invalidParameter(`s3Config.${key}`, `is not a known field (expected ${S3_FIELDS.join(', ')})`);
    }
    for (const key of S3_FIELDS) {
      if (typeof raw[key] !== 'string' || raw[key] === '') throw invalidParameter(`s3Config.${key}`, 'must be a non-empty string');
    }
    s3Config = raw as unknown as S3Config;
  }

  if (raw) return { input: undefined, inputJson: raw, webhook, s3Config, executionTimeoutMs, lowPriority, ttlMs };
  const input = body.input as Record<string, unknown>;
  return { input, inputJson: JSON.stringify(input), webhook, s3Config, executionTimeoutMs, lowPriority, ttlMs };
}
