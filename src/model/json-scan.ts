/**
 * The fast path of the JSON threads (util/json-threads.ts) for a large request body: one pass
 * over its bytes that checks the JSON and its depth, finds its top-level fields, and gives the
 * fields named in `raw` (a job's `input`, a result's `output`) back as where their text lies — when
 * that text is already what JSON.stringify would make of them, so the thread need not build
 * the value and serialise it again. For a 19 MB input of small objects that build and
 * serialisation were most of the thread's time and garbage.
 *
 * It vouches only for what it can prove: anything else answers `null` and the caller parses
 * the body as before (JSON.parse, depth walk, JSON.stringify), which also gives the message of
 * an invalid body. `null` for: a body not an object; JSON it cannot accept; nesting past
 * `maxDepth`; in a raw field, any text JSON.stringify would write otherwise — a space between
 * tokens (Python's json.dumps writes `", "`), a number not written as JavaScript writes it
 * (`1.0`, `1e21`, `-0`), an escape JSON.stringify would not write (`\u00e9`, `\/`), a key that is
 * an array index (V8 lists those first), a key twice in one object. Fields not named in `raw`
 * may be written any way: they are parsed.
 *
 * The JSON threads run these functions' source text ({@link jsonScanSource}): they use no
 * imports and no names of this module but each other's.
 *
 * @example
 * scanRawFields(Buffer.from('{"input":{"a":[1,2]}, "webhook": "https://x"}'), ['input'], 100)
 * // { value: { webhook: 'https://x' }, raw: [['input', 9, 20, 'object']] }
 */
export function scanRawFields(bytes: Uint8Array, raw: readonly string[], maxDepth: number): ScannedBody | null {
  const b = Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  const keys: ScanKeys = { at: new Int32Array(64), end: 0, sets: new Map() };
  const result: Record<string, unknown> = {};
  const texts = new Map<string, ScannedBody['raw'][number]>();
  let i = 0;
  while (isJsonSpace(b[i])) i++;
  if (b[i] !== 123 || maxDepth < 1) return null;
  i++;
  while (isJsonSpace(b[i])) i++;
  if (b[i] === 125) i++;
  else {
    for (;;) {
      // A member: its key (parsed: it may have any escape), then its value.
      if (b[i] !== 34) return null;
      const keyStart = i;
      i = stringEnd(b, i, false);
      if (i < 0) return null;
      const name = JSON.parse(b.toString('utf8', keyStart, i)) as string;
      while (isJsonSpace(b[i])) i++;
      if (b[i] !== 58) return null;
      i++;
      while (isJsonSpace(b[i])) i++;
      const start = i;
      const isRaw = raw.includes(name);
      i = scanValue(b, start, 1, maxDepth, isRaw, keys);
      if (i < 0) return null;
      if (isRaw) {
        const first = b[start];
        const kind = first === 123 ? 'object' : first === 91 ? 'array' : first === 34 ? 'string' : first === 116 || first === 102 ? 'boolean' : first === 110 ? 'null' : 'number';
        texts.set(name, [name, start, i, kind]);
        delete result[name];
      } else {
        texts.delete(name);
        Object.defineProperty(result, name, { value: JSON.parse(b.toString('utf8', start, i)), writable: true, enumerable: true, configurable: true });
      }
      while (isJsonSpace(b[i])) i++;
      if (b[i] === 44) {
        i++;
        while (isJsonSpace(b[i])) i++;
        continue;
      }
      if (b[i] !== 125) return null;
      i++;
      break;
    }
  }
  while (isJsonSpace(b[i])) i++;
  return i === b.length ? { value: result, raw: [...texts.values()] } : null;
}

/**
 * A body the scan vouched for: its other fields parsed, and each raw field as [name, start, end,
 * kind]: where its text lies in the body's bytes (the bytes themselves are not checked to be
 * valid UTF-8: the caller does).
 */
export interface ScannedBody {
  value: Record<string, unknown>;
  raw: [string, number, number, 'object' | 'array' | 'string' | 'number' | 'boolean' | 'null'][];
}

/**
 * The keys of the open objects while a raw field is scanned: start and end of each key's bytes
 * in `at` up to `end`; an object past 32 keys checks its keys in a set (by their bytes as
 * latin1), kept in `sets` by where its keys start.
 */
interface ScanKeys {
  at: Int32Array;
  end: number;
  sets: Map<number, Set<string>>;
}

