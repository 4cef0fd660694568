// Issue 25, item 4: the console shows times in the unit a person reads them in (a 600,000 ms
// execution timeout is "10 min", not "600.00 s"). ms() is the console's one duration formatter.
import { describe, expect, it } from 'vitest';

// The console's UI is plain JavaScript without declarations: imported by a path TypeScript does not resolve.
const UI_COMMON: string = '../../src/console/ui/common.js';
const { ms } = (await import(UI_COMMON)) as { ms(value: number | null): string };

describe("the console's durations", () => {
  it('reads in ms, s, min, h and days as the value grows', () => {
    expect(ms(null)).toBe('—');
    expect(ms(0)).toBe('0 ms');
    expect(ms(850)).toBe('850 ms');
    expect(ms(2_500)).toBe('2.5 s');
    expect(ms(1_234)).toBe('1.23 s');
    expect(ms(42_370)).toBe('42.4 s');
    expect(ms(60_000)).toBe('1 min');
    expect(ms(90_000)).toBe('1 min 30 s');
    expect(ms(600_000)).toBe('10 min');
    expect(ms(3_600_000)).toBe('1 h');
    expect(ms(7_500_000)).toBe('2 h 5 min');
    expect(ms(86_400_000)).toBe('1 day');
    expect(ms(7 * 86_400_000)).toBe('7 days');
    expect(ms(7 * 86_400_000 + 3 * 3_600_000)).toBe('7 days 3 h');
  });
});
