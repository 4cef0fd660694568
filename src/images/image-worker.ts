/**
 * The image worker process: `node dist/src/images/image-worker.js`, started by the gateway
 * (src/images/image-workers.ts), one per public endpoint. It speaks the normal worker protocol
 * through the worker SDK, configured by the RUNPOD_* variables plus:
 *
 *   GANTRY_IMAGE_KIND        quality | fast (price list and step range)
 *   GANTRY_IMAGE_MODEL_DIR   the diffusers/Optimum ONNX folder to load
 *   GANTRY_IMAGE_PROVIDER    cpu | cuda; GANTRY_IMAGE_THREADS
 *   GANTRY_FILES_DIR, GANTRY_FILES_BASE_URL, GANTRY_FILES_SIGNING_KEY (base64)   local store
 *   GANTRY_S3_*              the global bucket instead of the local store
 *   GANTRY_IMAGE_URL_TTL_S   lifetime of image URLs
 *
 * Inference blocks this process's event loop for one step at a time, never the gateway's.
 */
import { pino } from 'pino';
import { startWorker } from '../sdk/worker.js';
import { loadImageConfig } from './image-config.js';
import { createImageHandler } from './image-handler.js';
import { createLocalObjectStore, createS3ObjectStore, type ObjectStore } from './object-store.js';
import { loadPipeline } from './pipeline.js';

function required(name: string): string {
  const value = process.env[name];
  if (!value) throw new Error(`image worker: ${name} is not set`);
  return value;
}

async function main(): Promise<void> {
  const log = pino({ name: 'gantry-image-worker', level: process.env.LOG_LEVEL ?? 'info' });
  const kind = required('GANTRY_IMAGE_KIND');
  if (kind !== 'quality' && kind !== 'fast') throw new Error(`image worker: GANTRY_IMAGE_KIND must be quality or fast, got ${kind}`);
  const config = loadImageConfig(process.env);
  const endpointId = required('RUNPOD_ENDPOINT_ID');
  const modelDir = required('GANTRY_IMAGE_MODEL_DIR');
  const pipeline = await loadPipeline(modelDir, { provider: config.provider, threads: config.threads });
  const store: ObjectStore = config.s3
    ? createS3ObjectStore(config.s3, config.urlTtlSeconds)
    : createLocalObjectStore({
        dir: required('GANTRY_FILES_DIR'),
        baseUrl: required('GANTRY_FILES_BASE_URL'),
        signingKey: Buffer.from(required('GANTRY_FILES_SIGNING_KEY'), 'base64'),
        ttlSeconds: config.urlTtlSeconds,
      });
  if (pipeline.model.tiny) {
    log.warn({ endpointId, modelDir }, 'serving the tiny demo model built by Gantry: its images are abstract (not Stable Diffusion or FLUX); see docs/models.md to load a real model');
  }
  log.info({ endpointId, modelDir, family: pipeline.model.family, provider: config.provider }, 'image model loaded');
  const worker = startWorker({ handler: createImageHandler({ kind, endpointId, pipeline, store, urlTtlSeconds: config.urlTtlSeconds, log }), logger: log });
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
