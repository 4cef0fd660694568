// The JSON threads' fast path (model/json-scan.ts) must never accept what JSON.parse refuses, and
// a raw field's text must be exactly JSON.stringify of the parsed field, or it answers null and
// the body is parsed as before. Checked on seeded random bodies: values written in many ways
// (spaces, escapes, numbers as people and other languages write them, duplicate and index keys),
// then cut, changed and broken byte by byte.
import { describe, expect, it } from 'vitest';
import { MAX_JSON_DEPTH, nestedDeeperThan } from '../../src/model/json.js';
import { scanRawFields } from '../../src/model/json-scan.js';
import { seededRandom } from '../../src/util/seeded-random.js';

type Random = () => number;

const pick = <T>(random: Random, items: readonly T[]): T => items[Math.floor(random() * items.length)]!;

/** A random value's JSON text, written in one of many legal ways. */
function write(random: Random, depth: number): string {
  const space = (): string => (random() < 0.3 ? pick(random, [' ', '\n', '\t', '\r\n  ', '  ']) : '');
  const roll = random();
  if (depth > 0 && roll < 0.2) {
    const keys = Array.from({ length: Math.floor(random() * 5) }, () => pick(random, ['a', 'b', 'é', '0', '7', '12', 'x y', '\\u0061', '__proto__', 'a\\"b', 'k\\/', '😀', '\\n']));
    return `{${space()}${keys.map((k) => `"${k}"${space()}:${space()}${write(random, depth - 1)}`).join(`${space()},${space()}`)}${space()}}`;
  }
  if (depth > 0 && roll < 0.4) {
    const items = Array.from({ length: Math.floor(random() * 5) }, () => write(random, depth - 1));
    return `[${space()}${items.join(`${space()},${space()}`)}${space()}]`;
  }
  if (roll < 0.65) {
    return `"${Array.from({ length: Math.floor(random() * 6) }, () => pick(random, ['a', ' ', 'é', '✓', '😀', '\\"', '\\\\', '\\/', '\\n', '\\t', '\\b', '\\f', '\\r', '\\u0000', '\\u001f', '\\u000b', '\\u001F', '\\u0008', '\\u00e9', '\\ud83d\\ude00', '\\ud800', '\u2028', '\u007f'])).join('')}"`;
  }
  if (roll < 0.9) {
    return pick(random, ['0', '-0', '1', '-1', '42', '1.5', '1.0', '0.1', '-0.25', '1e3', '1E+2', '2.5e-7', '1e21', '1e400', '123456789012345', '1234567890123456', '12345678901234567890', '9007199254740993', '0.30000000000000004', '5e-324', String(random())]);
  }
  return pick(random, ['true', 'false', 'null']);
}

/** What the gateway made of a body before the fast path: JSON.parse, then each raw field serialised again. */
function slowPath(text: string, raw: readonly string[]): { value: Record<string, unknown>; raw: Map<string, string> } | 'refused' | 'not-object' {
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch {
    return 'refused';
  }
  if (nestedDeeperThan(value, MAX_JSON_DEPTH)) return 'refused';
  if (value === null || typeof value !== 'object' || Array.isArray(value)) return 'not-object';
  const texts = new Map<string, string>();
  const rest = value as Record<string, unknown>;
  for (const name of raw) {
    if (!Object.prototype.hasOwnProperty.call(rest, name)) continue;
    texts.set(name, JSON.stringify(rest[name]));
    delete rest[name];
  }
  return { value: rest, raw: texts };
}

/** Checks the fast path against the slow one on `text`; returns whether the fast path vouched for it. */
function check(text: string, raw: readonly string[] = ['input']): boolean {
  const bytes = Buffer.from(text);
  const fast = scanRawFields(bytes, raw, MAX_JSON_DEPTH);
  const slow = slowPath(Buffer.from(text).toString('utf8'), raw);
  if (fast === null) return false;
  // Whatever the fast path vouched for, the slow path accepted, and they agree to the byte.
  expect(slow, text).not.toBe('refused');
  expect(slow, text).not.toBe('not-object');
  if (typeof slow === 'string') return true;
  expect(fast.value, text).toEqual(slow.value);
  expect(Object.keys(fast.value), text).toEqual(Object.keys(slow.value));
  expect(new Map(fast.raw.map(([name, start, end]) => [name, bytes.toString('utf8', start, end)])), text).toEqual(slow.raw);
  for (const [, start, end, kind] of fast.raw) {
    const t = bytes.toString('utf8', start, end);
    expect(kind, text).toBe(Array.isArray(JSON.parse(t)) ? 'array' : JSON.parse(t) === null ? 'null' : typeof JSON.parse(t));
  }
  return true;
}

