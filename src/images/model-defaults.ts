import type { ModelFolder } from './model-folder.js';

/**
 * Request defaults of the model a folder holds (docs/models.md, "Defaults per model family"),
 * taken from its pipeline class and configuration the way diffusers and the model cards do:
 *
 * | family | steps | guidance | size | T5 tokens |
 * |---|---|---|---|---|
 * | FLUX.1-dev (transformer, `guidance_embeds: true`) | 28 | 3.5 (embedded) | 1024² | 512 |
 * | FLUX.1-schnell (transformer, no guidance embedding) | 4 | none | 1024² | 256 |
 * | Stable Diffusion 1.x / 2.x (UNet) | 50 | 7.5 (CFG) | unet `sample_size` × 8 | — |
 * | SD-Turbo (`_name_or_path` names a turbo checkpoint) | 1 | 0 (no CFG) | unet `sample_size` × 8 | — |
 *
 * SDXL (SDXL-Turbo included) is not supported: its UNet's extra inputs are not fed.
 * `gantry-defaults.json` in the folder overrides any of them. The public endpoints then apply
 * their own bounds (image-input.ts): steps into the endpoint's range, sizes into 256–1536.
 */
export interface ModelDefaults {
  /** What the defaults were read as, e.g. 'flux-dev', 'stable-diffusion', 'sd-turbo'. */
  family: string;
  steps: number;
  /** Default guidance; the model ignores guidance altogether when guidanceMode is 'none'. */
  guidance: number;
  /** classifier-free guidance (UNet), an embedded guidance input (FLUX-dev), or none (FLUX-schnell). */
  guidanceMode: 'cfg' | 'embedded' | 'none';
  width: number;
  height: number;
  /** T5 sequence length of the transformer family (FluxPipeline max_sequence_length); null for UNets. */
  maxSequenceLength: number | null;
}

function positive(value: unknown): number | null {
  return typeof value === 'number' && Number.isFinite(value) && value > 0 ? value : null;
}

function transformerDefaults(model: ModelFolder, hasGuidanceInput: boolean): ModelDefaults {
  const embedded = model.denoiserConfig.guidance_embeds === true || hasGuidanceInput;
  // FluxPipeline: default_sample_size 128 latent cells × the VAE's 8 = 1024.
  const size = (positive(model.denoiserConfig.sample_size) ?? 128) * model.vaeScaleFactor;
  return embedded
    ? { family: 'flux-dev', steps: 28, guidance: 3.5, guidanceMode: 'embedded', width: size, height: size, maxSequenceLength: 512 }
    : { family: 'flux-schnell', steps: 4, guidance: 0, guidanceMode: 'none', width: size, height: size, maxSequenceLength: 256 };
}

function unetDefaults(model: ModelFolder): ModelDefaults {
  // StableDiffusionPipeline: height = width = unet.config.sample_size × vae_scale_factor.
  const size = (positive(model.denoiserConfig.sample_size) ?? 64) * model.vaeScaleFactor;
  if (/turbo/i.test(model.nameOrPath)) {
    // The SD-Turbo card: one step, guidance_scale 0 (the distillation replaced CFG).
    return { family: 'sd-turbo', steps: 1, guidance: 0, guidanceMode: 'cfg', width: size, height: size, maxSequenceLength: null };
  }
  return { family: 'stable-diffusion', steps: 50, guidance: 7.5, guidanceMode: 'cfg', width: size, height: size, maxSequenceLength: null };
}

/**
 * The request defaults of a loaded model folder. `hasGuidanceInput` says whether the exported
 * transformer takes a `guidance` tensor (the graph is the final word on FLUX-dev vs schnell).
 *
 * @example modelDefaults(readModelFolder('/models/flux-schnell'), false).steps === 4
 */
export function modelDefaults(model: ModelFolder, hasGuidanceInput: boolean): ModelDefaults {
  const found = model.family === 'transformer' ? transformerDefaults(model, hasGuidanceInput) : unetDefaults(model);
  const o = model.overrides;
  const steps = positive(o.num_inference_steps);
  const width = positive(o.width);
  const height = positive(o.height);
  const guidance = typeof o.guidance === 'number' && Number.isFinite(o.guidance) && o.guidance >= 0 ? o.guidance : null;
  const maxSequenceLength = positive(o.max_sequence_length);
  return {
    ...found,
    ...(steps !== null ? { steps: Math.round(steps) } : {}),
    ...(width !== null ? { width: Math.round(width) } : {}),
    ...(height !== null ? { height: Math.round(height) } : {}),
    ...(guidance !== null && found.guidanceMode !== 'none' ? { guidance } : {}),
    ...(maxSequenceLength !== null && found.maxSequenceLength !== null ? { maxSequenceLength: Math.min(512, Math.round(maxSequenceLength)) } : {}),
  };
}
