import { isAbsolute, resolve } from 'node:path';

/**
 * Settings of the public image endpoints, read from the environment (docs/configuration.md).
 * A bad value fails at start-up naming the variable; nothing falls back silently.
 */
/** Which public model (and price list) an endpoint is. */
export type ImageModelKind = 'quality' | 'fast';

/** onnxruntime execution provider of the image workers; there is no silent fallback. */
export type Provider = 'cpu' | 'cuda';

/**
 * Where an image worker runs its graphs: the CPU, or one CUDA device by index. `cuda:N` counts
 * the devices the worker process can see: the pool assigns no GPUs to process workers, which
 * inherit the gateway's CUDA_VISIBLE_DEVICES (src/pool/worker-env.ts, docs/models.md).
 */
export interface ImageDevice {
  provider: Provider;
  /** CUDA device index (0 for the CPU). */
  index: number;
}

/** Where the text encoders live: on the worker's device, resident on the CPU, or loaded per request and released. */
export type TextEncoderPlacement = 'device' | 'cpu' | 'offload';

/** Settings of the public image endpoints (GANTRY_IMAGE_*, GANTRY_S3_*). */
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
  /** Device of each endpoint's worker (GANTRY_IMAGE_QUALITY_DEVICE / _FAST_DEVICE: cpu, cuda, cuda:N); default from the provider. */
  qualityDevice: ImageDevice;
  fastDevice: ImageDevice;
  /** GANTRY_IMAGE_TEXT_ENCODERS=device|cpu|offload. */
  textEncoders: TextEncoderPlacement;
  /** onnxruntime's memory arena and memory-pattern planning (GANTRY_IMAGE_ARENA=on|off). */
  arena: boolean;
  /** Memory a worker may use on its device, in MiB, checked at start (GANTRY_IMAGE_MEMORY_LIMIT_MB; 0 = what the device has free; the smaller one counts). */
  memoryLimitMb: number;
  /** The same for one endpoint's worker (GANTRY_IMAGE_QUALITY_MEMORY_LIMIT_MB / _FAST_MEMORY_LIMIT_MB); null = memoryLimitMb. */
  qualityMemoryLimitMb: number | null;
  fastMemoryLimitMb: number | null;
  /** Most queued requests of one size run as one denoiser batch (GANTRY_IMAGE_BATCH, 1 = no batching). */
  batchSize: number;
  /** How long the first request of a batch waits for others (GANTRY_IMAGE_BATCH_WINDOW_MS). */
  batchWindowMs: number;
  /** Where float32-boundary copies of bfloat16 graphs go when their folder is read-only (GANTRY_IMAGE_CACHE_DIR; null = <tmp>/gantry-image-cache). */
  cacheDir: string | null;
  /** A real exported model folder per endpoint (GANTRY_IMAGE_QUALITY_MODEL / _FAST_MODEL); null = the tiny demo model. */
  qualityModel: string | null;
  fastModel: string | null;
  /** Lifetime of a signed image URL (GANTRY_IMAGE_URL_TTL_S, default 7 days; S3 presigning allows at most 7 days). */
  urlTtlSeconds: number;
  /** A global S3-compatible bucket for images (GANTRY_S3_*); null = the gateway's local folder, or the database where gateways share PostgreSQL. */
  s3: S3Settings | null;
  /** Bytes of image files kept in the database (PostgreSQL without S3), the oldest deleted first past it (GANTRY_IMAGE_FILES_MAX_BYTES). */
  filesMaxBytes: number;
}

/** An S3-compatible bucket and the credentials to write to it. */
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
  qualityDevice: { provider: 'cpu', index: 0 },
  fastDevice: { provider: 'cpu', index: 0 },
  textEncoders: 'device',
  arena: true,
  memoryLimitMb: 0,
  qualityMemoryLimitMb: null,
  fastMemoryLimitMb: null,
  batchSize: 1,
  batchWindowMs: 25,
  cacheDir: null,
  qualityModel: null,
  fastModel: null,
  urlTtlSeconds: 7 * 86_400,
  s3: null,
  filesMaxBytes: 1_000_000_000,
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
  loadPlacement(env, config, bad);
  if (env.GANTRY_IMAGE_URL_TTL_S) {
    const n = Number(env.GANTRY_IMAGE_URL_TTL_S);
    if (!Number.isInteger(n) || n < 1 || n > 7 * 86_400) throw bad('GANTRY_IMAGE_URL_TTL_S', 'an integer from 1 to 604800 (7 days)');
    config.urlTtlSeconds = n;
  }
  if (env.GANTRY_IMAGE_QUALITY_MODEL) config.qualityModel = absolute(env.GANTRY_IMAGE_QUALITY_MODEL);
  if (env.GANTRY_IMAGE_FAST_MODEL) config.fastModel = absolute(env.GANTRY_IMAGE_FAST_MODEL);
  config.s3 = loadS3Settings(env);
  config.filesMaxBytes = integerSetting(env, 'GANTRY_IMAGE_FILES_MAX_BYTES', 16_000_000, 1e13, bad) ?? config.filesMaxBytes;
  return config;
}

const DEVICE = /^(cpu|cuda)(?::(\d{1,2}))?$/;

/**
 * Parses a device setting: `cpu`, `cuda` (device 0) or `cuda:N`.
 *
 * @example parseImageDevice('cuda:1') // { provider: 'cuda', index: 1 }
 */
