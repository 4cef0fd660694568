/**
 * Numbers for strings, in a table that is reused: an open-addressing hash table in typed
 * arrays, cleared (not reallocated) between uses. The allocator matches every worker id of a
 * decision to its endpoint; a `Map` of 10,000 ids made each pass was ~0.9 MB of garbage, and
 * collecting it (with the pass's fresh input beside it) was most of a decision's time.
 *
 * Bounded: the arrays grow to twice the most ids one use has held (power of two), and are cut
 * back when a use needs a sixteenth of them; `clear` drops every string held.
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
    let i = hash(key) & this.mask;
    for (;;) {
      const k = this.keys[i];
      if (k === undefined) break;
      if (k === key) {
        this.values[i] = value;
        return true;
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
    let i = hash(key) & this.mask;
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
}

/** FNV-1a over the UTF-16 code units. */
function hash(s: string): number {
  let h = 0x811c9dc5;
  for (let i = 0; i < s.length; i++) h = Math.imul(h ^ s.charCodeAt(i), 0x01000193);
  return h >>> 0;
}
