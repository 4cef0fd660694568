// The JSON threads hand back a raw field's canonical text with its UTF-8 length, measured on the
// thread: the submit path counts a large input's bytes (queue bounds, input_bytes) without
// measuring 19 MB on the event loop (docs/benchmarks.md, "Big bodies").
import { afterAll, describe, expect, it } from 'vitest';
import { RawJson } from '../../src/model/json.js';
import { createJsonThreads } from '../../src/util/json-threads.js';

describe('JSON threads', () => {
  const threads = createJsonThreads(1);
  afterAll(() => threads.close());

  it('returns a raw field as canonical text with its UTF-8 byte length, the rest parsed', async () => {
    const input = { s: 'é ✓ 😀', n: [1, 2, { x: null }] };
    const body = Buffer.from(`{ "input" : ${JSON.stringify(input, null, 2)}, "webhook": "https://h.example/é" }`);
    const parsed = await threads.parse(body, ['input'], 32);
    expect('value' in parsed).toBe(true);
    const value = (parsed as { value: Record<string, unknown> }).value;
    expect(value.webhook).toBe('https://h.example/é');
    const raw = value.input as RawJson;
    expect(raw).toBeInstanceOf(RawJson);
    expect(raw.text).toBe(JSON.stringify(input));
    expect(raw.kind).toBe('object');
    expect(raw.bytes).toBe(Buffer.byteLength(raw.text));
    expect(raw.bytes).toBeGreaterThan(raw.text.length);
  });
});
