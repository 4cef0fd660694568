import { freemem, tmpdir } from 'node:os';
import { join } from 'node:path';
import sharp from 'sharp';
import { formatImageDevice, type ImageDevice, type TextEncoderPlacement } from '../config/image-config.js';
import { flowLoop, GenerationStopped, unetLoop, type LoopContext, type LoopRequest } from './denoise.js';
import { planMemory, type GraphSize } from './memory-plan.js';
import { modelDefaults, type ModelDefaults } from './model-defaults.js';
import { readModelFolder, type ModelFolder } from './model-folder.js';
import { readGraphBoundary } from './graph-boundary.js';
import { checkDevice, feed, hasInput, listGpus, openGraph, runFloat, type Session, type SessionSettings } from './tensors.js';
import { PromptEncoders } from './text-encoders.js';

export { GenerationStopped } from './denoise.js';

/**
 * Text-to-image on onnxruntime-node: tokenizer(s) → text encoder(s) → denoiser (UNet or flow
 * transformer) stepped by the folder's scheduler with guidance → VAE decoder → RGB → JPEG/PNG.
 * One step blocks the calling thread (onnxruntime's run is synchronous underneath), so this
 * runs in the image worker process, never in the gateway; cancel and timeout are honoured
 * between steps. Several requests of one size run as one batch (generateBatch).
 */
export interface PipelineOptions {
  /** The worker's device: the CPU or one CUDA device (config/image-config.ts). */
  device: ImageDevice;
  /** onnxruntime intra-op threads (0: its default, one per core). */
  threads?: number;
  /** Text encoders on the device (default), resident on the CPU, or loaded per request (offload). */
  textEncoders?: TextEncoderPlacement;
  /** onnxruntime's memory arena and memory patterns (default on). */
  arena?: boolean;
  /** Memory the worker may use on its device, MiB (0 or absent: what the device has free). */
  memoryLimitMb?: number;
  /** The setting memoryLimitMb came from, named when the check refuses (default GANTRY_IMAGE_MEMORY_LIMIT_MB). */
  memoryLimitSetting?: string;
  /** Where float32-boundary copies of bfloat16 graphs go when their folder is read-only. */
  cacheDir?: string;
}

/** One image to generate: prompt, size, steps, guidance and seed. */
export interface GenerateRequest extends LoopRequest {
  width: number;
  height: number;
  steps: number;
}

/** A generated image as RGB pixels, with the seed it used. */
export interface GeneratedImage {
  /** Interleaved RGB, 8 bits a channel, width × height × 3 bytes. */
  rgb: Uint8Array;
  width: number;
  height: number;
  /** How many times the denoiser ran for the batch this image was in (one call a step, all requests and both guidance branches in it). */
  denoiserCalls: number;
  /** How many requests shared the denoiser runs (1 when not batched). */
  batchSize: number;
  timings: { textMs: number; denoiseMs: number; decodeMs: number };
}

/** A loaded model folder that turns prompts into images. */
export interface DiffusionPipeline {
  readonly model: ModelFolder;
  /** The model's request defaults (model-defaults.ts). */
  readonly defaults: ModelDefaults;
  /** How the memory check placed the graphs, for logs. */
  readonly memory: { devicePeakBytes: number; hostPeakBytes: number; device: string; textEncoders: TextEncoderPlacement };
  generate(request: GenerateRequest): Promise<GeneratedImage>;
  /** Requests that share batchKey run as one batch; each gets its image or its error. */
  generateBatch(requests: GenerateRequest[]): Promise<(GeneratedImage | Error)[]>;
  /** Requests with equal keys may share one batch (same size, steps and guidance mode). */
  batchKey(request: GenerateRequest): string;
  release(): Promise<void>;
}

/** Weight bytes of each graph of the folder (external data included). */
function graphSizes(model: ModelFolder): GraphSize[] {
  const size = (file: string): number => readGraphBoundary(file).weightBytes;
  return [
    { name: 'text_encoder', bytes: size(model.textEncoder), encoder: true },
    ...(model.textEncoder2 ? [{ name: 'text_encoder_2', bytes: size(model.textEncoder2), encoder: true }] : []),
    { name: model.family, bytes: size(model.denoiser), encoder: false },
    { name: 'vae_decoder', bytes: size(model.vaeDecoder), encoder: false },
  ];
}

