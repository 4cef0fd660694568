import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { Logger } from 'pino';
import type { GantryConfig } from '../config/config.js';
import { formatImageDevice, ownMemoryLimitMb, ownMemoryLimitSetting, type ImageModelKind } from '../config/image-config.js';
import type { RouteTable } from '../http/route-table.js';
import type { EndpointHooks, EndpointService } from '../jobs/endpoint-service.js';
import type { WorkerSettings } from '../jobs/endpoint-settings.js';
import type { EndpointRecord, FeatureCharge, JobWithInput } from '../model/records.js';
import type { FileStore } from '../store/file-store.js';
import { startFileSweeper, startStoredFileSweeper } from './file-sweeper.js';
import { createFileUploadRoute } from './file-upload-route.js';
import { createFileRoute } from './files-route.js';
import { resolveImageInput, SIZE_RULES, specDefaults, validateImageInput } from './image-input.js';
import { imageCostUnits } from './pricing.js';
import { ensureTinyModel } from './tiny-models.js';

/**
 * The public text-to-image endpoints as a feature of the gateway (docs/models.md): it creates
 * their endpoint rows, registers their input rules and billing as endpoint hooks, serves the
 * image store at /files (the local folder, or the database where gateways share PostgreSQL
 * without S3: then also the workers' upload route), and gives the worker pool the settings of their worker
 * process (src/images/worker-main.ts). The rest of the gateway does not know images exist.
 */
export interface ImageFeature {
  /** Gives the worker pool the image workers' settings (after the gateway listens: they need its URL). */
  startWorkers(publicUrl: string): void;
  /** Stops the file sweeper. The workers themselves stop with the pool. */
  stop(): void;
}

/** What the image feature plugs into: endpoints, routes, the pool's built-in workers. */
export interface ImageFeatureDeps {
  config: Pick<GantryConfig, 'images' | 'dataDir' | 'logLevel' | 'outboundAllow'>;
  endpoints: Pick<EndpointService, 'ensure' | 'addHooks'>;
  routes: RouteTable;
  /** Worker settings the autoscaler runs for endpoints that have none of their own. */
  builtIns: Map<string, WorkerSettings>;
  /** Signs the URLs of the local image store. */
  fileSigningKey: Buffer;
  /** The store, where gateways share it (PostgreSQL): without S3 the files are kept there, served by every gateway (docs/postgres.md). */
  files?: Pick<FileStore, 'putFile' | 'fileInfo' | 'readFile' | 'deleteFilesBefore'>;
  logger: Logger;
  now(): number;
}

const EXECUTION_TIMEOUT_MS = 600_000;

/**
 * Sets the feature up before the gateway serves: endpoint rows (created when missing; an
 * operator's later changes to their settings are kept), hooks and the /files route.
 *
 * @example const images = await setUpImageFeature(deps); // after listen: images.startWorkers(url)
 */
export async function setUpImageFeature(deps: ImageFeatureDeps): Promise<ImageFeature> {
  const { images } = deps.config;
  for (const [id, kind] of [[images.qualityId, 'quality'], [images.fastId, 'fast']] as const) {
    if (await deps.endpoints.ensure(imageEndpoint(id, kind, deps.now()))) deps.logger.info({ endpointId: id }, 'public image endpoint created');
    deps.endpoints.addHooks(id, imageHooks(kind));
  }
  const filesDir = join(deps.config.dataDir, 'files');
  // Several gateways on one PostgreSQL without S3: files in the database, so any gateway serves them.
  const stored = images.s3 ? undefined : deps.files;
  deps.routes.add(createFileRoute({ dir: filesDir, signingKey: deps.fileSigningKey, now: deps.now, ...(stored ? { stored } : {}) }));
  const swept = (deleted: number): void => deps.logger.info({ deleted }, 'deleted images whose links expired');
  let stopSweeper = (): void => {};
  let stopStoredSweeper = (): void => {};
  if (stored) {
    deps.routes.add(createFileUploadRoute({ files: stored, maxBytes: images.filesMaxBytes, logger: deps.logger, now: deps.now }));
    stopStoredSweeper = startStoredFileSweeper(stored, images.urlTtlSeconds * 1000, swept, (err) => deps.logger.error({ err }, 'image file sweep failed'), deps.now);
  }
  return {
    startWorkers(publicUrl) {
      if (!images.workers) return;
      for (const [id, kind] of [[images.qualityId, 'quality'], [images.fastId, 'fast']] as const) deps.builtIns.set(id, workerSettings(deps, id, kind, publicUrl));
      // Local images outlive their signed URLs otherwise; a bucket uses its own lifecycle rules.
      if (!images.s3) stopSweeper = startFileSweeper(filesDir, images.urlTtlSeconds * 1000, swept);
    },
    stop: () => {
      stopSweeper();
      stopStoredSweeper();
    },
  };
}

function imageEndpoint(id: string, kind: ImageModelKind, now: number): EndpointRecord {
  const name = kind === 'quality' ? 'Text to image: quality model' : 'Text to image: fast model';
  return {
    id,
    name,
    workersMin: 1,
    workersMax: 1,
    idleTimeout: 5,
    executionTimeoutMs: EXECUTION_TIMEOUT_MS,
    scalerType: 'QUEUE_DELAY',
    scalerValue: 4,
    maxAttempts: 3,
    webhookSecret: null,
    rateLimitsJson: null,
    workerJson: null,
    priority: 50,
    preemptible: false,
    flashboot: false,
    shareWeight: 1,
    priceUnitsPerSecond: null,
    createdAt: now,
    updatedAt: now,
  };
}

