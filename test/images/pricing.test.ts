import { describe, expect, it } from 'vitest';
import { formatUsd, megapixels, usdNumber } from '../../src/model/money.js';
import { imageCostUnits } from '../../src/images/pricing.js';

describe('image pricing', () => {
  it('computes cost exactly to the 10th decimal for several sizes', () => {
    const cases: [string, number, number, string][] = [
      ['quality', 1536, 256, '0.00786432'], // floats give 0.0078643201
      ['quality', 1024, 1024, '0.02097152'],
      ['quality', 512, 512, '0.00524288'],
      ['quality', 256, 256, '0.00131072'],
      ['quality', 1536, 1536, '0.04718592'],
      ['quality', 320, 1472, '0.0094208'],
      ['fast', 1024, 1024, '0.0025165824'],
      ['fast', 512, 512, '0.0006291456'],
      ['fast', 1536, 256, '0.0009437184'],
      ['fast', 256, 256, '0.0001572864'],
      ['fast', 1536, 1536, '0.0056623104'],
    ];
    for (const [kind, w, h, expected] of cases) {
      const units = imageCostUnits(kind as 'quality' | 'fast', w, h);
      expect(formatUsd(units), `${kind} ${w}×${h}`).toBe(expected);
      expect(usdNumber(units)).toBe(Number(expected));
      expect(JSON.stringify(usdNumber(units))).toBe(expected);
    }
  });

  it('prices every pixel in whole 1e-10 USD units, so the upward rounding never inflates a cost', () => {
    // 0.02 USD / 1e6 px = 200 units a pixel; 0.0024 USD / 1e6 px = 24 units a pixel.
    expect(imageCostUnits('quality', 1, 1)).toBe(200n);
    expect(imageCostUnits('fast', 1, 1)).toBe(24n);
    expect(imageCostUnits('fast', 0, 100)).toBe(0n);
  });

  it('formats units and megapixels without float noise', () => {
    expect(formatUsd(0n)).toBe('0');
    expect(formatUsd(10_000_000_000n)).toBe('1');
    expect(formatUsd(12_345_678_901n)).toBe('1.2345678901');
    expect(megapixels(1536, 256)).toBe(0.393216);
    expect(megapixels(1024, 1024)).toBe(1.048576);
    expect(() => imageCostUnits('quality', 1.5, 2)).toThrow(RangeError);
  });
});