export function parseImageDevice(value: string): ImageDevice | null {
  const match = DEVICE.exec(value);
  if (!match || (match[1] === 'cpu' && match[2] !== undefined)) return null;
  return { provider: match[1] as Provider, index: match[2] === undefined ? 0 : Number(match[2]) };
}

/** The largest memory limit a setting accepts, in MiB (16 TiB); 0 means the device's free memory. */
const MEMORY_LIMIT_MAX_MB = 16 * 1024 * 1024;

/** The setting of one endpoint's own memory limit: GANTRY_IMAGE_QUALITY_MEMORY_LIMIT_MB or GANTRY_IMAGE_FAST_MEMORY_LIMIT_MB. */
export function ownMemoryLimitSetting(kind: ImageModelKind): string {
  return `GANTRY_IMAGE_${kind.toUpperCase()}_MEMORY_LIMIT_MB`;
}

/** One endpoint's own memory limit in MiB; null when its setting is not set. */
export function ownMemoryLimitMb(config: ImageConfig, kind: ImageModelKind): number | null {
  return kind === 'quality' ? config.qualityMemoryLimitMb : config.fastMemoryLimitMb;
}

/**
 * The memory limit of one endpoint's worker and the setting it comes from: its own
 * GANTRY_IMAGE_<KIND>_MEMORY_LIMIT_MB when set, else GANTRY_IMAGE_MEMORY_LIMIT_MB. Each worker
 * checks only its own graphs, against the device's free memory at its start, so two workers on
 * one device are kept apart only by per-endpoint limits that add up to what the device has.
 *
 * @example imageMemoryLimit(loadImageConfig({ GANTRY_IMAGE_FAST_MEMORY_LIMIT_MB: '30000' }), 'fast') // { mb: 30000, setting: 'GANTRY_IMAGE_FAST_MEMORY_LIMIT_MB' }
 */
export function imageMemoryLimit(config: ImageConfig, kind: ImageModelKind): { mb: number; setting: string } {
  const own = ownMemoryLimitMb(config, kind);
  return own === null ? { mb: config.memoryLimitMb, setting: 'GANTRY_IMAGE_MEMORY_LIMIT_MB' } : { mb: own, setting: ownMemoryLimitSetting(kind) };
}

/** The device as configuration and logs write it: cpu, cuda:N. */
export function formatImageDevice(device: ImageDevice): string {
  return device.provider === 'cpu' ? 'cpu' : `cuda:${device.index}`;
}

type Bad = (name: string, expected: string) => Error;

function integerSetting(env: NodeJS.ProcessEnv, name: string, min: number, max: number, bad: Bad): number | null {
  const raw = env[name];
  if (raw === undefined || raw === '') return null;
  const n = Number(raw);
  if (!Number.isInteger(n) || n < min || n > max) throw bad(name, `an integer from ${min} to ${max}`);
  return n;
}

/** Devices, text-encoder placement, memory and batching (docs/configuration.md, image section). */
function loadPlacement(env: NodeJS.ProcessEnv, config: ImageConfig, bad: Bad): void {
  const fallback: ImageDevice = { provider: config.provider, index: 0 };
  for (const [field, name] of [['qualityDevice', 'GANTRY_IMAGE_QUALITY_DEVICE'], ['fastDevice', 'GANTRY_IMAGE_FAST_DEVICE']] as const) {
    const raw = env[name];
    const device = raw ? parseImageDevice(raw) : fallback;
    if (!device) throw bad(name, 'cpu, cuda or cuda:N');
    config[field] = device;
  }
  const encoders = env.GANTRY_IMAGE_TEXT_ENCODERS;
  if (encoders) {
    if (encoders !== 'device' && encoders !== 'cpu' && encoders !== 'offload') throw bad('GANTRY_IMAGE_TEXT_ENCODERS', 'device, cpu or offload');
    config.textEncoders = encoders;
  }
  if (env.GANTRY_IMAGE_ARENA) {
    if (env.GANTRY_IMAGE_ARENA !== 'on' && env.GANTRY_IMAGE_ARENA !== 'off') throw bad('GANTRY_IMAGE_ARENA', 'on or off');
    config.arena = env.GANTRY_IMAGE_ARENA === 'on';
  }
  config.memoryLimitMb = integerSetting(env, 'GANTRY_IMAGE_MEMORY_LIMIT_MB', 0, MEMORY_LIMIT_MAX_MB, bad) ?? config.memoryLimitMb;
  config.qualityMemoryLimitMb = integerSetting(env, 'GANTRY_IMAGE_QUALITY_MEMORY_LIMIT_MB', 0, MEMORY_LIMIT_MAX_MB, bad);
  config.fastMemoryLimitMb = integerSetting(env, 'GANTRY_IMAGE_FAST_MEMORY_LIMIT_MB', 0, MEMORY_LIMIT_MAX_MB, bad);
  config.batchSize = integerSetting(env, 'GANTRY_IMAGE_BATCH', 1, 16, bad) ?? config.batchSize;
  config.batchWindowMs = integerSetting(env, 'GANTRY_IMAGE_BATCH_WINDOW_MS', 0, 10_000, bad) ?? config.batchWindowMs;
  if (env.GANTRY_IMAGE_CACHE_DIR) config.cacheDir = absolute(env.GANTRY_IMAGE_CACHE_DIR);
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
