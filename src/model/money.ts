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

/**
 * What `ms` milliseconds of execution cost at `unitsPerSecond` (1e-10 USD per second), rounded
 * up after the 10th decimal: ceil(ms × unitsPerSecond / 1000).
 *
 * @example executionCostUnits(2_500_000, 1234) === 3_085_000n // 0.0003085 USD: 1.234 s at 0.00025 USD/s
 */
export function executionCostUnits(unitsPerSecond: number, ms: number): bigint {
  if (!Number.isSafeInteger(unitsPerSecond) || !Number.isSafeInteger(ms) || unitsPerSecond < 0 || ms < 0) {
    throw new RangeError(`price and time must be non-negative integers, got ${unitsPerSecond} units/s for ${ms} ms`);
  }
  return (BigInt(unitsPerSecond) * BigInt(ms) + 999n) / 1000n;
}

/**
 * A USD amount (a JSON number or decimal text, at most 10 decimals) → units of 1e-10 USD, or
 * null when it is not one.
 *
 * @example usdToUnits(0.00025) === 2_500_000; usdToUnits('1e-11') === null
 */
export function usdToUnits(value: unknown): number | null {
  let text: string;
  if (typeof value === 'number') {
    if (!Number.isFinite(value) || value < 0) return null;
    text = value.toFixed(10);
    if (Number(text) !== value) return null; // more than 10 decimals
  } else if (typeof value === 'string' && /^\d+(\.\d{1,10})?$/.test(value)) {
    text = value;
  } else {
    return null;
  }
  const [whole = '0', fraction = ''] = text.split('.');
  const units = BigInt(whole) * UNITS_PER_USD + BigInt(fraction.padEnd(10, '0'));
  return units <= BigInt(Number.MAX_SAFE_INTEGER) ? Number(units) : null;
}
