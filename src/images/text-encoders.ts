import type { TextEncoderPlacement } from '../config/image-config.js';
import type { ModelFolder } from './model-folder.js';
import { feed, openGraph, tensorToFloat32, type OpenedGraph, type SessionSettings } from './tensors.js';
import { loadPromptTokenizer, type PromptTokenizer } from './tokenizer.js';

/**
 * The prompt encoders of a pipeline (CLIP, and T5 for FLUX) where the placement setting puts
 * them: resident on the worker's device, resident on the CPU, or opened on the device for each
 * request and released after it (offload: one encoder at a time, so the device holds at most
 * the denoiser, the VAE and the largest encoder).
 */

/** Encoder outputs of a batch of prompts: last_hidden_state [B, L, D] and pooler_output [B, D] when present. */
export interface TextConditioning {
  hidden: Float32Array;
  hiddenDims: number[];
  pooled: Float32Array | null;
  pooledDims: number[];
}

interface Encoder {
  name: string;
  file: string;
  tokenizer: PromptTokenizer;
  resident: OpenedGraph | null;
}

/** Both prompt encoders of a pipeline, encoding prompt batches. */
export class PromptEncoders {
  private constructor(
    private readonly encoders: Encoder[],
    private readonly settings: SessionSettings,
  ) {}

  /**
   * Loads the tokenizers and, unless offloaded, the encoder graphs. `t5Length` is the sequence
   * length of the second (T5) encoder: FluxPipeline's max_sequence_length.
   *
   * @example const encoders = await PromptEncoders.load(model, settings, 'cpu', 512);
   */
  static async load(model: ModelFolder, settings: SessionSettings, placement: TextEncoderPlacement, t5Length: number | null): Promise<PromptEncoders> {
    const where: SessionSettings = placement === 'cpu' ? { ...settings, device: { provider: 'cpu', index: 0 } } : settings;
    const encoders: Encoder[] = [{ name: 'text_encoder', file: model.textEncoder, tokenizer: loadPromptTokenizer(model.tokenizer, { fallback: 77 }), resident: null }];
    if (model.textEncoder2 && model.tokenizer2) {
      encoders.push({ name: 'text_encoder_2', file: model.textEncoder2, tokenizer: loadPromptTokenizer(model.tokenizer2, t5Length === null ? { fallback: 512 } : { fixed: t5Length }), resident: null });
    }
    const result = new PromptEncoders(encoders, where);
    if (placement !== 'offload') {
      for (const encoder of encoders) {
        encoder.resident = await openGraph(encoder.file, where);
      }
    }
    return result;
  }

  /** True when the folder has a second (T5) sequence encoder. */
  get hasSequenceEncoder(): boolean {
    return this.encoders.length > 1;
  }

  /** Encodes prompts with the first (CLIP) encoder, or with the second (T5) when `second`. */
  async encode(prompts: string[], second = false): Promise<TextConditioning> {
    const encoder = this.encoders[second ? 1 : 0];
    if (!encoder) throw new Error('this model has no second text encoder');
    const graph = encoder.resident ?? (await openGraph(encoder.file, this.settings));
    try {
      const { session } = graph;
      const ids = prompts.flatMap((p) => encoder.tokenizer.encode(p));
      const result = await session.run({ input_ids: feed(session, 'input_ids', encoder.name, ids, [prompts.length, encoder.tokenizer.maxLength]) });
      const hidden = result.last_hidden_state;
      if (!hidden) throw new Error(`${encoder.name} has no output 'last_hidden_state' (outputs: ${session.outputNames.join(', ')})`);
      const pooledName = result.pooler_output ? 'pooler_output' : 'text_embeds';
      const pooled = result[pooledName];
      return {
        hidden: tensorToFloat32(hidden, encoder.name, 'last_hidden_state'),
        hiddenDims: hidden.dims.map(Number),
        pooled: pooled ? tensorToFloat32(pooled, encoder.name, pooledName) : null,
        pooledDims: pooled ? pooled.dims.map(Number) : [],
      };
    } finally {
      if (!encoder.resident) await graph.session.release();
    }
  }

  /** Releases the resident encoder sessions. */
  async release(): Promise<void> {
    await Promise.all(this.encoders.map((e) => e.resident?.session.release()));
  }
}
