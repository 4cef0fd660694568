/**
 * A bounded cache with a lifetime per entry: at most `maxEntries` are kept, and at most
 * `maxBytes` by the estimate `sizeOf` gives (the oldest inserted go first), and an entry older
 * than `ttlMs` is a miss. Every cache keyed by what a request names (endpoint ids, API keys,
 * webhook hosts) uses one, so a client sending random or long names cannot grow the gateway's memory.
 *
 * @example
 * const cache = new TtlCache<string, number>({ ttlMs: 2_000, maxEntries: 1_000, maxBytes: 100_000 });
 * cache.set('a', 1, Date.now()); cache.get('a', Date.now()); // 1
 */
export class TtlCache<K, V> {
  private readonly entries = new Map<K, { value: V; at: number; bytes: number }>();
  private readonly ttlMs: number;
  private readonly maxEntries: number;
  private readonly maxBytes: number;
  private readonly sizeOf: (key: K, value: V) => number;
  private held = 0;

  constructor(options: { ttlMs: number; maxEntries: number; maxBytes?: number; sizeOf?: (key: K, value: V) => number }) {
    this.ttlMs = options.ttlMs;
    this.maxEntries = options.maxEntries;
    this.maxBytes = options.maxBytes ?? Infinity;
    this.sizeOf = options.sizeOf ?? keySize;
  }

  /** The value cached for `key` if it was set less than ttlMs before `now`. */
  get(key: K, now: number): { value: V } | undefined {
    const hit = this.entries.get(key);
    if (hit === undefined) return undefined;
    if (now - hit.at >= this.ttlMs) {
      this.delete(key);
      return undefined;
    }
    return hit;
  }

  set(key: K, value: V, now: number): void {
    // Re-inserted, so the Map's order stays the order of the last writes.
    this.delete(key);
    const bytes = this.sizeOf(key, value);
    if (bytes > this.maxBytes) return;
    for (const oldest of this.entries.keys()) {
      if (this.entries.size < this.maxEntries && this.held + bytes <= this.maxBytes) break;
      this.delete(oldest);
    }
    this.entries.set(key, { value, at: now, bytes });
    this.held += bytes;
  }

  delete(key: K): void {
    const entry = this.entries.get(key);
    if (entry === undefined) return;
    this.entries.delete(key);
    this.held -= entry.bytes;
  }

  clear(): void {
    this.entries.clear();
    this.held = 0;
  }

  get size(): number {
    return this.entries.size;
  }

  /** Bytes the entries take by the cache's estimate. */
  get bytes(): number {
    return this.held;
  }
}

/** The default estimate: a string key's UTF-16 bytes plus 96 for the entry's objects; other keys 96. */
function keySize(key: unknown): number {
  return (typeof key === 'string' ? 2 * key.length : 0) + 96;
}
