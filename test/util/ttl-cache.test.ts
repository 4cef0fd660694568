// Issue 22 item 7: caches keyed by what requests send are bounded in bytes as well as in
// entries: long keys fill a cache's byte bound before its entry bound.
import { describe, expect, it } from 'vitest';
import { TtlCache } from '../../src/util/ttl-cache.js';

describe('TtlCache', () => {
  it('drops the oldest entries past its byte bound, and keeps the count of bytes it holds', () => {
    const cache = new TtlCache<string, number>({ ttlMs: 60_000, maxEntries: 1_000, maxBytes: 10_000 });
    for (let i = 0; i < 100; i++) cache.set(`${i}-`.padEnd(1_000, 'x'), i, 0);
    // Each entry: 2 × 1,000 + 96 bytes by the estimate, so 4 fit in 10,000.
    expect(cache.size).toBe(4);
    expect(cache.bytes).toBe(4 * 2_096);
    expect(cache.get('99-'.padEnd(1_000, 'x'), 1)?.value).toBe(99);
    expect(cache.get('0-'.padEnd(1_000, 'x'), 1)).toBeUndefined();
    cache.delete('99-'.padEnd(1_000, 'x'));
    expect(cache.bytes).toBe(3 * 2_096);
    // An entry larger than the whole bound is not kept at all.
    cache.set('big'.padEnd(6_000, 'x'), 1, 2);
    expect(cache.get('big'.padEnd(6_000, 'x'), 2)).toBeUndefined();
    expect(cache.size).toBe(3);
    cache.clear();
    expect(cache.bytes).toBe(0);
  });

  it('keeps its entry bound and lifetime', () => {
    const cache = new TtlCache<string, number>({ ttlMs: 100, maxEntries: 3 });
    for (let i = 0; i < 5; i++) cache.set(`k${i}`, i, 0);
    expect(cache.size).toBe(3);
    expect(cache.get('k1', 50)).toBeUndefined();
    expect(cache.get('k4', 50)?.value).toBe(4);
    expect(cache.get('k4', 100)).toBeUndefined();
  });
});
