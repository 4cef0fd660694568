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

/** What a JSON value is, as `typeof` would say, with `array` and `null` apart. */
export type JsonKind = 'object' | 'array' | 'string' | 'number' | 'boolean' | 'null';

/** The kind of a parsed JSON value. @example jsonKind([1]) === 'array' */
export function jsonKind(value: unknown): JsonKind {
  if (value === null) return 'null';
  if (Array.isArray(value)) return 'array';
  return typeof value as JsonKind;
}

/**
 * A field of a large request body kept as JSON text instead of a parsed value: the body was
 * parsed off the event loop and the field, which the gateway stores as text anyway (a job's
 * `input`, a worker's `output`), re-serialised there too, so the event loop neither parses nor
 * serialises it and holds one copy of it.
 *
 * @example const input = new RawJson('{"a":1}', 'object'); input.text === '{"a":1}'
 */
export class RawJson {
  constructor(
    /** Canonical JSON text of the value (JSON.stringify of the parsed value). */
    readonly text: string,
    readonly kind: JsonKind,
    /** Its UTF-8 length, where the thread that made the text measured it (measuring 19 MB took the event loop ~50 ms). */
    readonly bytes?: number,
  ) {}
}

/**
 * `value` as canonical JSON text: the text of a RawJson as it is, anything else serialised.
 *
 * @example jsonText({ a: 1 }) === '{"a":1}'; jsonText(new RawJson('[1]', 'array')) === '[1]'
 */
export function jsonText(value: unknown): string {
  return value instanceof RawJson ? value.text : JSON.stringify(value);
}
