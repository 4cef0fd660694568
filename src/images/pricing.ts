/**
 * Prices of the public image endpoints, computed exactly (DESIGN.md §2): money is an integer
 * count of 1e-10 USD ("units"), so `width × height / 1e6 × price` rounded up after the 10th
 * decimal never meets a binary fraction (in floats 1536×256 on the quality model gives
 * 0.0078643201 instead of 0.00786432).
 */

/** One USD in units of 1e-10 USD. */
export const UNITS_PER_USD = 10_000_000_000n;

/** Which price list a public endpoint uses. */
export type ImageModelKind = 'quality' | 'fast';

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

/**
 * Units of 1e-10 USD as a plain decimal string, trailing zeros dropped.
 *
 * @example formatUsd(78_643_200n) === '0.00786432'
 */
export function formatUsd(units: bigint): string {
  const negative = units < 0n;
  const abs = negative ? -units : units;
  const whole = abs / UNITS_PER_USD;
  const fraction = (abs % UNITS_PER_USD).toString().padStart(10, '0').replace(/0+$/, '');
  return `${negative ? '-' : ''}${whole}${fraction ? `.${fraction}` : ''}`;
}

/**
 * Units as a JSON number. The decimal text is parsed once, so the number is the double nearest
 * to the exact amount and prints as that amount (`0.00786432`), never a float product.
 *
 * @example usdNumber(78_643_200n) === 0.00786432
 */
export function usdNumber(units: bigint): number {
  return Number(formatUsd(units));
}

/**
 * Megapixels of a size as an exact decimal number (pixels / 1e6 parsed from text).
 *
 * @example megapixels(1536, 256) === 0.393216
 */
export function megapixels(width: number, height: number): number {
  return pixelsToMegapixels(width * height);
}

/**
 * pixels / 1e6 as a number parsed from exact decimal text (pixels × 1e4 read as 1e-10 units).
 *
 * @example pixelsToMegapixels(393216) === 0.393216
 */
export function pixelsToMegapixels(pixels: number): number {
  return Number(formatUsd(BigInt(pixels) * 10_000n));
}
