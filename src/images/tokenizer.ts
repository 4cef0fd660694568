import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { Tokenizer } from '@huggingface/tokenizers';
import { cleanClipText } from './clip-text.js';
import { compileCharsMap, type CharsMap } from './precompiled-normalizer.js';

/**
 * Prompt tokenization from a diffusers `tokenizer/` folder: `tokenizer.json` (fast tokenizers:
 * CLIP, T5) or the slow CLIP files `vocab.json` + `merges.txt` (what Stable Diffusion exports
 * carry), turned into the equivalent tokenizer.json. Pure JS, no downloads. Two steps are
 * Gantry's own, so a model sees the ids it was trained on (docs/models.md, "Tokens"): T5's
 * SentencePiece character map (precompiled-normalizer.ts) instead of the library's NFKC
 * approximation, and CLIP's ftfy clean-up (clip-text.ts).
 */
export interface PromptTokenizer {
  /** Sequence length every prompt is padded or truncated to. */
  readonly maxLength: number;
  /** The id padding uses (special_tokens_map.json, else tokenizer_config.json, else EOS). */
  readonly padId: number;
  /** Token ids with the model's special tokens, truncated and padded to maxLength. */
  encode(text: string): number[];
}

interface TokenizerConfigFile {
  model_max_length?: number;
  pad_token?: string | { content: string };
  bos_token?: string | { content: string };
  eos_token?: string | { content: string };
  unk_token?: string | { content: string };
  [key: string]: unknown;
}

function readJson<T>(file: string): T {
  return JSON.parse(readFileSync(file, 'utf8')) as T;
}

/**
 * The special tokens as transformers resolves them: special_tokens_map.json wins over
 * tokenizer_config.json (SD 2.x pads with "!" there while its config names <|endoftext|>).
 */
function readTokenConfig(dir: string): TokenizerConfigFile {
  const configFile = join(dir, 'tokenizer_config.json');
  const mapFile = join(dir, 'special_tokens_map.json');
  const config: TokenizerConfigFile = existsSync(configFile) ? readJson(configFile) : {};
  const specials: TokenizerConfigFile = existsSync(mapFile) ? readJson(mapFile) : {};
  for (const key of ['pad_token', 'bos_token', 'eos_token', 'unk_token'] as const) {
    if (specials[key] !== undefined && specials[key] !== null) config[key] = specials[key];
  }
  return config;
}

/**
 * Takes a leading `Precompiled` normaliser out of a tokenizer.json, to be applied by
 * precompiled-normalizer.ts instead of the library's NFKC approximation.
 */
function extractCharsMap(json: Record<string, unknown>): CharsMap | null {
  const normalizer = json.normalizer as { type?: string; precompiled_charsmap?: string; normalizers?: { type?: string; precompiled_charsmap?: string }[] } | null | undefined;
  if (!normalizer) return null;
  if (normalizer.type === 'Precompiled' && normalizer.precompiled_charsmap) {
    json.normalizer = null;
    return compileCharsMap(normalizer.precompiled_charsmap);
  }
  const first = normalizer.type === 'Sequence' ? normalizer.normalizers?.[0] : undefined;
  if (first?.type === 'Precompiled' && first.precompiled_charsmap) {
    json.normalizer = { ...normalizer, normalizers: normalizer.normalizers!.slice(1) };
    return compileCharsMap(first.precompiled_charsmap);
  }
  return null;
}

/** Sequence lengths of one tokenizer folder. */
export interface TokenizerLengths {
  /** Used when tokenizer_config.json names no model_max_length (CLIP: 77). */
  fallback?: number;
  /** Longest length taken from the config. */
  cap?: number;
  /** Pad and truncate to exactly this length whatever the config says (FLUX's max_sequence_length for T5). */
  fixed?: number;
}

function tokenText(token: TokenizerConfigFile['pad_token']): string | undefined {
  return typeof token === 'string' ? token : token?.content;
}