/**
 * The size a completed job is billed for: the output's width and height (the spec bills the
 * actual output resolution, and the worker applied its model's defaults), when they are sizes
 * the endpoint allows and agree with the request; else the request with the spec's defaults.
 */
function billedSize(kind: ImageModelKind, job: JobWithInput): { width: number; height: number } {
  const requested = validateImageInput(kind, JSON.parse(job.inputJson));
  const fallback = resolveImageInput(kind, requested, specDefaults(kind));
  let output: unknown = null;
  try {
    output = job.outputJson === null ? null : JSON.parse(job.outputJson);
  } catch {
    output = null;
  }
  const o = output as { width?: unknown; height?: unknown } | null;
  const valid = (n: unknown, asked: number | undefined): n is number =>
    typeof n === 'number' && Number.isInteger(n) && n >= SIZE_RULES.min && n <= SIZE_RULES.max && n % SIZE_RULES.multiple === 0 && (asked === undefined || asked === n);
  return o && valid(o.width, requested.width) && valid(o.height, requested.height) ? { width: o.width, height: o.height } : fallback;
}

/**
 * Input rules at submission (a 400 `Invalid parameter: ...` before any job exists) and the
 * charge of a completed job, at the size it was generated at (billedSize), so the
 * output's `cost` equals the record.
 */
export function imageHooks(kind: ImageModelKind): EndpointHooks {
  return {
    validateInput: (input) => void validateImageInput(kind, input),
    chargeOf(job: JobWithInput): FeatureCharge | null {
      if (job.status !== 'COMPLETED') return null;
      const { width, height } = billedSize(kind, job);
      return { pixels: width * height, costUnits: imageCostUnits(kind, width, height) };
    },
  };
}

/** The compiled worker entry beside this module (dist/src/images/worker-main.js). */
function workerScript(): string {
  const script = fileURLToPath(new URL('./worker-main.js', import.meta.url));
  if (!existsSync(script)) throw new Error(`image worker script ${script} not found: run the gateway from its build (npm run build)`);
  return script;
}

/** Quotes a word for /bin/sh. */
function shellWord(word: string): string {
  return `'${word.replaceAll("'", `'\\''`)}'`;
}

/** The worker process of one public endpoint, as worker settings for the pool; builds the tiny demo model where no real one is configured. */
function workerSettings(deps: ImageFeatureDeps, endpointId: string, kind: ImageModelKind, publicUrl: string): WorkerSettings {
  const { images, dataDir, logLevel } = deps.config;
  let modelDir = kind === 'quality' ? images.qualityModel : images.fastModel;
  if (modelDir === null) {
    modelDir = join(dataDir, 'models', endpointId);
    if (ensureTinyModel(modelDir, kind)) {
      deps.logger.warn({ endpointId, modelDir }, `built the tiny demo model: its images are abstract; set GANTRY_IMAGE_${kind.toUpperCase()}_MODEL to a real model folder (docs/models.md)`);
    }
  }
  const s3 = images.s3;
  const ownLimit = ownMemoryLimitMb(images, kind);
  const env: Record<string, string> = {
    LOG_LEVEL: logLevel,
    GANTRY_IMAGE_KIND: kind,
    GANTRY_IMAGE_MODEL_DIR: modelDir,
    GANTRY_IMAGE_PROVIDER: images.provider,
    GANTRY_IMAGE_DEVICE: formatImageDevice(kind === 'quality' ? images.qualityDevice : images.fastDevice),
    GANTRY_IMAGE_THREADS: String(images.threads),
    GANTRY_IMAGE_TEXT_ENCODERS: images.textEncoders,
    GANTRY_IMAGE_ARENA: images.arena ? 'on' : 'off',
    GANTRY_IMAGE_MEMORY_LIMIT_MB: String(images.memoryLimitMb),
    // The endpoint's own limit, when set; the worker reads it before the global one (imageMemoryLimit).
    ...(ownLimit === null ? {} : { [ownMemoryLimitSetting(kind)]: String(ownLimit) }),
    GANTRY_IMAGE_BATCH: String(images.batchSize),
    GANTRY_IMAGE_BATCH_WINDOW_MS: String(images.batchWindowMs),
    GANTRY_IMAGE_CACHE_DIR: images.cacheDir ?? join(dataDir, 'image-cache'),
    GANTRY_IMAGE_URL_TTL_S: String(images.urlTtlSeconds),
    GANTRY_FILES_DIR: join(dataDir, 'files'),
    GANTRY_FILES_BASE_URL: publicUrl,
    GANTRY_FILES_SIGNING_KEY: deps.fileSigningKey.toString('base64'),
    // Files kept in the database: uploaded through the gateway (file-upload-route.ts).
    ...(deps.files && !s3 ? { GANTRY_FILES_UPLOAD_URL: `${publicUrl}/v2/${endpointId}/files` } : {}),
    // The outbound policy for jobs' own s3Config.endpointUrl (docs/security.md).
    GANTRY_OUTBOUND_ALLOW: deps.config.outboundAllow.join(','),
    ...(s3
      ? { GANTRY_S3_ENDPOINT: s3.endpoint, GANTRY_S3_BUCKET: s3.bucket, GANTRY_S3_ACCESS_KEY_ID: s3.accessKeyId, GANTRY_S3_SECRET_ACCESS_KEY: s3.secretAccessKey, GANTRY_S3_REGION: s3.region }
      : {}),
  };
  return { command: `exec ${shellWord(process.execPath)} ${shellWord(workerScript())}`, env };
}