/** Throws, in words, when the graphs do not fit where they are placed (memory-plan.ts). */
function checkMemory(model: ModelFolder, options: PipelineOptions, placement: TextEncoderPlacement): ReturnType<typeof planMemory> {
  const { device } = options;
  const limit = (options.memoryLimitMb ?? 0) * 1024 * 1024;
  let free = freemem();
  let source = `free host memory`;
  if (device.provider === 'cuda') {
    const gpu = listGpus()?.[device.index];
    const known = gpu !== undefined && Number.isFinite(gpu.freeMb);
    // Memory nvidia-smi does not report (a MIG instance) is checked only against the limit setting.
    free = known ? gpu.freeMb * 1024 * 1024 : Infinity;
    source = known ? `free on ${formatImageDevice(device)} (${gpu.name}, ${(gpu.totalMb / 1024).toFixed(1)} GiB total)` : `free on ${formatImageDevice(device)}: not reported`;
  }
  const budget = limit > 0 && limit < free ? limit : free;
  if (limit > 0 && limit < free) source = `${options.memoryLimitSetting ?? 'GANTRY_IMAGE_MEMORY_LIMIT_MB'}=${options.memoryLimitMb}`;
  const plan = planMemory({
    graphs: graphSizes(model),
    textEncoders: placement,
    deviceName: formatImageDevice(device),
    onGpu: device.provider === 'cuda',
    deviceBudget: budget,
    hostBudget: freemem(),
    budgetSource: source,
  });
  if (!plan.fits) throw new Error(plan.problem);
  return plan;
}

/**
 * Opens a folder on the configured device after checking that it fits there.
 *
 * @example
 * const pipe = await loadPipeline('/models/sd-turbo-onnx', { device: { provider: 'cuda', index: 0 } });
 * const image = await pipe.generate({ prompt: 'a lighthouse', negativePrompt: '', width: 512, height: 512, steps: 1, guidance: 0, seed: 1 });
 * const jpeg = await encodeImage(image, 'jpeg');
 */
export async function loadPipeline(dir: string, options: PipelineOptions): Promise<DiffusionPipeline> {
  checkDevice(options.device);
  const model = readModelFolder(dir);
  // On the CPU "offload" would only add loading time: the encoders share the host memory anyway.
  const placement: TextEncoderPlacement = options.device.provider === 'cpu' && options.textEncoders === 'cpu' ? 'device' : (options.textEncoders ?? 'device');
  const plan = checkMemory(model, options, placement);
  const settings: SessionSettings = { device: options.device, threads: options.threads ?? 0, arena: options.arena ?? true, cacheDir: options.cacheDir ?? join(tmpdir(), 'gantry-image-cache') };
  const [denoiser, vae] = await Promise.all([openGraph(model.denoiser, settings), openGraph(model.vaeDecoder, settings)]);
  const defaults = modelDefaults(model, hasInput(denoiser.session, 'guidance'));
  const encoders = await PromptEncoders.load(model, settings, placement, defaults.maxSequenceLength);
  const run = (requests: GenerateRequest[]): Promise<(GeneratedImage | Error)[]> => generateBatch({ model, defaults, encoders, denoiser: denoiser.session, vae: vae.session }, requests);
  return {
    model,
    defaults,
    memory: { devicePeakBytes: plan.devicePeak, hostPeakBytes: plan.hostPeak, device: formatImageDevice(options.device), textEncoders: placement },
    async generate(request) {
      const [result] = await run([request]);
      if (result instanceof Error) throw result;
      return result!;
    },
    generateBatch: run,
    batchKey: (request) => batchKey(model, defaults, request),
    async release() {
      await Promise.all([encoders.release(), denoiser.session.release(), vae.session.release()]);
    },
  };
}

