/**
 * Prices of the public image endpoints, computed exactly (docs/api.md, Usage): money is an integer
 * count of 1e-10 USD ("units"), so `width × height / 1e6 × price` rounded up after the 10th
 * decimal never meets a binary fraction (in floats 1536×256 on the quality model gives
 * 0.0078643201 instead of 0.00786432).
 */
import type { ImageModelKind } from '../config/image-config.js';

/** Price per megapixel in units of 1e-10 USD (spec, "Pricing rules"): 0.02 and 0.0024 USD. */
export const PRICE_UNITS_PER_MEGAPIXEL: Record<ImageModelKind, bigint> = {
  quality: 200_000_000n,
  fast: 24_000_000n,
};

/**
 * Cost of one image in units of 1e-10 USD: ceil(width × height × price / 1e6).
 *
 * @example imageCostUnits('quality', 1536, 256) === 78_643_200n // 0.00786432 USD
 */
export function imageCostUnits(kind: ImageModelKind, width: number, height: number): bigint {
  if (!Number.isSafeInteger(width) || !Number.isSafeInteger(height) || width < 0 || height < 0) {
    throw new RangeError(`image size must be non-negative integers, got ${width}×${height}`);
  }
  const numerator = BigInt(width) * BigInt(height) * PRICE_UNITS_PER_MEGAPIXEL[kind];
  return (numerator + 999_999n) / 1_000_000n;
}

