/**
 * A bounded cache with a lifetime per entry: at most `maxEntries` are kept (the oldest inserted
 * goes first), and an entry older than `ttlMs` is a miss. Every cache keyed by what a request
 * names (endpoint ids, API keys) uses one, so a client sending random names cannot grow the
 * gateway's memory.
 *
 * @example
 * const cache = new TtlCache<string, number>({ ttlMs: 2_000, maxEntries: 1_000 });
 * cache.set('a', 1, Date.now()); cache.get('a', Date.now()); // 1
 */
export class TtlCache<K, V> {
  private readonly entries = new Map<K, { value: V; at: number }>();
  private readonly ttlMs: number;
  private readonly maxEntries: number;

  constructor(options: { ttlMs: number; maxEntries: number }) {
    this.ttlMs = options.ttlMs;
    this.maxEntries = options.maxEntries;
  }

  /** The value cached for `key` if it was set less than ttlMs before `now`. */
  get(key: K, now: number): { value: V } | undefined {
    const hit = this.entries.get(key);
    if (hit === undefined) return undefined;
    if (now - hit.at >= this.ttlMs) {
      this.entries.delete(key);
      return undefined;
    }
    return hit;
  }

  set(key: K, value: V, now: number): void {
    // Re-inserted, so the Map's order stays the order of the last writes.
    this.entries.delete(key);
    if (this.entries.size >= this.maxEntries) {
      const oldest = this.entries.keys().next();
      if (!oldest.done) this.entries.delete(oldest.value);
    }
    this.entries.set(key, { value, at: now });
  }

  delete(key: K): void {
    this.entries.delete(key);
  }

  clear(): void {
    this.entries.clear();
  }

  get size(): number {
    return this.entries.size;
  }
}
