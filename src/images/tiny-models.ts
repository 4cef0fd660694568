import { existsSync, mkdirSync, readFileSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { DEFAULTS_FILE } from './model-folder.js';
import { GraphBuilder, type GraphPrecision } from './onnx-graph.js';
import type { ImageModelKind } from '../config/image-config.js';

/**
 * Tiny demo models, built locally on first start because no weights may be downloaded. They
 * have the folder layout and tensor names of real diffusers / Optimum ONNX exports, so the
 * pipeline that runs them is the one that runs a real model; but their weights are random
 * (deterministic) and a few thousand parameters, so their images are abstract colour fields.
 * They are NOT Stable Diffusion or FLUX.
 *
 * - quality: a UNet-family model (CLIP-style text encoder with vocab.json + merges.txt,
 *   conv "UNet" predicting epsilon, Euler discrete scheduler, 4-channel VAE decoder);
 * - fast: a flow-transformer-family model (two text encoders as FLUX has: CLIP-style pooled +
 *   T5-style sequence with tokenizer.json; packed 2×2 latents, img_ids/txt_ids, guidance
 *   input; flow-matching Euler; 16-channel VAE decoder with shift).
 */

/** Bump when the graphs change: folders built by an older version are rebuilt. */
export const TINY_MODEL_VERSION = 2;
const MARKER = 'gantry-tiny-model.json';
const CLIP_LEN = 77;
/** Longest T5 sequence the tiny sequence encoder takes (FLUX-dev feeds 512 tokens). */
const T5_LEN = 512;

/** GPT-2 / CLIP byte ↔ unicode table: printable bytes map to themselves, others above 255. */
function bytesToUnicode(): string[] {
  const table: string[] = [];
  let extra = 0;
  for (let b = 0; b < 256; b++) {
    const printable = (b >= 33 && b <= 126) || (b >= 161 && b <= 172) || (b >= 174 && b <= 255);
    table.push(String.fromCharCode(printable ? b : 256 + extra++));
  }
  return table;
}

/** vocab.json / merges.txt / tokenizer_config.json of a byte-level CLIP-style BPE (no merges). */
function clipTokenizerFiles(): Record<string, string> {
  const vocab: Record<string, number> = {};
  for (const ch of bytesToUnicode()) vocab[ch] = Object.keys(vocab).length;
  for (const ch of bytesToUnicode()) vocab[`${ch}</w>`] = Object.keys(vocab).length;
  vocab['<|startoftext|>'] = Object.keys(vocab).length;
  vocab['<|endoftext|>'] = Object.keys(vocab).length;
  const config = { model_max_length: CLIP_LEN, bos_token: '<|startoftext|>', eos_token: '<|endoftext|>', pad_token: '<|endoftext|>', unk_token: '<|endoftext|>', do_lower_case: true };
  return { 'vocab.json': JSON.stringify(vocab), 'merges.txt': '#version: 0.2\n', 'tokenizer_config.json': JSON.stringify(config, null, 2) };
}

/** tokenizer.json of a T5-style tokenizer (byte-level BPE here) that appends </s>. */
function t5TokenizerFiles(): Record<string, string> {
  const specials = ['<pad>', '</s>', '<unk>'];
  const vocab: Record<string, number> = {};
  for (const t of [...specials, ...bytesToUnicode()]) vocab[t] = Object.keys(vocab).length;
  const json = {
    version: '1.0',
    added_tokens: specials.map((content, id) => ({ id, content, single_word: false, lstrip: false, rstrip: false, normalized: false, special: true })),
    normalizer: null,
    pre_tokenizer: { type: 'ByteLevel', add_prefix_space: true, trim_offsets: true, use_regex: true },
    post_processor: {
      type: 'TemplateProcessing',
      single: [{ Sequence: { id: 'A', type_id: 0 } }, { SpecialToken: { id: '</s>', type_id: 0 } }],
      pair: [{ Sequence: { id: 'A', type_id: 0 } }, { SpecialToken: { id: '</s>', type_id: 0 } }, { Sequence: { id: 'B', type_id: 0 } }, { SpecialToken: { id: '</s>', type_id: 0 } }],
      special_tokens: { '</s>': { id: '</s>', ids: [1], tokens: ['</s>'] } },
    },
    decoder: { type: 'ByteLevel', add_prefix_space: true, trim_offsets: true, use_regex: true },
    model: { type: 'BPE', dropout: null, unk_token: '<unk>', continuing_subword_prefix: null, end_of_word_suffix: null, fuse_unk: false, byte_fallback: false, vocab, merges: [] },
  };
  const config = { model_max_length: T5_LEN, eos_token: '</s>', pad_token: '<pad>', unk_token: '<unk>' };
  return { 'tokenizer.json': JSON.stringify(json), 'tokenizer_config.json': JSON.stringify(config, null, 2) };
}

/** Which real family a tiny model copies the layout and configuration of. */
export type TinyVariant = 'unet' | 'sd-turbo' | 'flux-dev' | 'flux-schnell';

/** The graphs of a folder, each of which may come in its own precision (mixed exports). */
export type TinyGraph = 'textEncoder' | 'textEncoder2' | 'denoiser' | 'vae';

/** What to build: the family layout and the precision of each graph (default float32). */
export interface TinyModelOptions {
  variant?: TinyVariant;
  precision?: Partial<Record<TinyGraph, GraphPrecision>>;
}

/**
 * input_ids → last_hidden_state [B, L, D] and pooler_output [B, D], as CLIP / T5 exports name
 * them. Any sequence length up to `maxLen` (position embeddings are gathered for 0..L-1). The
 * pooled vector is the mean over the non-padding tokens, so it depends on the prompt and not
 * mostly on the padding.
 */
function textEncoder(name: string, vocabSize: number, maxLen: number, dim: number, padId: number, precision: GraphPrecision): Uint8Array {
  const g = new GraphBuilder(name, precision);
  const ids = g.input('input_ids', 'int64', ['batch_size', 'sequence_length']);
  const emb = g.op('Gather', [g.constant('token_embedding', [vocabSize, dim], 1.5), ids]);
  const length = g.op('Gather', [g.op('Shape', [ids]), g.scalar('one_index', 1)], { axis: 0 });
  const positions = g.op('Range', [g.scalar('zero', 0), length, g.scalar('step', 1)]);
  const pos = g.op('Add', [emb, g.op('Gather', [g.constant('position_embedding', [maxLen, dim], 0.2), positions])]);
  const hidden = g.op('Tanh', [g.qdq(g.op('MatMul', [pos, g.constant('proj', [dim, dim], 0.6)]), 8)]);
  const mask = g.op('Cast', [g.op('Not', [g.op('Equal', [ids, g.ints('pad_id', [padId])])])], { to: g.computeType });
  const masked = g.op('Mul', [hidden, g.op('Unsqueeze', [mask, g.ints('axes_2', [2])])]);
  const count = g.op('Add', [g.op('ReduceSum', [mask, g.ints('axes_1', [1])], { keepdims: 1 }), g.constant('one', [1], new Float32Array([1]))]);
  const pooled = g.op('Div', [g.op('ReduceSum', [masked, g.ints('axes_1b', [1])], { keepdims: 0 }), count]);
  g.floatOutput('last_hidden_state', hidden, ['batch_size', 'sequence_length', dim]);
  g.floatOutput('pooler_output', pooled, ['batch_size', dim]);
  return g.encode();
}

/** sample, timestep, encoder_hidden_states → out_sample (epsilon), as an Optimum UNet export. */
function unet(textDim: number, precision: GraphPrecision): Uint8Array {
  const C = 4;
  const H = 16;
  const g = new GraphBuilder('tiny-unet', precision);
  const sample = g.floatInput('sample', ['batch_size', C, 'height', 'width']);
  const timestep = g.floatInput('timestep', ['steps']);
  const text = g.floatInput('encoder_hidden_states', ['batch_size', 'sequence_length', textDim]);
  const axes23 = g.ints('axes_2_3', [2, 3]);
  const axes1 = g.ints('axes_1', [1]);
  // Text conditioning: a per-channel bias from the mean token state (80x: padding dilutes it).
  const pooled = g.op('ReduceMean', [text], { axes: [1], keepdims: 0 });
  const cond = g.op('Unsqueeze', [g.op('MatMul', [pooled, g.constant('cond_proj', [textDim, H], 8)]), axes23]);
  // Timestep embedding: sin(t / 1000 · w).
  const t = g.op('Div', [timestep, g.constant('thousand', [1], new Float32Array([1000]))]);
  const temb = g.op('Unsqueeze', [g.op('Sin', [g.op('MatMul', [g.op('Unsqueeze', [t, axes1]), g.constant('time_proj', [1, H], 3)])]), axes23]);
  const h1 = g.qdq(g.op('Conv', [sample, g.constant('conv_in', [H, C, 3, 3], 0.5), g.constant('conv_in_bias', [H], 0.2)], { pads: [1, 1, 1, 1] }), 8);
  const act = g.op('Tanh', [g.op('Add', [g.op('Add', [h1, cond]), temb])]);
  const delta = g.op('Conv', [act, g.constant('conv_out', [C, H, 3, 3], 0.06)], { pads: [1, 1, 1, 1] });
  g.floatOutput('out_sample', g.op('Add', [sample, delta]), ['batch_size', C, 'height', 'width']);
  return g.encode();
}

/** FLUX-style transformer inputs → out_hidden_states (velocity), on packed 2×2 latents; dev has a guidance input, schnell none. */
function transformer(pooledDim: number, textDim: number, withGuidance: boolean, precision: GraphPrecision): Uint8Array {
  const P = 64;
  const H = 32;
  const g = new GraphBuilder('tiny-transformer', precision);
  const hs = g.floatInput('hidden_states', ['batch_size', 'packed_height_width', P]);
  const text = g.floatInput('encoder_hidden_states', ['batch_size', 'sequence_length', textDim]);
  const pooled = g.floatInput('pooled_projections', ['batch_size', pooledDim]);
  const timestep = g.floatInput('timestep', ['batch_size']);
  const imgIds = g.floatInput('img_ids', ['packed_height_width', 3]);
  const txtIds = g.floatInput('txt_ids', ['sequence_length', 3]);
  const axes1 = g.ints('axes_1', [1]);
  const embed = (x: string, name: string, scale: number): string =>
    g.op('Sin', [g.op('MatMul', [g.op('Unsqueeze', [x, axes1]), g.constant(name, [1, H], scale)])]);
  const x = g.qdq(g.op('MatMul', [hs, g.constant('x_embedder', [P, H], 0.3)]), 16);
  const pos = g.op('Sin', [g.op('MatMul', [imgIds, g.constant('pos_embedder', [3, H], 0.35)])]);
  // txt_ids are all zero in FLUX; a zero-weight projection keeps the input part of the graph.
  const txtPos = g.op('ReduceMean', [g.op('MatMul', [txtIds, g.constant('txt_pos', [3, H], new Float32Array(3 * H))])], { axes: [0], keepdims: 0 });
  const terms = [
    g.op('MatMul', [pooled, g.constant('pooled_proj', [pooledDim, H], 4)]),
    g.op('MatMul', [g.op('ReduceMean', [text], { axes: [1], keepdims: 0 }), g.constant('context_proj', [textDim, H], 5)]),
    embed(timestep, 'time_proj', 3),
  ];
  if (withGuidance) terms.push(embed(g.floatInput('guidance', ['batch_size']), 'guidance_proj', 0.4));
  const cond = terms.reduce((a, b) => g.op('Add', [a, b]));
  const h = g.op('Tanh', [g.op('Add', [g.op('Add', [g.op('Add', [x, pos]), txtPos]), g.op('Unsqueeze', [cond, axes1])])]);
  g.floatOutput('out_hidden_states', g.op('Add', [hs, g.op('MatMul', [h, g.constant('proj_out', [H, P], 0.4)])]), ['batch_size', 'packed_height_width', P]);
  return g.encode();
}

/** latent_sample → sample [B, 3, 8h, 8w] in [-1, 1], as a VAE decoder export. */
function vaeDecoder(channels: number, inScale: number, precision: GraphPrecision): Uint8Array {
  const H = 16;
  const g = new GraphBuilder(`tiny-vae-${channels}`, precision);
  const latent = g.floatInput('latent_sample', ['batch_size', channels, 'latent_height', 'latent_width']);
  const h = g.op('Tanh', [g.qdq(g.op('Conv', [latent, g.constant('conv_in', [H, channels, 3, 3], inScale), g.constant('conv_in_bias', [H], 0.3)], { pads: [1, 1, 1, 1] }), 4)]);
  const rgb = g.op('Conv', [h, g.constant('conv_out', [3, H, 1, 1], 0.45)]);
  const up = g.op('Resize', [rgb, '', g.float32('scales', [4], new Float32Array([1, 1, 8, 8]))], { mode: 'linear' });
  g.floatOutput('sample', g.op('Tanh', [up]), ['batch_size', 3, 'height', 'width']);
  return g.encode();
}

function json(value: unknown): string {
  return `${JSON.stringify(value, null, 2)}\n`;
}

/** The marker file's text: which tiny model of which version a folder holds. */
function tinyMarker(kind: ImageModelKind, options: TinyModelOptions): string {
  return json({ version: TINY_MODEL_VERSION, kind, variant: options.variant ?? VARIANT_OF[kind], precision: options.precision ?? {} });
}

const VARIANT_OF: Record<ImageModelKind, TinyVariant> = { quality: 'unet', fast: 'flux-schnell' };

function unetFiles(variant: TinyVariant, precision: TinyModelOptions['precision'] = {}): Record<string, string | Uint8Array> {
  const turbo = variant === 'sd-turbo';
  return {
    'model_index.json': json({
      _class_name: turbo ? 'StableDiffusionPipeline' : 'GantryTinyUNetPipeline',
      ...(turbo ? { _name_or_path: 'stabilityai/sd-turbo' } : {}),
      _gantry_tiny_model: true, text_encoder: ['gantry', 'TinyTextEncoder'], tokenizer: ['transformers', 'CLIPTokenizer'], unet: ['gantry', 'TinyUNet'], vae_decoder: ['gantry', 'TinyVaeDecoder'], scheduler: ['diffusers', 'EulerDiscreteScheduler'],
    }),
    'scheduler/scheduler_config.json': json({ _class_name: 'EulerDiscreteScheduler', num_train_timesteps: 1000, beta_start: 0.00085, beta_end: 0.012, beta_schedule: 'scaled_linear', prediction_type: 'epsilon', timestep_spacing: turbo ? 'trailing' : 'linspace', steps_offset: 1 }),
    'unet/model.onnx': unet(32, precision.denoiser ?? 'float32'),
    'unet/config.json': json({ in_channels: 4, out_channels: 4, cross_attention_dim: 32, sample_size: turbo ? 64 : 128 }),
    'vae_decoder/model.onnx': vaeDecoder(4, 0.12, precision.vae ?? 'float32'),
    'vae_decoder/config.json': json({ latent_channels: 4, scaling_factor: 0.18215, block_out_channels: [8, 8, 8, 8] }),
    // The demo model keeps the spec's quality defaults (28 steps at 1024²; guidance 7.5 is SD's own).
    ...(variant === 'unet' ? { [DEFAULTS_FILE]: json({ num_inference_steps: 28, width: 1024, height: 1024 }) } : {}),
  };
}

function transformerFiles(variant: TinyVariant, precision: TinyModelOptions['precision'] = {}): Record<string, string | Uint8Array> {
  const dev = variant === 'flux-dev';
  const scheduler = dev
    ? { _class_name: 'FlowMatchEulerDiscreteScheduler', num_train_timesteps: 1000, shift: 3.0, use_dynamic_shifting: true, base_shift: 0.5, max_shift: 1.15, base_image_seq_len: 256, max_image_seq_len: 4096 }
    : { _class_name: 'FlowMatchEulerDiscreteScheduler', num_train_timesteps: 1000, shift: 1.0, use_dynamic_shifting: false, base_shift: 0.5, max_shift: 1.15, base_image_seq_len: 256, max_image_seq_len: 4096 };
  const files: Record<string, string | Uint8Array> = {
    'model_index.json': json({ _class_name: 'FluxPipeline', _gantry_tiny_model: true, text_encoder: ['gantry', 'TinyTextEncoder'], text_encoder_2: ['gantry', 'TinyTextEncoder'], tokenizer: ['transformers', 'CLIPTokenizer'], tokenizer_2: ['transformers', 'T5TokenizerFast'], transformer: ['gantry', 'TinyTransformer'], vae_decoder: ['gantry', 'TinyVaeDecoder'], scheduler: ['diffusers', 'FlowMatchEulerDiscreteScheduler'] }),
    'scheduler/scheduler_config.json': json(scheduler),
    'text_encoder_2/model.onnx': textEncoder('tiny-text-encoder-2', 259, T5_LEN, 48, 0, precision.textEncoder2 ?? 'float32'),
    'text_encoder_2/config.json': json({ d_model: 48 }),
    'transformer/model.onnx': transformer(32, 48, dev, precision.denoiser ?? 'float32'),
    'transformer/config.json': json({ in_channels: 64, guidance_embeds: dev, pooled_projection_dim: 32, joint_attention_dim: 48 }),
    'vae_decoder/model.onnx': vaeDecoder(16, 0.08, precision.vae ?? 'float32'),
    'vae_decoder/config.json': json({ latent_channels: 16, scaling_factor: 0.3611, shift_factor: 0.1159, block_out_channels: [8, 8, 8, 8] }),
  };
  for (const [name, text] of Object.entries(t5TokenizerFiles())) files[`tokenizer_2/${name}`] = text;
  return files;
}

/**
 * Every file of one tiny model folder, by relative path. `kind` picks the demo layout (quality:
 * UNet, fast: FLUX-schnell); `options` builds the other families and precisions tests use.
 *
 * @example tinyModelFiles('fast', { variant: 'flux-dev', precision: { denoiser: 'float16' } })
 */
export function tinyModelFiles(kind: ImageModelKind, options: TinyModelOptions = {}): Record<string, string | Uint8Array> {
  const variant = options.variant ?? VARIANT_OF[kind];
  const readme = `# Gantry tiny ${variant} demo model\n\nBuilt locally by Gantry (src/images/tiny-models.ts): random deterministic weights in the\nlayout of a diffusers / Optimum ONNX export. Its images are abstract. It is not Stable\nDiffusion or FLUX. See docs/models.md to serve a real exported model instead.\n`;
  const files: Record<string, string | Uint8Array> = { 'README.md': readme, [MARKER]: tinyMarker(kind, options) };
  for (const [name, text] of Object.entries(clipTokenizerFiles())) files[`tokenizer/${name}`] = text;
  files['text_encoder/model.onnx'] = textEncoder(`tiny-text-encoder-${kind}`, 514, CLIP_LEN, 32, 513, options.precision?.textEncoder ?? 'float32');
  files['text_encoder/config.json'] = json({ hidden_size: 32, max_position_embeddings: CLIP_LEN });
  const family = variant === 'unet' || variant === 'sd-turbo' ? unetFiles(variant, options.precision) : transformerFiles(variant, options.precision);
  return { ...files, ...family };
}

/**
 * Makes sure the tiny model of `kind` exists in `dir` (built there on first start; rebuilt when
 * an older Gantry built it). Returns true when it was (re)built. Written to a temporary folder
 * first and renamed, so a crash never leaves half a model.
 *
 * @example ensureTinyModel('/var/lib/gantry/models/image-quality', 'quality')
 */
export function ensureTinyModel(dir: string, kind: ImageModelKind, options: TinyModelOptions = {}): boolean {
  const marker = join(dir, MARKER);
  const wanted = JSON.parse(tinyMarker(kind, options)) as Record<string, unknown>;
  if (existsSync(marker)) {
    try {
      const found = JSON.parse(readFileSync(marker, 'utf8')) as Record<string, unknown>;
      if (JSON.stringify(found) === JSON.stringify(wanted)) return false;
    } catch {
      // unreadable marker: rebuild
    }
  }
  const tmp = `${dir}.tmp-${process.pid}-${Date.now()}`;
  for (const [path, content] of Object.entries(tinyModelFiles(kind, options))) {
    mkdirSync(dirname(join(tmp, path)), { recursive: true });
    writeFileSync(join(tmp, path), content);
  }
  rmSync(dir, { recursive: true, force: true });
  mkdirSync(dirname(dir), { recursive: true });
  renameSync(tmp, dir);
  return true;
}
