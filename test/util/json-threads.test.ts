// The JSON threads hand back a raw field's canonical text with its UTF-8 length, measured on the
// thread: the submit path counts a large input's bytes (queue bounds, input_bytes) without
// measuring 19 MB on the event loop (docs/benchmarks.md, "Big bodies").
import { readdirSync, readFileSync } from 'node:fs';
import { afterAll, describe, expect, it } from 'vitest';
import { RawJson } from '../../src/model/json.js';
import { createJsonThreads, THREAD_NICE } from '../../src/util/json-threads.js';

/** The nice value of each thread of this process (Linux: field 19 of /proc/self/task/<id>/stat). */
function threadNiceValues(): Map<string, number> {
  const nice = new Map<string, number>();
  for (const tid of readdirSync('/proc/self/task')) {
    try {
      const stat = readFileSync(`/proc/self/task/${tid}/stat`, 'utf8');
      nice.set(tid, Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[16]));
    } catch {
      // the thread ended meanwhile
    }
  }
  return nice;
}

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

  // Round five: the raw fields come back as bytes; a body's chunks (body.ts) are joined on the
  // thread into shared memory, a body that owns its memory is moved there and back, any other
  // (a SharedArrayBuffer's) copied first; all give the same fields.
  it('gives a compact raw field back as the bytes sent, from chunks, a shared or an owned body alike', async () => {
    const input = { s: 'é ✓ 😀', n: [1, 2, { x: null }] };
    const text = JSON.stringify({ input, policy: { ttl: 5 } });
    const shared = Buffer.from(new SharedArrayBuffer(Buffer.byteLength(text)));
    shared.write(text);
    // And as chunks (a large body as it came), cut inside a character: joined on the thread.
    const whole = Buffer.from(text);
    const cut = whole.indexOf('✓') + 1;
    const chunks = [Buffer.from(whole.subarray(0, cut)), Buffer.from(whole.subarray(cut))];
    for (const body of [shared, Buffer.from(text), chunks]) {
      const parsed = (await threads.parse(body, ['input'], 32)) as { value: Record<string, unknown> };
      const raw = parsed.value.input as RawJson;
      expect(raw.utf8.equals(Buffer.from(JSON.stringify(input)))).toBe(true);
      expect(raw.text).toBe(JSON.stringify(input));
      expect(parsed.value.policy).toEqual({ ttl: 5 });
    }
  });

  // Issue 22, item 3: parsing gives way to the event loop on a busy machine.
  it.skipIf(process.platform !== 'linux')('runs its threads at a nice value below the event loop', async () => {
    const before = threadNiceValues();
    const own = createJsonThreads(2);
    try {
      await Promise.all([own.parse(Buffer.from('{"input":[1]}'), ['input'], 32), own.parse(Buffer.from('{"input":[2]}'), ['input'], 32)]);
      const added = [...threadNiceValues()].filter(([tid]) => !before.has(tid));
      expect(added.filter(([, nice]) => nice === THREAD_NICE).length).toBeGreaterThanOrEqual(2);
      expect(threadNiceValues().get(String(process.pid))).toBe(0);
    } finally {
      await own.close();
    }
  });
});
