import { randomInt } from 'node:crypto';
import type { Handler, WorkerLogger } from '../sdk/worker-types.js';
import { resolveImageInput, validateImageInput } from './image-input.js';
import { createS3ObjectStore, type ObjectStore } from './object-store.js';
import { encodeImage, type DiffusionPipeline, type GeneratedImage, type GenerateRequest } from './pipeline.js';
import type { ImageModelKind } from '../config/image-config.js';
import { megapixels, usdNumber } from '../model/money.js';
import { imageCostUnits } from './pricing.js';
import { MAX_RANDOM_SEED } from './random.js';
import { s3FromJobConfig } from './s3.js';
import { createOutboundFetch, createOutboundPolicy } from '../security/outbound.js';

let strictFetch: typeof fetch | undefined;
/** The outbound policy with nothing allowed: what a job's own bucket gets when no transport is given. */
function guardedFetch(): typeof fetch {
  return (strictFetch ??= createOutboundFetch(createOutboundPolicy([])));
}

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
  /** The steps run and the guidance applied (null: this model takes no guidance, e.g. FLUX.1-schnell). */
  num_inference_steps: number;
  guidance: number | null;
  /** Requests that shared this image's denoiser runs (1 = not batched). */
  batch_size: number;
  /** Where the time went inside the worker (pipeline_ms: tokenize → encode bytes; store_ms: upload). */
  timings: { pipeline_ms: number; store_ms: number };
}

/** What an image worker's handler needs: its model kind, pipeline, image store and logger. */
export interface ImageHandlerOptions {
  kind: ImageModelKind;
  endpointId: string;
  pipeline: DiffusionPipeline;
  /** The default destination (local folder or the global bucket). */
  store: ObjectStore;
  urlTtlSeconds: number;
  /** The transport for a job's own s3Config.endpointUrl: the outbound policy's fetch (security/outbound.ts). */
  jobS3Fetch?: typeof fetch;
  log: WorkerLogger;
  /** Runs a request, batched with others (batch-queue.ts); default: one at a time on the pipeline. */
  generate?: (request: GenerateRequest) => Promise<GeneratedImage>;
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
  const generate = options.generate ?? ((request: GenerateRequest) => pipeline.generate(request));
  const guided = pipeline.defaults.guidanceMode !== 'none';
  return async (job, ctx): Promise<ImageOutput> => {
    const input = resolveImageInput(kind, validateImageInput(kind, job.input), pipeline.defaults);
    const seed = input.seed === -1 ? randomInt(0, MAX_RANDOM_SEED) : input.seed;
    const timeout = job.policy?.executionTimeout;
    const t0 = performance.now();
    const image = await generate({
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
    const store = job.s3Config ? createS3ObjectStore(s3FromJobConfig(job.s3Config), options.urlTtlSeconds, options.jobS3Fetch ?? guardedFetch()) : options.store;
    const url = await store.put(`${options.endpointId}/${job.id}.${input.imageFormat}`, bytes, `image/${input.imageFormat}`);
    const t2 = performance.now();
    options.log.info(
      { jobId: job.id, workerId: ctx.workerId, width: image.width, height: image.height, steps: input.numInferenceSteps, batch: image.batchSize, ms: Math.round(t2 - t0) },
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
      num_inference_steps: input.numInferenceSteps,
      guidance: guided ? input.guidance : null,
      batch_size: image.batchSize,
      timings: { pipeline_ms: round(t1 - t0), store_ms: round(t2 - t1) },
    };
  };
}

function round(ms: number): number {
  return Math.round(ms * 100) / 100;
}
