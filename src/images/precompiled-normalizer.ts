/**
 * SentencePiece's precompiled character map normaliser (T5's `nmt_nfkc`), as the `Precompiled`
 * normaliser of a tokenizer.json carries it. @huggingface/tokenizers (JS) approximates it with
 * Unicode NFKC, which differs from the map T5 was trained with (docs/models.md, "Tokens").
 *
 * The map is a Darts double-array trie over UTF-8 bytes whose values index a blob of
 * NUL-terminated replacement strings: base64( u32le trieBytes | trie units | strings ).
 * Normalisation walks the input: at each position the longest byte sequence that is a key is
 * replaced by its string; where none is, one character is copied unchanged. This is what
 * SentencePiece's C++ normaliser does.
 */

/** A compiled precompiled_charsmap. */
export interface CharsMap {
  normalize(text: string): string;
}

const encoder = new TextEncoder();
const decoder = new TextDecoder();

/**
 * Compiles the base64 `precompiled_charsmap` of a tokenizer.json (or the raw bytes of a
 * SentencePiece model's normalizer_spec.precompiled_charsmap).
 *
 * @example compileCharsMap(tokenizerJson.normalizer.precompiled_charsmap).normalize('ｆｕｌｌ\u3000ｗｉｄｔｈ') === 'full width'
 */
export function compileCharsMap(charsmap: string | Uint8Array): CharsMap {
  const bytes = typeof charsmap === 'string' ? Uint8Array.from(Buffer.from(charsmap, 'base64')) : charsmap;
  if (bytes.length < 4) throw new Error('precompiled_charsmap is too short');
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  const trieBytes = view.getUint32(0, true);
  if (trieBytes % 4 !== 0 || 4 + trieBytes > bytes.length) throw new Error('precompiled_charsmap has a malformed trie size');
  const units = new Uint32Array(trieBytes / 4);
  for (let i = 0; i < units.length; i++) units[i] = view.getUint32(4 + i * 4, true);
  const strings = bytes.subarray(4 + trieBytes);

  const offset = (unit: number): number => (unit >>> 10) << ((unit & (1 << 9)) >>> 6);
  const label = (unit: number): number => unit & ((1 << 31) | 0xff);
  const hasLeaf = (unit: number): boolean => ((unit >>> 8) & 1) === 1;
  const value = (unit: number): number => unit & 0x7fffffff;

  /** Longest key that prefixes input[from..]: [length, value] or null. */
  function longestMatch(input: Uint8Array, from: number): [number, number] | null {
    let node = offset(units[0]!);
    let found: [number, number] | null = null;
    for (let i = from; i < input.length; i++) {
      const c = input[i]!;
      if (c === 0) break;
      node ^= c;
      const unit = units[node];
      if (unit === undefined || label(unit) >>> 0 !== c) break;
      node ^= offset(unit);
      if (hasLeaf(unit)) found = [i - from + 1, value(units[node]!)];
    }
    return found;
  }

  function replacement(index: number): Uint8Array {
    let end = index;
    while (end < strings.length && strings[end] !== 0) end++;
    return strings.subarray(index, end);
  }

  return {
    normalize(text) {
      const input = encoder.encode(text);
      const out: number[] = [];
      let pos = 0;
      while (pos < input.length) {
        const match = longestMatch(input, pos);
        if (match) {
          for (const b of replacement(match[1])) out.push(b);
          pos += match[0];
          continue;
        }
        const length = utf8Length(input[pos]!);
        for (let k = 0; k < length && pos < input.length; k++) out.push(input[pos++]!);
      }
      return decoder.decode(Uint8Array.from(out));
    },
  };
}

function utf8Length(lead: number): number {
  if (lead < 0x80) return 1;
  if (lead >= 0xf0) return 4;
  if (lead >= 0xe0) return 3;
  if (lead >= 0xc0) return 2;
  return 1;
}