function batchKey(model: ModelFolder, defaults: ModelDefaults, r: GenerateRequest): string {
  // UNet: CFG on or off doubles the batch rows; FLUX-dev: the guidance tensor may not be per request.
  const guidance = model.family === 'unet' ? (r.guidance > 1 ? 'cfg' : 'plain') : defaults.guidanceMode === 'embedded' ? `g${r.guidance}` : '';
  return `${r.width}x${r.height}/${r.steps}/${guidance}`;
}

interface Graphs {
  model: ModelFolder;
  defaults: ModelDefaults;
  encoders: PromptEncoders;
  denoiser: Session;
  vae: Session;
}

async function generateBatch(g: Graphs, requests: GenerateRequest[]): Promise<(GeneratedImage | Error)[]> {
  if (requests.length === 0) return [];
  const first = requests[0]!;
  const key = batchKey(g.model, g.defaults, first);
  if (requests.some((r) => batchKey(g.model, g.defaults, r) !== key)) throw new Error('a batch must share size, steps and guidance mode');
  const { width, height } = first;
  const cell = g.model.vaeScaleFactor * (g.model.family === 'transformer' ? 2 : 1);
  if (width % cell !== 0 || height % cell !== 0) throw new Error(`width and height must be multiples of ${cell} for this model`);
  const t0 = performance.now();
  const ctx: LoopContext = { model: g.model, encoders: g.encoders, denoiser: g.denoiser, steps: first.steps, h: height / g.model.vaeScaleFactor, w: width / g.model.vaeScaleFactor };
  const run = g.model.family === 'unet' ? await unetLoop(ctx, requests) : await flowLoop(ctx, requests);
  const t1 = performance.now();
  const images: (Uint8Array | Error)[] = [];
  // One image at a time through the VAE: its activations at 1024² are the largest of the pipeline.
  for (const latents of run.latents) images.push(latents instanceof GenerationStopped ? latents : await decode(g, latents, ctx.h, ctx.w, width, height));
  const timings = { textMs: run.textMs, denoiseMs: t1 - t0 - run.textMs, decodeMs: performance.now() - t1 };
  return images.map((rgb) => (rgb instanceof Error ? rgb : { rgb, width, height, denoiserCalls: run.calls, batchSize: requests.length, timings }));
}

/** VAE decode of one latent [C, h, w]: latents / scaling_factor + shift_factor → RGB bytes. */
async function decode(g: Graphs, latents: Float32Array, h: number, w: number, width: number, height: number): Promise<Uint8Array> {
  const { model, vae } = g;
  const scaled = latents.map((v) => v / model.scalingFactor + model.shiftFactor);
  const decoded = await runFloat(vae, { latent_sample: feed(vae, 'latent_sample', 'vae_decoder', scaled, [1, model.latentChannels, h, w]) }, 'sample', 'vae_decoder');
  const [, channels, outH, outW] = decoded.dims.map(Number);
  if (channels !== 3 || outH !== height || outW !== width) {
    throw new Error(`vae_decoder returned ${decoded.dims.join('x')}, expected 1x3x${height}x${width}`);
  }
  return toRgb(decoded.data, width, height);
}

/** [3, H, W] in [-1, 1] → interleaved RGB bytes. */
function toRgb(data: Float32Array, width: number, height: number): Uint8Array {
  const plane = width * height;
  const rgb = new Uint8Array(plane * 3);
  for (let p = 0; p < plane; p++) {
    for (let c = 0; c < 3; c++) {
      const v = (data[c * plane + p]! / 2 + 0.5) * 255;
      rgb[p * 3 + c] = v <= 0 ? 0 : v >= 255 ? 255 : Math.round(v);
    }
  }
  return rgb;
}

/**
 * JPEG (quality 90) or PNG bytes of a generated image, via sharp.
 *
 * @example const png = await encodeImage(image, 'png');
 */
export async function encodeImage(image: Pick<GeneratedImage, 'rgb' | 'width' | 'height'>, format: 'jpeg' | 'png'): Promise<Buffer> {
  const img = sharp(image.rgb, { raw: { width: image.width, height: image.height, channels: 3 } });
  return format === 'png' ? img.png({ compressionLevel: 6 }).toBuffer() : img.jpeg({ quality: 90 }).toBuffer();
}
