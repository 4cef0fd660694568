import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import type { SchedulerConfig } from './scheduler.js';

/**
 * Reads a diffusers / Optimum ONNX export folder (`optimum-cli export onnx --model ...`):
 *
 *   model_index.json
 *   scheduler/scheduler_config.json
 *   tokenizer/        tokenizer.json, or vocab.json + merges.txt (+ tokenizer_config.json)
 *   text_encoder/model.onnx          input_ids → last_hidden_state, pooler_output
 *   [tokenizer_2/, text_encoder_2/model.onnx]   (FLUX: T5)
 *   unet/model.onnx                  sample, timestep, encoder_hidden_states → out_sample
 *   or transformer/model.onnx        hidden_states, encoder_hidden_states, pooled_projections,
 *                                    timestep, img_ids, txt_ids[, guidance] → out_hidden_states
 *   vae_decoder/model.onnx           latent_sample → sample   (+ config.json: scaling_factor)
 *
 * Large exports keep weights beside the graph (model.onnx_data); onnxruntime finds them.
 * An operator may add `gantry-defaults.json` to override the per-model request defaults
 * (model-defaults.ts).
 */
export interface ModelFolder {
  dir: string;
  /** unet: Stable Diffusion family (epsilon / v prediction); transformer: FLUX family (flow matching). */
  family: 'unet' | 'transformer';
  schedulerConfig: SchedulerConfig;
  textEncoder: string;
  tokenizer: string;
  textEncoder2: string | null;
  tokenizer2: string | null;
  denoiser: string;
  vaeDecoder: string;
  /** Latent channels the denoiser works on (4 for SD, 16 for FLUX). */
  latentChannels: number;
  /** Pixels per latent cell (8 for SD and FLUX VAEs). */
  vaeScaleFactor: number;
  scalingFactor: number;
  shiftFactor: number;
  /** True for a tiny demo model built by Gantry (abstract images). */
  tiny: boolean;
  /** model_index.json `_class_name` (FluxPipeline, StableDiffusionPipeline, ...). */
  pipelineClass: string;
  /** model_index.json `_name_or_path`: the checkpoint an export was made from, when recorded. */
  nameOrPath: string;
  /** unet/config.json or transformer/config.json. */
  denoiserConfig: Record<string, unknown>;
  /** The operator's gantry-defaults.json, or {}. */
  overrides: Record<string, unknown>;
}

/** The operator's file of request defaults inside a model folder. */
export const DEFAULTS_FILE = 'gantry-defaults.json';

function readJson(file: string): Record<string, unknown> {
  try {
    return JSON.parse(readFileSync(file, 'utf8')) as Record<string, unknown>;
  } catch (err) {
    throw new Error(`cannot read ${file}: ${(err as Error).message}`);
  }
}

function optionalJson(file: string): Record<string, unknown> {
  return existsSync(file) ? readJson(file) : {};
}

function need(dir: string, rel: string): string {
  const path = join(dir, rel);
  if (!existsSync(path)) throw new Error(`model folder ${dir} has no ${rel} (expected a diffusers/Optimum ONNX export; see docs/models.md)`);
  return path;
}

function numberOr(value: unknown, fallback: number): number {
  return typeof value === 'number' && Number.isFinite(value) ? value : fallback;
}

/**
 * Describes the model in `dir`; throws naming the missing file when the layout is not an ONNX
 * diffusion export.
 *
 * @example readModelFolder('/models/sd-turbo-onnx').family === 'unet'
 */
export function readModelFolder(dir: string): ModelFolder {
  if (!existsSync(dir)) throw new Error(`model folder ${dir} does not exist`);
  const index = readJson(need(dir, 'model_index.json'));
  const family = existsSync(join(dir, 'transformer', 'model.onnx')) ? 'transformer' : existsSync(join(dir, 'unet', 'model.onnx')) ? 'unet' : null;
  if (family === null) {
    const found = readdirSync(dir).join(', ');
    throw new Error(`model folder ${dir} has neither unet/model.onnx nor transformer/model.onnx (found: ${found})`);
  }
  const denoiserConfig = optionalJson(join(dir, family, 'config.json'));
  const vaeConfig = optionalJson(join(dir, 'vae_decoder', 'config.json'));
  const blocks = Array.isArray(vaeConfig.block_out_channels) ? vaeConfig.block_out_channels.length : 4;
  const inChannels = numberOr(denoiserConfig.in_channels, family === 'unet' ? 4 : 64);
  const has2 = existsSync(join(dir, 'text_encoder_2', 'model.onnx'));
  return {
    dir,
    family,
    schedulerConfig: readJson(need(dir, 'scheduler/scheduler_config.json')) as SchedulerConfig,
    textEncoder: need(dir, 'text_encoder/model.onnx'),
    tokenizer: need(dir, 'tokenizer'),
    textEncoder2: has2 ? join(dir, 'text_encoder_2', 'model.onnx') : null,
    tokenizer2: has2 ? need(dir, 'tokenizer_2') : null,
    denoiser: join(dir, family, 'model.onnx'),
    vaeDecoder: need(dir, 'vae_decoder/model.onnx'),
    // FLUX packs 2×2 latent cells into one token: in_channels 64 = 16 channels × 4.
    latentChannels: numberOr(vaeConfig.latent_channels, family === 'unet' ? inChannels : inChannels / 4),
    vaeScaleFactor: 2 ** (blocks - 1),
    scalingFactor: numberOr(vaeConfig.scaling_factor, family === 'unet' ? 0.18215 : 0.3611),
    shiftFactor: numberOr(vaeConfig.shift_factor, 0),
    tiny: index._gantry_tiny_model === true,
    pipelineClass: typeof index._class_name === 'string' ? index._class_name : '',
    nameOrPath: typeof index._name_or_path === 'string' ? index._name_or_path : '',
    denoiserConfig,
    overrides: optionalJson(join(dir, DEFAULTS_FILE)),
  };
}