/** The CLIP tokenizer.json that transformers' converter produces from vocab.json + merges.txt. */
function clipTokenizerJson(vocab: Record<string, number>, mergesText: string, config: TokenizerConfigFile): object {
  const merges = mergesText
    .split('\n')
    .filter((line, i) => line.trim() !== '' && !(i === 0 && line.startsWith('#version')));
  const bos = tokenText(config.bos_token) ?? '<|startoftext|>';
  const eos = tokenText(config.eos_token) ?? '<|endoftext|>';
  const special = [bos, eos].filter((t) => vocab[t] !== undefined);
  return {
    version: '1.0',
    added_tokens: special.map((content) => ({ id: vocab[content], content, single_word: false, lstrip: false, rstrip: false, normalized: true, special: true })),
    normalizer: {
      type: 'Sequence',
      normalizers: [{ type: 'NFC' }, { type: 'Replace', pattern: { Regex: '\\s+' }, content: ' ' }, { type: 'Lowercase' }],
    },
    pre_tokenizer: {
      type: 'Sequence',
      pretokenizers: [
        {
          type: 'Split',
          pattern: { Regex: "<\\|startoftext\\|>|<\\|endoftext\\|>|'s|'t|'re|'ve|'m|'ll|'d|[\\p{L}]+|[\\p{N}]|[^\\s\\p{L}\\p{N}]+" },
          behavior: 'Removed',
          invert: true,
        },
        { type: 'ByteLevel', add_prefix_space: false, trim_offsets: true, use_regex: false },
      ],
    },
    post_processor: {
      type: 'RobertaProcessing',
      sep: [eos, vocab[eos] ?? 0],
      cls: [bos, vocab[bos] ?? 0],
      trim_offsets: false,
      add_prefix_space: false,
    },
    decoder: { type: 'ByteLevel', add_prefix_space: true, trim_offsets: true, use_regex: true },
    model: {
      type: 'BPE',
      dropout: null,
      unk_token: eos,
      continuing_subword_prefix: '',
      end_of_word_suffix: '</w>',
      fuse_unk: false,
      byte_fallback: false,
      vocab,
      merges,
    },
  };
}

/**
 * Loads the tokenizer of one folder. The length every prompt is padded or truncated to is
 * `lengths.fixed`, else tokenizer_config.json's model_max_length (at most `cap`, default 512),
 * else `fallback` (default 77).
 *
 * @example const tok = loadPromptTokenizer('models/sd-turbo/tokenizer'); tok.encode('a cat').length === 77
 */
export function loadPromptTokenizer(dir: string, lengths: TokenizerLengths = {}): PromptTokenizer {
  const config = readTokenConfig(dir);
  let json: Record<string, unknown>;
  if (existsSync(join(dir, 'tokenizer.json'))) {
    json = readJson(join(dir, 'tokenizer.json'));
  } else if (existsSync(join(dir, 'vocab.json')) && existsSync(join(dir, 'merges.txt'))) {
    json = clipTokenizerJson(readJson(join(dir, 'vocab.json')), readFileSync(join(dir, 'merges.txt'), 'utf8'), config) as Record<string, unknown>;
  } else {
    throw new Error(`no tokenizer in ${dir}: expected tokenizer.json, or vocab.json and merges.txt`);
  }
  const charsMap = extractCharsMap(json);
  // CLIP's BPE (words end in </w>): its tokenizer cleans the text first (clip-text.ts).
  const clip = (json.model as { end_of_word_suffix?: string } | undefined)?.end_of_word_suffix === '</w>';
  const prepare = (text: string): string => (charsMap ? charsMap.normalize(text) : clip ? cleanClipText(text) : text);
  const tokenizer = new Tokenizer(json, config);
  const configured = typeof config.model_max_length === 'number' && config.model_max_length < 1e6 ? config.model_max_length : (lengths.fallback ?? 77);
  const maxLength = lengths.fixed ?? Math.min(configured, lengths.cap ?? 512);
  const padText = tokenText(config.pad_token) ?? tokenText(config.eos_token);
  const padId = (padText === undefined ? undefined : tokenizer.token_to_id(padText)) ?? 0;

  return {
    maxLength,
    padId,
    encode(text) {
      const ids = tokenizer.encode(prepare(text)).ids;
      if (ids.length > maxLength) {
        // Keep the closing special token (EOS) that the post-processor appended.
        const last = ids[ids.length - 1]!;
        ids.length = maxLength;
        ids[maxLength - 1] = last;
      }
      while (ids.length < maxLength) ids.push(padId);
      return ids;
    },
  };
}
