/**
 * A JSON object (not null, not an array): what request bodies, inputs and settings must be.
 *
 * @example isObject({ a: 1 }) === true; isObject([1]) === false
 */
export function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/** JSON bodies may nest at most this deep: deeper values overflow the stack of JSON.stringify and every recursive reader. */
export const MAX_JSON_DEPTH = 1_000;

/**
 * True when `value` nests objects/arrays deeper than `max` levels. Walks containers only (a
 * long string is one step), and stops at the first path past `max`.
 *
 * @example nestedDeeperThan([[1]], 1) === true; nestedDeeperThan({ a: [1] }, 2) === false
 */
export function nestedDeeperThan(value: unknown, max: number): boolean {
  if (typeof value !== 'object' || value === null) return false;
  if (max <= 0) return true;
  if (Array.isArray(value)) {
    for (const item of value) if (nestedDeeperThan(item, max - 1)) return true;
    return false;
  }
  for (const key in value) if (nestedDeeperThan((value as Record<string, unknown>)[key], max - 1)) return true;
  return false;
}

/**
 * `text` with every NUL character replaced by U+FFFD: PostgreSQL text cannot hold NUL, and a
 * worker's error string is stored as text.
 *
 * @example withoutNul('a\u0000b') === 'a\uFFFDb'
 */
export function withoutNul(text: string): string {
  return text.includes('\u0000') ? text.replaceAll('\u0000', '\uFFFD') : text;
}
