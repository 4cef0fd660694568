import sharp from 'sharp';
import { readModelFolder, type ModelFolder } from './model-folder.js';
import { gaussianNoise } from './random.js';
import { createScheduler } from './scheduler.js';
import { checkProvider, feed, hasInput, openSession, runFloat, scalarDims, type Provider, type Session } from './tensors.js';
import { loadPromptTokenizer, type PromptTokenizer } from './tokenizer.js';

/**
 * Text-to-image on onnxruntime-node: tokenizer(s) → text encoder(s) → denoiser (UNet or flow
 * transformer) stepped by the folder's scheduler with guidance → VAE decoder → RGB → JPEG/PNG.
 * One step blocks the calling thread (onnxruntime's run is synchronous underneath), so this
 * runs in the image worker process, never in the gateway; cancel and timeout are honoured
 * between steps.
 */
export interface PipelineOptions {
  provider: Provider;
  /** onnxruntime intra-op threads (0: its default, one per core). */
  threads?: number;
}

export interface GenerateRequest {
  prompt: string;
  negativePrompt: string;
  width: number;
  height: number;
  steps: number;
  guidance: number;
  /** The resolved seed (never -1 here). */
  seed: number;
  /** Aborted → the loop stops before the next step with GenerationStopped. */
  signal?: AbortSignal;
  /** Epoch ms after which the loop stops with GenerationStopped (execution timeout). */
  deadline?: number;
  /** Called after each denoising step (0-based), e.g. for progress updates. */
  onStep?: (step: number, total: number) => void;
}

export interface GeneratedImage {
  /** Interleaved RGB, 8 bits a channel, width × height × 3 bytes. */
  rgb: Uint8Array;
  width: number;
  height: number;
  /** How many times the denoiser ran (one batched call a step, both guidance branches in it). */
  denoiserCalls: number;
  timings: { textMs: number; denoiseMs: number; decodeMs: number };
}

/** The generation was cancelled or ran out of time between two steps. */
export class GenerationStopped extends Error {
  override readonly name = 'GenerationStopped';
  constructor(readonly reason: 'cancelled' | 'timeout') {
    super(reason === 'cancelled' ? 'generation cancelled' : 'execution timeout exceeded');
  }
}

export interface DiffusionPipeline {
  readonly model: ModelFolder;
  generate(request: GenerateRequest): Promise<GeneratedImage>;
  release(): Promise<void>;
}

/**
 * Opens every model of a folder on the configured provider.
 *
 * @example
 * const pipe = await loadPipeline('/models/sd-turbo-onnx', { provider: 'cuda' });
 * const image = await pipe.generate({ prompt: 'a lighthouse', negativePrompt: '', width: 512, height: 512, steps: 4, guidance: 0, seed: 1 });
 * const jpeg = await encodeImage(image, 'jpeg');
 */
export async function loadPipeline(dir: string, options: PipelineOptions): Promise<DiffusionPipeline> {
  checkProvider(options.provider);
  const model = readModelFolder(dir);
  const open = (file: string): Promise<Session> => openSession(file, options.provider, options.threads ?? 0);
  const [textEncoder, textEncoder2, denoiser, vae] = await Promise.all([
    open(model.textEncoder),
    model.textEncoder2 ? open(model.textEncoder2) : Promise.resolve(null),
    open(model.denoiser),
    open(model.vaeDecoder),
  ]);
  const tokenizer = loadPromptTokenizer(model.tokenizer, 77);
  const tokenizer2 = model.tokenizer2 ? loadPromptTokenizer(model.tokenizer2, 512) : null;
  const encoders = { textEncoder, textEncoder2, tokenizer, tokenizer2 };
  return {
    model,
    generate: (request) => generate(model, encoders, denoiser, vae, request),
    async release() {
      await Promise.all([textEncoder, textEncoder2, denoiser, vae].map((s) => s?.release()));
    },
  };
}

interface Encoders {
  textEncoder: Session;
  textEncoder2: Session | null;
  tokenizer: PromptTokenizer;
  tokenizer2: PromptTokenizer | null;
}

