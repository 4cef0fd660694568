import { randomInt } from 'node:crypto';
import type { Handler, WorkerLogger } from '../sdk/worker-types.js';
import { validateImageInput } from './image-input.js';
import { createS3ObjectStore, type ObjectStore } from './object-store.js';
import { encodeImage, type DiffusionPipeline } from './pipeline.js';
import { imageCostUnits, megapixels, usdNumber, type ImageModelKind } from './pricing.js';
import { MAX_RANDOM_SEED } from './random.js';
import { s3FromJobConfig } from './s3.js';

/** The JSON output of a public image job. */
export interface ImageOutput {
  image_url: string;
  /** USD, exact to the 10th decimal; equals the job's usage record. */
  cost: number;
  seed: number;
  width: number;
  height: number;
  format: 'jpeg' | 'png';
  megapixels: number;
  /** Where the time went inside the worker (pipeline_ms: tokenize → encode bytes; store_ms: upload). */
  timings: { pipeline_ms: number; store_ms: number };
}

export interface ImageHandlerOptions {
  kind: ImageModelKind;
  endpointId: string;
  pipeline: DiffusionPipeline;
  /** The default destination (local folder or the global bucket). */
  store: ObjectStore;
  urlTtlSeconds: number;
  log: WorkerLogger;
}

/**
 * The job handler of an image worker: validates the input again (the gateway did at submit;
 * this fills in the defaults), generates, encodes and stores the image. A job's `s3Config`
 * sends the image to that bucket instead of the default store. Cancel and the execution
 * timeout stop the denoising loop between steps.
 *
 * @example startWorker({ handler: createImageHandler({ kind: 'fast', endpointId: 'image-fast', pipeline, store, urlTtlSeconds: 604800, log }) })
 */
export function createImageHandler(options: ImageHandlerOptions): Handler {
  const { kind, pipeline } = options;
  return async (job, ctx): Promise<ImageOutput> => {
    const input = validateImageInput(kind, job.input);
    const seed = input.seed === -1 ? randomInt(0, MAX_RANDOM_SEED) : input.seed;
    const timeout = job.policy?.executionTimeout;
    const t0 = performance.now();
    const image = await pipeline.generate({
      prompt: input.prompt,
      negativePrompt: input.negativePrompt,
      width: input.width,
      height: input.height,
      steps: input.numInferenceSteps,
      guidance: input.guidance,
      seed,
      signal: ctx.signal,
      ...(typeof timeout === 'number' && timeout > 0 ? { deadline: Date.now() + timeout } : {}),
    });
    const bytes = await encodeImage(image, input.imageFormat);
    const t1 = performance.now();
    const store = job.s3Config ? createS3ObjectStore(s3FromJobConfig(job.s3Config), options.urlTtlSeconds) : options.store;
    const url = await store.put(`${options.endpointId}/${job.id}.${input.imageFormat}`, bytes, `image/${input.imageFormat}`);
    const t2 = performance.now();
    options.log.info(
      { jobId: job.id, workerId: ctx.workerId, width: image.width, height: image.height, steps: input.numInferenceSteps, ms: Math.round(t2 - t0) },
      pipeline.model.tiny ? 'image generated (tiny demo model: abstract image)' : 'image generated',
    );
    return {
      image_url: url,
      cost: usdNumber(imageCostUnits(kind, image.width, image.height)),
      seed,
      width: image.width,
      height: image.height,
      format: input.imageFormat,
      megapixels: megapixels(image.width, image.height),
      timings: { pipeline_ms: round(t1 - t0), store_ms: round(t2 - t1) },
    };
  };
}

function round(ms: number): number {
  return Math.round(ms * 100) / 100;
}