describe('the JSON scan of large bodies', () => {
  it('gives raw fields written as JSON.stringify writes them as they are, and the rest parsed', () => {
    const body = '{ "webhook" : "https://h/é",\n "input": {"a":[1,2.5,{"b":null}],"s":"✓ \\" \\u001f"}, "policy": {"ttl": 5} }';
    const scanned = scanRawFields(Buffer.from(body), ['input'], MAX_JSON_DEPTH);
    const text = '{"a":[1,2.5,{"b":null}],"s":"✓ \\" \\u001f"}';
    const start = Buffer.from(body).indexOf('{"a"');
    expect(scanned).toEqual({ value: { webhook: 'https://h/é', policy: { ttl: 5 } }, raw: [['input', start, start + Buffer.byteLength(text), 'object']] });
    expect(check(body)).toBe(true);
  });

  it('answers null where JSON.stringify would write the field otherwise, and for bodies it does not take', () => {
    for (const input of ['{"a": 1}', '[1, 2]', '1.0', '-0', '1e21', '12345678901234567890', '"\\u00e9"', '"\\/"', '{"1":1}', '{"a":1,"a":2}', '"\\ud800"']) {
      expect(scanRawFields(Buffer.from(`{"input":${input}}`), ['input'], MAX_JSON_DEPTH), input).toBeNull();
    }
    for (const body of ['', ' ', '[1]', '"x"', '{"input":1', '{"input":1}x', '\ufeff{}', '{"input":01}', '{"input":"\u0001"}', '{"input":[1,]}', '{,}', '{"a" 1}']) {
      expect(scanRawFields(Buffer.from(body), ['input'], MAX_JSON_DEPTH), body).toBeNull();
    }
    // Past 32 keys an object checks its keys in a set: a key twice there too.
    const many = Array.from({ length: 40 }, (_, k) => `"k${k}":${k}`);
    expect(check(`{"input":{${many.join(',')}}}`)).toBe(true);
    expect(scanRawFields(Buffer.from(`{"input":{${many.join(',')},"k5":0}}`), ['input'], MAX_JSON_DEPTH)).toBeNull();
    expect(scanRawFields(Buffer.from(`{"input":{${many.join(',')},"k39":0}}`), ['input'], MAX_JSON_DEPTH)).toBeNull();
    // Too deep for the limit: left to the slow path, which says so (or that the body is not JSON).
    expect(scanRawFields(Buffer.from('{"input":[[[1]]]}'), ['input'], 3)).toBeNull();
    expect(scanRawFields(Buffer.from('{"input":[[1]]}'), ['input'], 3)).not.toBeNull();
    // Non-raw fields may be written any way: they are parsed as they are.
    expect(scanRawFields(Buffer.from('{"webhook":"\\u0068","n":1.0,"input":2}'), ['input'], MAX_JSON_DEPTH)).toEqual({ value: { webhook: 'h', n: 1 }, raw: [['input', 36, 37, 'number']] });
  });

  it('agrees with JSON.parse and JSON.stringify on 20,000 seeded random bodies, whole and broken', () => {
    const random = seededRandom(2211);
    let vouched = 0;
    for (let round = 0; round < 20_000; round++) {
      const members = Array.from({ length: Math.floor(random() * 4) }, () => `"${pick(random, ['input', 'output', 'webhook', 'input', '__proto__', 'in\\u0070ut'])}": ${write(random, 4)}`);
      let body = `{${members.join(', ')}}`;
      if (random() < 0.5) {
        // Break it: a byte cut, doubled, dropped or changed.
        const at = Math.floor(random() * body.length);
        const how = random();
        if (how < 0.25) body = body.slice(0, at);
        else if (how < 0.5) body = body.slice(0, at) + body[at] + body.slice(at);
        else if (how < 0.75) body = body.slice(0, at) + body.slice(at + 1);
        else body = body.slice(0, at) + pick(random, ['"', '\\', ',', ':', '}', ']', '[', '{', '-', '.', 'e', '0', ' ', '\u0001', 'x']) + body.slice(at + 1);
      }
      if (check(body, ['input', 'output'])) vouched++;
    }
    // The fast path must also be taken, not only be safe: a good share of the bodies it vouches for.
    expect(vouched).toBeGreaterThan(2_000);
  });

  it('takes a 19 MB input of small objects written by JSON.stringify, and leaves one written with spaces to JSON.parse', () => {
    const rows = Array.from({ length: 150_000 }, (_, i) => ({ i, name: `row-${i}`, v: (i % 997) / 997, tags: ['a', `b${i % 13}`], ok: i % 2 === 0 }));
    const compact = JSON.stringify({ input: { rows } });
    expect(check(compact)).toBe(true);
    expect(check(JSON.stringify({ input: { rows } }, null, 1))).toBe(false);
    const [, start, end] = scanRawFields(Buffer.from(compact), ['input'], MAX_JSON_DEPTH)!.raw[0]!;
    expect(Buffer.from(compact).toString('utf8', start, end)).toBe(JSON.stringify({ rows }));
  });
});