/** The text of the scan's functions, for a thread to run (util/json-threads.ts). */
export function jsonScanSource(): string {
  return [isJsonSpace, stringEnd, numberEnd, countKey, scanKey, scanValue, scanRawFields].map((f) => f.toString()).join('\n');
}

function isJsonSpace(c: number | undefined): boolean {
  return c === 32 || c === 10 || c === 13 || c === 9;
}

/**
 * Steps over one value at `start` (no space before it), inside `depth` containers; returns the
 * index after it, or -1: not JSON, too deep, or (canonical) not as JSON.stringify writes it. One
 * loop over the bytes with a stack of open containers: no recursion, and no strings made but
 * for the keys of an object past 32 keys and a number that is no small integer.
 */
function scanValue(b: Buffer, start: number, depth: number, maxDepth: number, canonical: boolean, keys: ScanKeys): number {
  let i = start;
  // Open containers: 1 object, 2 array; for an object, where its keys start in keys.at.
  const kinds = new Uint8Array(maxDepth + 2);
  const keyBase = new Int32Array(maxDepth + 2);
  let top = 0;
  keys.end = 0;
  keys.sets.clear();
  for (;;) {
    let c = b[i];
    if (c === 123 || c === 91) {
      if (depth + top + 1 > maxDepth) return -1;
      i++;
      if (isJsonSpace(b[i])) {
        if (canonical) return -1;
        while (isJsonSpace(b[i])) i++;
      }
      if (b[i] === (c === 123 ? 125 : 93)) i++;
      else {
        kinds[top] = c === 123 ? 1 : 2;
        keyBase[top] = keys.end;
        top++;
        if (c === 123 && (i = scanKey(b, i, canonical, keyBase[top - 1]!, keys)) < 0) return -1;
        continue;
      }
    } else if (c === 34) i = stringEnd(b, i, canonical);
    else if (c === 116) i = b[i + 1] === 114 && b[i + 2] === 117 && b[i + 3] === 101 ? i + 4 : -1;
    else if (c === 102) i = b[i + 1] === 97 && b[i + 2] === 108 && b[i + 3] === 115 && b[i + 4] === 101 ? i + 5 : -1;
    else if (c === 110) i = b[i + 1] === 117 && b[i + 2] === 108 && b[i + 3] === 108 ? i + 4 : -1;
    else if (c === 45 || (c !== undefined && c >= 48 && c <= 57)) i = numberEnd(b, i, canonical);
    else return -1;
    if (i < 0) return -1;
    // After a value: the next one of its container, or the container's end.
    for (;;) {
      if (top === 0) return i;
      if (isJsonSpace(b[i])) {
        if (canonical) return -1;
        while (isJsonSpace(b[i])) i++;
      }
      c = b[i];
      const object = kinds[top - 1] === 1;
      if (c === 44) {
        i++;
        if (isJsonSpace(b[i])) {
          if (canonical) return -1;
          while (isJsonSpace(b[i])) i++;
        }
        if (object && (i = scanKey(b, i, canonical, keyBase[top - 1]!, keys)) < 0) return -1;
        break;
      }
      if (c !== (object ? 125 : 93)) return -1;
      i++;
      top--;
      if (object) {
        keys.end = keyBase[top]!;
        if (keys.sets.size > 0) keys.sets.delete(keys.end);
      }
    }
  }
}

/** A member's key and colon at i (the key's quote), leaving the index of its value, or -1; canonical: the key is counted (countKey). */
function scanKey(b: Buffer, i: number, canonical: boolean, base: number, keys: ScanKeys): number {
  if (b[i] !== 34) return -1;
  const start = i + 1;
  i = stringEnd(b, i, canonical);
  if (i < 0 || (canonical && !countKey(b, start, i - 1, base, keys))) return -1;
  if (isJsonSpace(b[i])) {
    if (canonical) return -1;
    while (isJsonSpace(b[i])) i++;
  }
  if (b[i] !== 58) return -1;
  i++;
  if (isJsonSpace(b[i])) {
    if (canonical) return -1;
    while (isJsonSpace(b[i])) i++;
  }
  return i;
}

/**
 * Counts the key b[from, to) into the innermost open object, whose keys are keys.at[base,
 * keys.end); false for an array index or a key it has (canonical escapes are unique, so equal
 * keys are equal bytes).
 */
