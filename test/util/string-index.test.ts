// util/string-index.ts (the allocator's reused id table) and util/heap.ts with items that keep
// their own place: checked against a Map and a sorted array on random inputs.
import { describe, expect, it } from 'vitest';
import { Heap } from '../../src/util/heap.js';
import { StringIndex } from '../../src/util/string-index.js';
import { seededRandom as rng } from '../../src/util/seeded-random.js';

describe('StringIndex', () => {
  it('answers as a Map would, use after use, and forgets everything between uses', () => {
    const ix = new StringIndex();
    const r = rng(1);
    for (const size of [5, 300, 40, 2000, 3]) {
      ix.reset(size);
      const map = new Map<string, number>();
      for (let i = 0; i < size; i++) {
        // Repeats on purpose: a second set replaces the number, as Map.set does.
        const key = `w-${Math.floor(r() * size * 0.8)}`;
        expect(ix.set(key, i)).toBe(true);
        map.set(key, i);
      }
      for (let i = 0; i < size; i++) expect(ix.get(`w-${i}`)).toBe(map.get(`w-${i}`) ?? -1);
      ix.clear();
      expect(ix.get(map.keys().next().value!)).toBe(-1);
    }
  });

  it('finds every key when many share their ends (it moves to whole-key hashes midway), use after use', () => {
    const ix = new StringIndex();
    for (let use = 0; use < 2; use++) {
      ix.reset(3000);
      // Same length, same end: one hash for all while the tail alone is hashed.
      const keys = Array.from({ length: 3000 }, (_, i) => `${String(i).padStart(4, '0')}-same-tail`);
      keys.forEach((key, i) => expect(ix.set(key, i + use)).toBe(true));
      keys.forEach((key, i) => expect(ix.get(key)).toBe(i + use));
      expect(ix.get('9999-same-tail')).toBe(-1);
    }
  });

  it('refuses a string past what reset made room for, rather than growing', () => {
    const ix = new StringIndex();
    ix.reset(2);
    const accepted = Array.from({ length: 20 }, (_, i) => ix.set(`k${i}`, i)).filter(Boolean).length;
    expect(accepted).toBe(8); // a table of 16, half of it usable
    expect(ix.get('k7')).toBe(7);
    expect(ix.get('k8')).toBe(-1);
  });
});

describe('Heap with items that keep their place', () => {
  it('pops in order after updates found through the place', () => {
    const r = rng(2);
    interface Item {
      key: number;
      at: number;
    }
    const heap = new Heap<Item>((a, b) => a.key < b.key, { get: (x) => x.at, set: (x, i) => void (x.at = i) });
    const items: Item[] = Array.from({ length: 200 }, () => ({ key: Math.floor(r() * 1000), at: -1 }));
    for (const x of items) heap.push(x);
    for (let n = 0; n < 300; n++) {
      const x = items[Math.floor(r() * items.length)]!;
      x.key = Math.floor(r() * 1000);
      heap.update(x);
    }
    const out: number[] = [];
    for (let x = heap.pop(); x !== undefined; x = heap.pop()) {
      expect(x.at).toBe(-1);
      out.push(x.key);
    }
    expect(out).toEqual(items.map((x) => x.key).sort((a, b) => a - b));
  });
});
