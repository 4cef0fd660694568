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
 * A field of a large request body kept as its JSON text's UTF-8 bytes instead of a parsed value:
 * the body was parsed off the event loop, and the field, which the gateway stores and hands on
 * as text anyway (a job's `input`, a worker's `output`), came back from that thread as bytes —
 * the bytes the client sent where they were already what JSON.stringify writes — so the event
 * loop neither parses, serialises nor copies it. A string is made of them only where one is
 * read (`text`); a large input on SQLite goes to its file as these bytes and never becomes one
 * (docs/benchmarks.md, "Round five").
 *
 * @example const input = new RawJson(Buffer.from('{"a":1}'), 'object'); input.text === '{"a":1}'
 */
export class RawJson {
  #text: string | undefined;

  constructor(
    /** Canonical JSON text of the value (JSON.stringify of the parsed value), as valid UTF-8. */
    readonly utf8: Buffer,
    readonly kind: JsonKind,
  ) {}

  /** The text, decoded from `utf8` on first read (19 MB: ~10 ms of the reader's thread). */
  get text(): string {
    return (this.#text ??= this.utf8.toString('utf8'));
  }

  /** Its UTF-8 length. */
  get bytes(): number {
    return this.utf8.length;
  }
}

/**
 * `value` as canonical JSON text: the text of a RawJson as it is, anything else serialised.
 *
 * @example jsonText({ a: 1 }) === '{"a":1}'; jsonText(new RawJson(Buffer.from('[1]'), 'array')) === '[1]'
 */
export function jsonText(value: unknown): string {
  return value instanceof RawJson ? value.text : JSON.stringify(value);
}

/**
 * A JSON text that is already text: a string, or a RawJson holding it as bytes (a large body's
 * field). Passed along as it is, so that a store that can use the bytes (SQLite's input files)
 * never decodes them.
 */
export type JsonTextOrBytes = string | RawJson;

/**
 * The string of a JsonTextOrBytes (decoding a RawJson's bytes, once).
 *
 * @example textOf('[1]') === '[1]'; textOf(new RawJson(Buffer.from('[1]'), 'array')) === '[1]'
 */
export function textOf(json: JsonTextOrBytes): string {
  return json instanceof RawJson ? json.text : json;
}

/**
 * The UTF-8 length of a JsonTextOrBytes (a RawJson's without measuring).
 *
 * @example utf8Length('"é"') === 4
 */
export function utf8Length(json: JsonTextOrBytes): number {
  return json instanceof RawJson ? json.bytes : Buffer.byteLength(json);
}