function countKey(b: Buffer, from: number, to: number, base: number, keys: ScanKeys): boolean {
  const first = b[from]!;
  if (first >= 48 && first <= 57 && to - from <= 10) {
    let digits = true;
    for (let k = from; k < to && digits; k++) digits = b[k]! >= 48 && b[k]! <= 57;
    if (digits && (to - from === 1 || first !== 48) && Number(b.toString('latin1', from, to)) < 4294967295) return false;
  }
  let at = keys.at;
  if (keys.end - base >= 64) {
    let set = keys.sets.get(base);
    if (!set) keys.sets.set(base, (set = new Set()));
    for (let k = base + set.size * 2; k < keys.end; k += 2) set.add(b.toString('latin1', at[k], at[k + 1]));
    const name = b.toString('latin1', from, to);
    if (set.has(name)) return false;
  } else {
    for (let k = base; k < keys.end; k += 2) {
      const s = at[k]!;
      if (at[k + 1]! - s !== to - from) continue;
      let same = true;
      for (let m = 0; m < to - from && same; m++) same = b[s + m] === b[from + m];
      if (same) return false;
    }
  }
  if (keys.end + 2 > at.length) {
    const grown = new Int32Array(at.length * 2);
    grown.set(at);
    keys.at = at = grown;
  }
  at[keys.end] = from;
  at[keys.end + 1] = to;
  keys.end += 2;
  return true;
}

/**
 * The index after the string whose opening quote is at i, or -1 if it is not JSON or
 * (canonical) has an escape JSON.stringify would not write (it writes \" \\ \b \f \n \r \t,
 * and \u00XX in lower case for the other control characters).
 */
function stringEnd(b: Buffer, i: number, canonical: boolean): number {
  const n = b.length;
  i++;
  for (;;) {
    let c = 0;
    while (i < n && (c = b[i]!) >= 32 && c !== 34 && c !== 92) i++;
    if (i >= n || c < 32) return -1;
    if (c === 34) return i + 1;
    const e = b[i + 1];
    if (e === 34 || e === 92 || e === 98 || e === 102 || e === 110 || e === 114 || e === 116 || (e === 47 && !canonical)) i += 2;
    else if (e !== 117) return -1;
    else if (canonical) {
      const d = b[i + 4]!;
      const x = b[i + 5]!;
      const low = x >= 48 && x <= 57 ? x - 48 : x >= 97 && x <= 102 ? x - 87 : -1;
      const code = (d === 49 ? 16 : 0) + low;
      if (b[i + 2] !== 48 || b[i + 3] !== 48 || (d !== 48 && d !== 49) || low < 0 || code === 8 || code === 9 || code === 10 || code === 12 || code === 13) return -1;
      i += 6;
    } else {
      for (let k = 2; k < 6; k++) {
        const h = b[i + k];
        if (h === undefined || !((h >= 48 && h <= 57) || (h >= 97 && h <= 102) || (h >= 65 && h <= 70))) return -1;
      }
      i += 6;
    }
  }
}

/** The index after the number at i, or -1 if it is not JSON or (canonical) not as JavaScript writes it. */
function numberEnd(b: Buffer, i: number, canonical: boolean): number {
  const start = i;
  if (b[i] === 45) i++;
  if (b[i] === 48) i++;
  else if (b[i]! >= 49 && b[i]! <= 57) while (b[i]! >= 48 && b[i]! <= 57) i++;
  else return -1;
  let plain = true;
  if (b[i] === 46) {
    plain = false;
    i++;
    if (!(b[i]! >= 48 && b[i]! <= 57)) return -1;
    while (b[i]! >= 48 && b[i]! <= 57) i++;
  }
  if (b[i] === 101 || b[i] === 69) {
    plain = false;
    i++;
    if (b[i] === 43 || b[i] === 45) i++;
    if (!(b[i]! >= 48 && b[i]! <= 57)) return -1;
    while (b[i]! >= 48 && b[i]! <= 57) i++;
  }
  if (!canonical) return i;
  // Integers of up to 15 digits are exact doubles and written back as they are; -0 is written 0.
  if (plain && i - start - (b[start] === 45 ? 1 : 0) <= 15) return b[start] === 45 && b[start + 1] === 48 ? -1 : i;
  const text = b.toString('latin1', start, i);
  return String(Number(text)) === text ? i : -1;
}
