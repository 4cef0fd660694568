import type { ModelFolder } from './model-folder.js';
import { gaussianNoise } from './random.js';
import { createScheduler } from './scheduler.js';
import { feed, hasInput, inputInfo, runFloat, scalarDims, type Session } from './tensors.js';
import type { PromptEncoders, TextConditioning } from './text-encoders.js';

/**
 * The denoising loops over a batch of requests of one size and step count: one denoiser run
 * per step for the whole batch (docs/models.md, "Batching"). A request that is cancelled or
 * runs out of time between two steps leaves the batch; the others go on.
 */

/** What one request of a batch asks for (the pipeline's GenerateRequest fields the loops read). */
export interface LoopRequest {
  prompt: string;
  negativePrompt: string;
  guidance: number;
  seed: number;
  signal?: AbortSignal;
  deadline?: number;
  onStep?: (step: number, total: number) => void;
}

/** The generation was cancelled or ran out of time between two steps. */
export class GenerationStopped extends Error {
  override readonly name = 'GenerationStopped';
  constructor(readonly reason: 'cancelled' | 'timeout') {
    super(reason === 'cancelled' ? 'generation cancelled' : 'execution timeout exceeded');
  }
}

/** Everything a loop needs besides its requests. */
export interface LoopContext {
  model: ModelFolder;
  encoders: PromptEncoders;
  denoiser: Session;
  steps: number;
  /** Latent height and width (pixels / VAE scale). */
  h: number;
  w: number;
}

/** Final latents [C, h, w] per request, or why the request stopped. */
export interface LoopResult {
  latents: (Float32Array | GenerationStopped)[];
  calls: number;
  textMs: number;
}

function stopReason(request: LoopRequest): GenerationStopped | null {
  if (request.signal?.aborted) return new GenerationStopped('cancelled');
  if (request.deadline !== undefined && Date.now() > request.deadline) return new GenerationStopped('timeout');
  return null;
}

/** Requests still running: a stopped one gets its reason in `results` and leaves. */
function stillRunning(requests: LoopRequest[], active: number[], results: (Float32Array | GenerationStopped)[]): number[] {
  return active.filter((k) => {
    const stop = stopReason(requests[k]!);
    if (stop) results[k] = stop;
    return stop === null;
  });
}

/** Rows `indices` of a [B, ...row] tensor, in that order. */
function rows(data: Float32Array, rowSize: number, indices: number[]): Float32Array {
  const out = new Float32Array(indices.length * rowSize);
  indices.forEach((r, j) => out.set(data.subarray(r * rowSize, (r + 1) * rowSize), j * rowSize));
  return out;
}

/** The text rows of the active requests (rows of `hiddenDims` [B, L, D]). */
function textRows(text: TextConditioning, indices: number[]): { data: Float32Array; dims: number[] } {
  const [, L, D] = text.hiddenDims;
  return { data: rows(text.hidden, L! * D!, indices), dims: [indices.length, L!, D!] };
}

/** UNet family: Euler discrete over epsilon / v predictions, classifier-free guidance when guidance > 1. */
export async function unetLoop(ctx: LoopContext, requests: LoopRequest[]): Promise<LoopResult> {
  const t0 = performance.now();
  const { model, h, w } = ctx;
  const C = model.latentChannels;
  const N = requests.length;
  const cfg = requests[0]!.guidance > 1;
  const text = await ctx.encoders.encode(cfg ? [...requests.map((r) => r.negativePrompt), ...requests.map((r) => r.prompt)] : requests.map((r) => r.prompt));
  const textMs = performance.now() - t0;
  const scheduler = createScheduler(model.schedulerConfig, ctx.steps);
  if (scheduler.kind !== 'euler') throw new Error(`a UNet model needs an Euler-family scheduler, got ${model.schedulerConfig._class_name ?? '?'}`);
  const size = C * h * w;
  const latents = requests.map((r) => gaussianNoise(r.seed, size).map((v) => v * scheduler.initNoiseSigma));
  const results: (Float32Array | GenerationStopped)[] = [...latents];
  let active = requests.map((_, k) => k);
  // The encoder_hidden_states tensor is built once per batch, and again only when a request leaves it.
  let textFeed = null as { key: string; tensor: ReturnType<typeof feed> } | null;
  let calls = 0;
  for (let i = 0; i < scheduler.timesteps.length; i++) {
    active = stillRunning(requests, active, results);
    if (active.length === 0) break;
    const B = active.length;
    const batch = cfg ? 2 * B : B;
    const scale = scheduler.inputScale(i);
    const input = new Float32Array(batch * size);
    active.forEach((k, j) => {
      for (let x = 0; x < size; x++) input[j * size + x] = latents[k]![x]! * scale;
      if (cfg) input.copyWithin((B + j) * size, j * size, (j + 1) * size);
    });
    const key = active.join(',');
    if (textFeed?.key !== key) {
      const seq = textRows(text, cfg ? [...active, ...active.map((k) => N + k)] : active);
      textFeed = { key, tensor: feed(ctx.denoiser, 'encoder_hidden_states', 'unet', seq.data, seq.dims) };
    }
    const tDims = scalarDims(ctx.denoiser, 'timestep', 'unet', batch);
    const out = await runFloat(ctx.denoiser, {
      sample: feed(ctx.denoiser, 'sample', 'unet', input, [batch, C, h, w]),
      timestep: feed(ctx.denoiser, 'timestep', 'unet', new Array<number>(tDims.length === 0 ? 1 : tDims[0]!).fill(scheduler.timesteps[i]!), tDims),
      encoder_hidden_states: textFeed.tensor,
    }, 'out_sample', 'unet');
    calls++;
    active.forEach((k, j) => {
      const g = requests[k]!.guidance;
      const own = out.data.subarray((cfg ? B + j : j) * size, (cfg ? B + j + 1 : j + 1) * size);
      const uncond = cfg ? out.data.subarray(j * size, (j + 1) * size) : own;
      const eps = cfg ? own.map((c, x) => uncond[x]! + g * (c - uncond[x]!)) : own;
      scheduler.step(i, latents[k]!, eps);
      requests[k]!.onStep?.(i, scheduler.timesteps.length);
    });
  }
  return { latents: results, calls, textMs };
}