/** Encodes prompts in one batch: last_hidden_state [B, L, D] and, when present, pooler_output [B, D]. */
async function encodeText(session: Session, tokenizer: PromptTokenizer, prompts: string[], name: string) {
  const ids = prompts.flatMap((p) => tokenizer.encode(p));
  const result = await session.run({ input_ids: feed(session, 'input_ids', name, ids, [prompts.length, tokenizer.maxLength]) });
  const hidden = result.last_hidden_state;
  if (!hidden) throw new Error(`${name} has no output 'last_hidden_state' (outputs: ${session.outputNames.join(', ')})`);
  const pooled = result.pooler_output ?? result.text_embeds;
  return {
    hidden: hidden.data as Float32Array,
    hiddenDims: hidden.dims.map(Number),
    pooled: pooled ? (pooled.data as Float32Array) : null,
    pooledDims: pooled ? pooled.dims.map(Number) : [],
  };
}

function checkStop(request: GenerateRequest): void {
  if (request.signal?.aborted) throw new GenerationStopped('cancelled');
  if (request.deadline !== undefined && Date.now() > request.deadline) throw new GenerationStopped('timeout');
}

async function generate(model: ModelFolder, enc: Encoders, denoiser: Session, vae: Session, request: GenerateRequest): Promise<GeneratedImage> {
  const { width, height } = request;
  const cell = model.vaeScaleFactor * (model.family === 'transformer' ? 2 : 1);
  if (width % cell !== 0 || height % cell !== 0) throw new Error(`width and height must be multiples of ${cell} for this model`);
  const h = height / model.vaeScaleFactor;
  const w = width / model.vaeScaleFactor;
  const C = model.latentChannels;
  const t0 = performance.now();
  checkStop(request);

  const run = model.family === 'unet' ? await unetLoop(model, enc, denoiser, request, h, w, t0) : await flowLoop(model, enc, denoiser, request, h, w, t0);
  const t2 = performance.now();

  // VAE decode: latents / scaling_factor + shift_factor.
  const latents = run.latents;
  for (let k = 0; k < latents.length; k++) latents[k] = latents[k]! / model.scalingFactor + model.shiftFactor;
  const decoded = await runFloat(vae, { latent_sample: feed(vae, 'latent_sample', 'vae_decoder', latents, [1, C, h, w]) }, 'sample', 'vae_decoder');
  const [, channels, outH, outW] = decoded.dims.map(Number);
  if (channels !== 3 || outH !== height || outW !== width) {
    throw new Error(`vae_decoder returned ${decoded.dims.join('x')}, expected 1x3x${height}x${width}`);
  }
  const rgb = toRgb(decoded.data, width, height);
  return { rgb, width, height, denoiserCalls: run.calls, timings: { textMs: run.textMs, denoiseMs: t2 - t0 - run.textMs, decodeMs: performance.now() - t2 } };
}

/** UNet family: Euler discrete over epsilon / v predictions, classifier-free guidance when guidance > 1. */
async function unetLoop(model: ModelFolder, enc: Encoders, unet: Session, request: GenerateRequest, h: number, w: number, t0: number) {
  const C = model.latentChannels;
  const cfg = request.guidance > 1;
  const prompts = cfg ? [request.negativePrompt, request.prompt] : [request.prompt];
  const text = await encodeText(enc.textEncoder, enc.tokenizer, prompts, 'text_encoder');
  const textMs = performance.now() - t0;
  const scheduler = createScheduler(model.schedulerConfig, request.steps);
  if (scheduler.kind !== 'euler') throw new Error(`a UNet model needs an Euler-family scheduler, got ${model.schedulerConfig._class_name ?? '?'}`);

  const size = C * h * w;
  const latents = gaussianNoise(request.seed, size);
  for (let k = 0; k < size; k++) latents[k] = latents[k]! * scheduler.initNoiseSigma;
  const batch = prompts.length;
  const input = new Float32Array(size * batch);
  const guided = new Float32Array(size);
  const textFeed = feed(unet, 'encoder_hidden_states', 'unet', text.hidden, text.hiddenDims);
  const tDims = scalarDims(unet, 'timestep', 'unet', batch);
  let calls = 0;
  for (let i = 0; i < scheduler.timesteps.length; i++) {
    checkStop(request);
    const scale = scheduler.inputScale(i);
    for (let b = 0; b < batch; b++) for (let k = 0; k < size; k++) input[b * size + k] = latents[k]! * scale;
    const t = scheduler.timesteps[i]!;
    const out = await runFloat(unet, {
      sample: feed(unet, 'sample', 'unet', input, [batch, C, h, w]),
      timestep: feed(unet, 'timestep', 'unet', new Array<number>(tDims.length === 0 ? 1 : tDims[0]!).fill(t), tDims),
      encoder_hidden_states: textFeed,
    }, 'out_sample', 'unet');
    calls++;
    const o = out.data;
    if (cfg) for (let k = 0; k < size; k++) guided[k] = o[k]! + request.guidance * (o[size + k]! - o[k]!);
    scheduler.step(i, latents, cfg ? guided : o);
    request.onStep?.(i, scheduler.timesteps.length);
  }
  return { latents, calls, textMs };
}

