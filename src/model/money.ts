/**
 * Money, exactly: an integer count of 1e-10 USD ("units"). Prices and usage sums never meet a
 * binary fraction (in floats 1536×256 at 0.02 USD/MP gives 0.0078643201 instead of 0.00786432).
 */

/** One USD in units of 1e-10 USD. */
export const UNITS_PER_USD = 10_000_000_000n;

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
