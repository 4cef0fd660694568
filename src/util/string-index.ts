/**
 * Numbers for strings, in a table that is reused: an open-addressing hash table in typed
 * arrays, cleared (not reallocated) between uses. The allocator matches every worker id of a
 * decision to its endpoint; a `Map` of 10,000 ids made each pass was ~0.9 MB of garbage, and
 * collecting it (with the pass's fresh input beside it) was most of a decision's time.
 *
 * Bounded: the arrays grow to twice the most ids one use has held (power of two), and are cut
 * back when a use needs a sixteenth of them; `clear` drops every string held.
 *
 * The hash reads a key's last TAIL characters and its length: the allocator's worker ids end in
 * eight random hex digits (`<endpoint>-<hex>`), and reading every character of each (a cons
 * string, each character read through it) was ~9 M instructions a decision at 10,000 GPUs (the
 * last 8: 4 M less, the last 4: 3 M less again). Keys that share their ends would share a hash:
 * once a probe runs past LONG_PROBE slots, the table
 * hashes every character for good (rehashing what it holds), so such keys cost what they did.
 *
 * @example
 * const ix = new StringIndex(); ix.set('w-1', 7); ix.get('w-1'); // 7
 * ix.get('w-2'); // -1
 * ix.clear();
 */
export class StringIndex {
  private keys: (string | undefined)[] = [];
  private values = new Int32Array(0);
  /** The slots in use, for clear (so a clear costs what was set, not the table's size). */
  private used = new Int32Array(0);
  private size = 0;
  private mask = -1;
  /** Most strings one use may hold (half the table: the probes stay short). */
  private limit = 0;
  /** Hashing every character (since a long probe), not the tail. */
  private whole = false;

  /** Makes room for `count` strings and forgets any held (call before a use). */
  reset(count: number): void {
    this.clear();
    let cap = 16;
    while (cap < 2 * count) cap *= 2;
    if (cap > this.keys.length || cap * 16 <= this.keys.length) {
      this.keys = new Array<string | undefined>(cap).fill(undefined);
      this.values = new Int32Array(cap);
      this.used = new Int32Array(cap);
      this.mask = cap - 1;
    }
    this.limit = cap >> 1;
  }

  /** Sets `key`'s number (a number ≥ 0), replacing any; false when the table is full (reset with more). */
  set(key: string, value: number): boolean {
    let i = hash(key, this.whole) & this.mask;
    for (let probes = 0; ; probes++) {
      const k = this.keys[i];
      if (k === undefined) break;
      if (k === key) {
        this.values[i] = value;
        return true;
      }
      if (probes === LONG_PROBE && !this.whole) {
        this.hashWhole();
        return this.set(key, value);
      }
      i = (i + 1) & this.mask;
    }
    if (this.size >= this.limit) return false;
    this.keys[i] = key;
    this.values[i] = value;
    this.used[this.size++] = i;
    return true;
  }

  /** `key`'s number, or -1. */
  get(key: string): number {
    if (this.size === 0) return -1;
    let i = hash(key, this.whole) & this.mask;
    for (;;) {
      const k = this.keys[i];
      if (k === undefined) return -1;
      if (k === key) return this.values[i]!;
      i = (i + 1) & this.mask;
    }
  }

  /** Forgets every string (the table keeps its size). */
  clear(): void {
    for (let n = 0; n < this.size; n++) this.keys[this.used[n]!] = undefined;
    this.size = 0;
  }

  /** From now on hashes every character: the strings held are set again under their whole hash. */
  private hashWhole(): void {
    const held: [string, number][] = [];
    for (let n = 0; n < this.size; n++) held.push([this.keys[this.used[n]!]!, this.values[this.used[n]!]!]);
    this.clear();
    this.whole = true;
    for (const [key, value] of held) this.set(key, value);
  }
}

/** Characters of a key's end that the hash reads (see the top). */
const TAIL = 4;
/** A probe this long means keys that share their tails: the table hashes whole keys from then on. */
const LONG_PROBE = 32;

/** FNV-1a over the UTF-16 code units of the key's last TAIL (or all), and its length. */
function hash(s: string, whole: boolean): number {
  let h = Math.imul(0x811c9dc5 ^ s.length, 0x01000193);
  for (let i = whole ? 0 : Math.max(0, s.length - TAIL); i < s.length; i++) h = Math.imul(h ^ s.charCodeAt(i), 0x01000193);
  return h >>> 0;
}