/** Transformer family (FLUX layout): packed 2×2 latents, flow-matching Euler, embedded guidance when the model takes it. */
async function flowLoop(model: ModelFolder, enc: Encoders, transformer: Session, request: GenerateRequest, h: number, w: number, t0: number) {
  const C = model.latentChannels;
  const clip = await encodeText(enc.textEncoder, enc.tokenizer, [request.prompt], 'text_encoder');
  const seqText = enc.textEncoder2 && enc.tokenizer2 ? await encodeText(enc.textEncoder2, enc.tokenizer2, [request.prompt], 'text_encoder_2') : clip;
  if (!clip.pooled) throw new Error('text_encoder has no pooler_output, which a transformer model needs as pooled_projections');
  const textMs = performance.now() - t0;
  const ph = h / 2;
  const pw = w / 2;
  const tokens = ph * pw;
  const scheduler = createScheduler(model.schedulerConfig, request.steps, tokens);
  if (scheduler.kind !== 'flow') throw new Error(`a transformer model needs FlowMatchEulerDiscreteScheduler, got ${model.schedulerConfig._class_name ?? '?'}`);

  const latents = pack(gaussianNoise(request.seed, C * h * w), C, h, w);
  const imgIds = new Float32Array(tokens * 3);
  for (let i = 0; i < ph; i++) for (let j = 0; j < pw; j++) imgIds.set([0, i, j], (i * pw + j) * 3);
  const textLen = seqText.hiddenDims[1]!;
  const name = 'transformer';
  const fixed = {
    encoder_hidden_states: feed(transformer, 'encoder_hidden_states', name, seqText.hidden, seqText.hiddenDims),
    pooled_projections: feed(transformer, 'pooled_projections', name, clip.pooled, clip.pooledDims),
    img_ids: feed(transformer, 'img_ids', name, imgIds, [tokens, 3]),
    txt_ids: feed(transformer, 'txt_ids', name, new Float32Array(textLen * 3), [textLen, 3]),
    ...(hasInput(transformer, 'guidance') ? { guidance: feed(transformer, 'guidance', name, [request.guidance], scalarDims(transformer, 'guidance', name, 1)) } : {}),
  };
  const tDims = scalarDims(transformer, 'timestep', name, 1);
  let calls = 0;
  for (let i = 0; i < scheduler.timesteps.length; i++) {
    checkStop(request);
    const out = await runFloat(transformer, {
      ...fixed,
      hidden_states: feed(transformer, 'hidden_states', name, latents, [1, tokens, C * 4]),
      timestep: feed(transformer, 'timestep', name, [scheduler.timesteps[i]!], tDims),
    }, 'out_hidden_states', name);
    calls++;
    scheduler.step(i, latents, out.data);
    request.onStep?.(i, scheduler.timesteps.length);
  }
  return { latents: unpack(latents, C, h, w), calls, textMs };
}

/** [C, h, w] → [(h/2)(w/2), C·4], feature = c·4 + dy·2 + dx (diffusers' _pack_latents). */
function pack(x: Float32Array, C: number, h: number, w: number): Float32Array {
  const out = new Float32Array(x.length);
  const pw = w / 2;
  for (let c = 0; c < C; c++) for (let y = 0; y < h; y++) for (let xx = 0; xx < w; xx++) {
    const token = (y >> 1) * pw + (xx >> 1);
    out[token * C * 4 + c * 4 + (y & 1) * 2 + (xx & 1)] = x[(c * h + y) * w + xx]!;
  }
  return out;
}

function unpack(p: Float32Array, C: number, h: number, w: number): Float32Array {
  const out = new Float32Array(p.length);
  const pw = w / 2;
  for (let c = 0; c < C; c++) for (let y = 0; y < h; y++) for (let xx = 0; xx < w; xx++) {
    const token = (y >> 1) * pw + (xx >> 1);
    out[(c * h + y) * w + xx] = p[token * C * 4 + c * 4 + (y & 1) * 2 + (xx & 1)]!;
  }
  return out;
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