/** img_ids of the packed latent grid: (0, row, column) per token; rank 2, or rank 3 for older exports. */
function imageIds(transformer: Session, ph: number, pw: number): { data: Float32Array; dims: number[] } {
  const tokens = ph * pw;
  const data = new Float32Array(tokens * 3);
  for (let i = 0; i < ph; i++) for (let j = 0; j < pw; j++) data.set([0, i, j], (i * pw + j) * 3);
  return { data, dims: inputInfo(transformer, 'img_ids', 'transformer').shape.length === 3 ? [1, tokens, 3] : [tokens, 3] };
}

/** Transformer family (FLUX layout): packed 2×2 latents, flow-matching Euler, embedded guidance when the model takes it. */
export async function flowLoop(ctx: LoopContext, requests: LoopRequest[]): Promise<LoopResult> {
  const t0 = performance.now();
  const { model, h, w } = ctx;
  const C = model.latentChannels;
  const prompts = requests.map((r) => r.prompt);
  const clip = await ctx.encoders.encode(prompts);
  const seqText = ctx.encoders.hasSequenceEncoder ? await ctx.encoders.encode(prompts, true) : clip;
  if (!clip.pooled) throw new Error('text_encoder has no pooler_output, which a transformer model needs as pooled_projections');
  const textMs = performance.now() - t0;
  const [ph, pw] = [h / 2, w / 2];
  const tokens = ph * pw;
  const scheduler = createScheduler(model.schedulerConfig, ctx.steps, tokens);
  if (scheduler.kind !== 'flow') throw new Error(`a transformer model needs FlowMatchEulerDiscreteScheduler, got ${model.schedulerConfig._class_name ?? '?'}`);
  const latents = requests.map((r) => pack(gaussianNoise(r.seed, C * h * w), C, h, w));
  const results: (Float32Array | GenerationStopped)[] = [...latents];
  const T = ctx.denoiser;
  const name = 'transformer';
  const ids = imageIds(T, ph, pw);
  const textLen = seqText.hiddenDims[1]!;
  const D = clip.pooledDims[1]!;
  const fixed = {
    img_ids: feed(T, 'img_ids', name, ids.data, ids.dims),
    txt_ids: feed(T, 'txt_ids', name, new Float32Array(textLen * 3), ids.dims.length === 3 ? [1, textLen, 3] : [textLen, 3]),
  };
  let active = requests.map((_, k) => k);
  let conditioning = null as { key: string; feeds: Record<string, ReturnType<typeof feed>> } | null;
  let calls = 0;
  for (let i = 0; i < scheduler.timesteps.length; i++) {
    active = stillRunning(requests, active, results);
    if (active.length === 0) break;
    const B = active.length;
    const key = active.join(',');
    if (conditioning?.key !== key) {
      const seq = textRows(seqText, active);
      conditioning = {
        key,
        feeds: {
          encoder_hidden_states: feed(T, 'encoder_hidden_states', name, seq.data, seq.dims),
          pooled_projections: feed(T, 'pooled_projections', name, rows(clip.pooled, D, active), [B, D]),
          ...(hasInput(T, 'guidance') ? { guidance: feed(T, 'guidance', name, active.map((k) => requests[k]!.guidance), scalarDims(T, 'guidance', name, B)) } : {}),
        },
      };
    }
    const hidden = new Float32Array(B * tokens * C * 4);
    active.forEach((k, j) => hidden.set(latents[k]!, j * tokens * C * 4));
    const tDims = scalarDims(T, 'timestep', name, B);
    const out = await runFloat(T, {
      ...fixed,
      ...conditioning.feeds,
      hidden_states: feed(T, 'hidden_states', name, hidden, [B, tokens, C * 4]),
      timestep: feed(T, 'timestep', name, new Array<number>(tDims.length === 0 ? 1 : tDims[0]!).fill(scheduler.timesteps[i]!), tDims),
    }, 'out_hidden_states', name);
    calls++;
    active.forEach((k, j) => {
      scheduler.step(i, latents[k]!, out.data.subarray(j * tokens * C * 4, (j + 1) * tokens * C * 4));
      requests[k]!.onStep?.(i, scheduler.timesteps.length);
    });
  }
  return { latents: results.map((r) => (r instanceof GenerationStopped ? r : unpack(r, C, h, w))), calls, textMs };
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
