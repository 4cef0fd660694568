import { isAbsolute, resolve } from 'node:path';
import type { ImageModelKind } from './pricing.js';
import type { Provider } from './tensors.js';

/**
 * Settings of the public image endpoints, read from the environment (docs/configuration.md).
 * A bad value fails at start-up naming the variable; nothing falls back silently.
 */
export interface ImageConfig {
  /** Endpoint ids (GANTRY_IMAGE_QUALITY_ID, GANTRY_IMAGE_FAST_ID). */
  qualityId: string;
  fastId: string;
  /** Start one image worker process per public endpoint (GANTRY_IMAGE_WORKERS=on|off). */
  workers: boolean;
  /** onnxruntime execution provider (GANTRY_IMAGE_PROVIDER=cpu|cuda); no fallback. */
  provider: Provider;
  /** onnxruntime intra-op threads per worker (GANTRY_IMAGE_THREADS, 0 = one per core). */
  threads: number;
  /** A real exported model folder per endpoint (GANTRY_IMAGE_QUALITY_MODEL / _FAST_MODEL); null = the tiny demo model. */
  qualityModel: string | null;
  fastModel: string | null;
  /** Lifetime of a signed image URL (GANTRY_IMAGE_URL_TTL_S, default 7 days; S3 presigning allows at most 7 days). */
  urlTtlSeconds: number;
  /** A global S3-compatible bucket for images (GANTRY_S3_*); null = the gateway's local folder. */
  s3: S3Settings | null;
}

export interface S3Settings {
  endpoint: string;
  bucket: string;
  accessKeyId: string;
  secretAccessKey: string;
  region: string;
}

export const IMAGE_DEFAULTS: ImageConfig = {
  qualityId: 'image-quality',
  fastId: 'image-fast',
  workers: true,
  provider: 'cpu',
  threads: 0,
  qualityModel: null,
  fastModel: null,
  urlTtlSeconds: 7 * 86_400,
  s3: null,
};

const ID = /^[A-Za-z0-9][A-Za-z0-9_-]{0,63}$/;

/**
 * Reads GANTRY_IMAGE_* and GANTRY_S3_*; throws naming the variable on a bad value.
 *
 * @example loadImageConfig({ GANTRY_IMAGE_WORKERS: 'off' }).workers === false
 */
export function loadImageConfig(env: NodeJS.ProcessEnv): ImageConfig {
  const config: ImageConfig = { ...IMAGE_DEFAULTS };
  const bad = (name: string, expected: string): Error => new Error(`Invalid ${name}=${JSON.stringify(env[name])}: expected ${expected}`);
  for (const [field, name] of [['qualityId', 'GANTRY_IMAGE_QUALITY_ID'], ['fastId', 'GANTRY_IMAGE_FAST_ID']] as const) {
    const value = env[name];
    if (value === undefined || value === '') continue;
    if (!ID.test(value)) throw bad(name, 'an endpoint id of letters, digits, - and _');
    config[field] = value;
  }
  if (config.qualityId === config.fastId) throw new Error('GANTRY_IMAGE_QUALITY_ID and GANTRY_IMAGE_FAST_ID must differ');
  if (env.GANTRY_IMAGE_WORKERS) {
    if (env.GANTRY_IMAGE_WORKERS !== 'on' && env.GANTRY_IMAGE_WORKERS !== 'off') throw bad('GANTRY_IMAGE_WORKERS', 'on or off');
    config.workers = env.GANTRY_IMAGE_WORKERS === 'on';
  }
  if (env.GANTRY_IMAGE_PROVIDER) {
    if (env.GANTRY_IMAGE_PROVIDER !== 'cpu' && env.GANTRY_IMAGE_PROVIDER !== 'cuda') throw bad('GANTRY_IMAGE_PROVIDER', 'cpu or cuda');
    config.provider = env.GANTRY_IMAGE_PROVIDER;
  }
  if (env.GANTRY_IMAGE_THREADS) {
    const n = Number(env.GANTRY_IMAGE_THREADS);
    if (!Number.isInteger(n) || n < 0 || n > 256) throw bad('GANTRY_IMAGE_THREADS', 'an integer from 0 to 256');
    config.threads = n;
  }
  if (env.GANTRY_IMAGE_URL_TTL_S) {
    const n = Number(env.GANTRY_IMAGE_URL_TTL_S);
    if (!Number.isInteger(n) || n < 1 || n > 7 * 86_400) throw bad('GANTRY_IMAGE_URL_TTL_S', 'an integer from 1 to 604800 (7 days)');
    config.urlTtlSeconds = n;
  }
  if (env.GANTRY_IMAGE_QUALITY_MODEL) config.qualityModel = absolute(env.GANTRY_IMAGE_QUALITY_MODEL);
  if (env.GANTRY_IMAGE_FAST_MODEL) config.fastModel = absolute(env.GANTRY_IMAGE_FAST_MODEL);
  config.s3 = loadS3Settings(env);
  return config;
}

function absolute(path: string): string {
  return isAbsolute(path) ? path : resolve(path);
}

function loadS3Settings(env: NodeJS.ProcessEnv): S3Settings | null {
  const names = ['GANTRY_S3_ENDPOINT', 'GANTRY_S3_BUCKET', 'GANTRY_S3_ACCESS_KEY_ID', 'GANTRY_S3_SECRET_ACCESS_KEY'] as const;
  const given = names.filter((n) => env[n]);
  if (given.length === 0) return null;
  if (given.length < names.length) {
    throw new Error(`Incomplete S3 settings: ${names.filter((n) => !env[n]).join(', ')} missing (set all of ${names.join(', ')}, or none)`);
  }
  try {
    new URL(env.GANTRY_S3_ENDPOINT!);
  } catch {
    throw new Error(`Invalid GANTRY_S3_ENDPOINT=${JSON.stringify(env.GANTRY_S3_ENDPOINT)}: expected an absolute URL`);
  }
  return {
    endpoint: env.GANTRY_S3_ENDPOINT!.replace(/\/+$/, ''),
    bucket: env.GANTRY_S3_BUCKET!,
    accessKeyId: env.GANTRY_S3_ACCESS_KEY_ID!,
    secretAccessKey: env.GANTRY_S3_SECRET_ACCESS_KEY!,
    region: env.GANTRY_S3_REGION || 'us-east-1',
  };
}

/**
 * Which public model an endpoint id is, if any.
 *
 * @example imageKindOf(IMAGE_DEFAULTS, 'image-fast') === 'fast'
 */
export function imageKindOf(config: ImageConfig, endpointId: string): ImageModelKind | null {
  return endpointId === config.qualityId ? 'quality' : endpointId === config.fastId ? 'fast' : null;
}
