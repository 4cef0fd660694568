/**
 * The image worker process: `node dist/src/images/worker-main.js`, one per public endpoint,
 * started and supervised by the gateway's worker pool like any pool worker (its settings come
 * from src/images/image-feature.ts). It speaks the normal worker protocol
 * through the worker SDK, configured by the RUNPOD_* variables plus:
 *
 *   GANTRY_IMAGE_KIND        quality | fast (price list and step range)
 *   GANTRY_IMAGE_MODEL_DIR   the diffusers/Optimum ONNX folder to load
 *   GANTRY_IMAGE_DEVICE      cpu | cuda | cuda:N (else GANTRY_IMAGE_PROVIDER); GANTRY_IMAGE_THREADS
 *   GANTRY_IMAGE_TEXT_ENCODERS, GANTRY_IMAGE_ARENA, GANTRY_IMAGE_MEMORY_LIMIT_MB (or the kind's own
 *   GANTRY_IMAGE_QUALITY_MEMORY_LIMIT_MB / GANTRY_IMAGE_FAST_MEMORY_LIMIT_MB),
 *   GANTRY_IMAGE_BATCH, GANTRY_IMAGE_BATCH_WINDOW_MS, GANTRY_IMAGE_CACHE_DIR   (docs/configuration.md)
 *   GANTRY_FILES_DIR, GANTRY_FILES_BASE_URL, GANTRY_FILES_SIGNING_KEY (base64)   local store
 *   GANTRY_FILES_UPLOAD_URL  the database instead (gateways sharing PostgreSQL), uploaded there
 *   GANTRY_S3_*              the global bucket instead of the local store
 *   GANTRY_IMAGE_URL_TTL_S   lifetime of image URLs
 *   GANTRY_OUTBOUND_ALLOW    what a job's own s3Config.endpointUrl may reach (docs/security.md)
 *
 * Inference blocks this process's event loop for one step at a time, never the gateway's.
 */
import { pino } from 'pino';
import { startWorker } from '../sdk/worker.js';
import { formatImageDevice, imageMemoryLimit, loadImageConfig, parseImageDevice, type ImageConfig } from '../config/image-config.js';
import { BatchQueue } from './batch-queue.js';
import { createImageHandler } from './image-handler.js';
import { createOutboundFetch, createOutboundPolicy } from '../security/outbound.js';
import { createGatewayObjectStore, createLocalObjectStore, createS3ObjectStore, type ObjectStore } from './object-store.js';
import { loadPipeline, type GeneratedImage, type GenerateRequest } from './pipeline.js';

function required(name: string): string {
  const value = process.env[name];
  if (!value) throw new Error(`image worker: ${name} is not set`);
  return value;
}

/** The global bucket; else the database through the gateway (GANTRY_FILES_UPLOAD_URL: gateways sharing PostgreSQL); else the local folder. */
function imageStore(config: ImageConfig, endpointId: string): ObjectStore {
  if (config.s3) return createS3ObjectStore(config.s3, config.urlTtlSeconds);
  const signed = { baseUrl: required('GANTRY_FILES_BASE_URL'), signingKey: Buffer.from(required('GANTRY_FILES_SIGNING_KEY'), 'base64'), ttlSeconds: config.urlTtlSeconds };
  const uploadUrl = process.env.GANTRY_FILES_UPLOAD_URL;
  if (uploadUrl) return createGatewayObjectStore({ ...signed, uploadUrl, endpointId, workerKey: required('RUNPOD_AI_API_KEY') });
  return createLocalObjectStore({ ...signed, dir: required('GANTRY_FILES_DIR') });
}

async function main(): Promise<void> {
  const log = pino({ name: 'gantry-image-worker', level: process.env.LOG_LEVEL ?? 'info' });
  const kind = required('GANTRY_IMAGE_KIND');
  if (kind !== 'quality' && kind !== 'fast') throw new Error(`image worker: GANTRY_IMAGE_KIND must be quality or fast, got ${kind}`);
  const config = loadImageConfig(process.env);
  const endpointId = required('RUNPOD_ENDPOINT_ID');
  const modelDir = required('GANTRY_IMAGE_MODEL_DIR');
  const deviceSetting = process.env.GANTRY_IMAGE_DEVICE;
  const device = deviceSetting ? parseImageDevice(deviceSetting) : { provider: config.provider, index: 0 };
  if (!device) throw new Error(`image worker: GANTRY_IMAGE_DEVICE must be cpu, cuda or cuda:N, got ${deviceSetting}`);
  const memoryLimit = imageMemoryLimit(config, kind);
  const pipeline = await loadPipeline(modelDir, {
    device,
    threads: config.threads,
    textEncoders: config.textEncoders,
    arena: config.arena,
    memoryLimitMb: memoryLimit.mb,
    memoryLimitSetting: memoryLimit.setting,
    ...(config.cacheDir ? { cacheDir: config.cacheDir } : {}),
  });
  const queue = new BatchQueue<GenerateRequest, GeneratedImage>(
    { key: (r) => pipeline.batchKey(r), run: (rs) => pipeline.generateBatch(rs) },
    { maxBatch: config.batchSize, windowMs: config.batchWindowMs, onBatch: (size) => { if (size > 1) log.debug({ endpointId, size }, 'batch'); } },
  );
  const store = imageStore(config, endpointId);
  if (pipeline.model.tiny) {
    log.warn({ endpointId, modelDir }, 'serving the tiny demo model built by Gantry: its images are abstract (not Stable Diffusion or FLUX); see docs/models.md to load a real model');
  }
  const { memory, defaults } = pipeline;
  log.info(
    { endpointId, modelDir, family: pipeline.model.family, defaults, device: formatImageDevice(device), textEncoders: memory.textEncoders, estimatedPeakMiB: Math.round(memory.devicePeakBytes / 2 ** 20), batch: config.batchSize },
    'image model loaded',
  );
  // A job's own s3Config.endpointUrl is called under the outbound policy (docs/security.md).
  const jobS3Fetch = createOutboundFetch(createOutboundPolicy((process.env.GANTRY_OUTBOUND_ALLOW ?? '').split(',')));
  const handler = createImageHandler({ kind, endpointId, pipeline, store, urlTtlSeconds: config.urlTtlSeconds, jobS3Fetch, log, generate: (r) => queue.submit(r) });
  // One job per batch slot: the SDK takes up to GANTRY_IMAGE_BATCH jobs at once (job-take-batch).
  const worker = startWorker({ handler, logger: log, concurrency: config.batchSize });
  const stop = (): void => {
    void worker.stop();
  };
  process.once('SIGTERM', stop);
  process.once('SIGINT', stop);
  await worker.done;
  await pipeline.release();
}

main().then(
  () => process.exit(0),
  (err: unknown) => {
    console.error(`image worker failed: ${err instanceof Error ? err.stack ?? err.message : String(err)}`);
    process.exit(1);
  },
);
