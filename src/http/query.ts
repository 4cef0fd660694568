import { invalidParameter } from '../model/errors.js';

/**
 * Parses an optional integer query value in [min, max] (or clamps it there); a bad value is a
 * 400 naming it.
 *
 * @example queryInteger('wait', '5000', 90000, 1000, 300000, true) === 5000
 */
export function queryInteger(field: string, raw: string | null, fallback: number, min: number, max: number, clamp = false): number {
  if (raw === null || raw === '') return fallback;
  const value = Number(raw);
  if (!Number.isInteger(value)) throw invalidParameter(field, 'must be an integer');
  if (clamp) return Math.min(max, Math.max(min, value));
  if (value < min || value > max) throw invalidParameter(field, `must be from ${min} to ${max}`);
  return value;
}
