import { describe, expect, it } from 'vitest';
import { uuidv7 } from '../../src/jobs/job-ids.js';

describe('uuidv7', () => {
  it('is a version-7, variant-1 UUID carrying the millisecond timestamp', () => {
    const id = uuidv7(0x0190_1234_5678);
    expect(id).toMatch(/^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/);
    expect(id.replace(/-/g, '').slice(0, 12)).toBe('019012345678');
  });

  it('sorts in creation order, within one millisecond too, and never repeats', () => {
    const ids = Array.from({ length: 10_000 }, () => uuidv7(1_800_000_000_000));
    expect([...ids].sort()).toEqual(ids);
    expect(new Set(ids).size).toBe(ids.length);
  });
});
