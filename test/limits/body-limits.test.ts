// Issue 9 items 5, 7 and 10: slow uploads get a read deadline and no longer hold concurrency
// slots; the gateway caps its connections and the bytes of bodies in flight; an oversize body's
// 413 is always readable by fetch. Real gateway over HTTP.
import { readFileSync } from 'node:fs';
import { afterEach, describe, expect, it } from 'vitest';
import { eventually, parkedTake, startTestGantry, type TestBackend, type TestGantry } from '../helpers/gantry.js';
import { RawConnection } from './raw-http.js';

let gantry: TestGantry | undefined;
const connections: RawConnection[] = [];
afterEach(async () => {
  for (const c of connections.splice(0)) c.close();
  await gantry?.close();
  gantry = undefined;
});

async function start(config: Parameters<typeof startTestGantry>[0], backend: TestBackend = 'sqlite'): Promise<{ t: TestGantry; key: string }> {
  const t = (gantry = await startTestGantry(config, { backend }));
  await t.createEndpoint('up');
  return { t, key: await t.createKey(['run', 'read']) };
}

function open(url: string): RawConnection {
  const c = new RawConnection(url);
  connections.push(c);
  return c;
}

async function post(t: TestGantry, key: string, path: string, body: string): Promise<{ status: number; json: Record<string, unknown>; headers: Headers }> {
  const res = await fetch(`${t.url}${path}`, { method: 'POST', headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' }, body });
  return { status: res.status, json: (await res.json()) as Record<string, unknown>, headers: res.headers };
}

describe('slow uploads (item 5)', () => {
  it('do not hold /run slots, and are refused with 408 at the body read deadline', async () => {
    const { t, key } = await start({ rateLimits: true, bodyReadTimeoutMs: 1_500 });
    // 200 is /run's concurrency limit: 210 uploads that never finish would have taken every slot.
    const slow = Array.from({ length: 210 }, () => open(t.url));
    await Promise.all(slow.map((c) => c.ready()));
    for (const c of slow) c.startPost('/v2/up/run', key, 1_000);
    await eventually(async () => (slow.every((c) => c.received === '') ? true : undefined), 2_000, 'uploads in progress');
    const ok = await post(t, key, '/v2/up/run', '{"input":{}}');
    expect(ok.status).toBe(200);
    await eventually(async () => (slow.every((c) => c.status() === 408 && c.closed) ? true : undefined), 15_000, 'every slow upload answered 408 and closed');
    expect(slow[0]!.received).toContain('BODY_TIMEOUT');
  }, 30_000);
});

describe('connection cap (item 5)', () => {
  it('closes connections past GANTRY_MAX_CONNECTIONS when every one is busy, and serves again once they are gone', async () => {
    const { t } = await start({ maxConnections: 5, jobTakeWaitMs: 30_000 });
    // Two worker keys: one key may hold at most half the cap (3 of 5) with requests in progress.
    const workerKeys = [await t.createKey(['worker']), await t.createKey(['worker'])];
    // Five connections each holding a request (a worker's job-take long-poll): busy, so none is
    // closed to make room (issue 22 item 6 closes idle ones only; the test's own kept-alive one is).
    // Opened one at a time: a connection open without a request yet is idle, and may be closed to make room.
    const busy: RawConnection[] = [];
    for (let i = 0; i < 5; i++) {
      const c = open(t.url);
      busy.push(c);
      await c.ready();
      c.socket.write(`GET /v2/up/job-take/cap-${i} HTTP/1.1\r\nHost: x\r\nAuthorization: ${workerKeys[i % 2]!}\r\n\r\n`);
      await parkedTake(t.gantry, `cap-${i}`);
    }
    // The sixth: past the cap, closed unanswered.
    const sixth = open(t.url);
    await sixth.ready().catch(() => undefined);
    sixth.socket.write('GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n');
    await eventually(async () => (sixth.closed ? true : undefined), 10_000, 'the sixth connection closed');
    expect(sixth.received).toBe('');
    expect(busy.every((c) => !c.closed)).toBe(true);
    for (const c of busy) c.close();
    await eventually(async () => ((await fetch(`${t.url}/healthz`).catch(() => undefined))?.status === 200 ? true : undefined), 5_000, 'served again');
  });
});

describe('bodies in flight (item 7)', () => {
  it('answers 503 with Retry-After past the cap on bytes of bodies being read, and serves again after', async () => {
    // The read timeout is the window in which the probe must see the cap: 2 s was too short for
    // a busy 2-core machine (the big bodies timed out, gave their bytes back, no 503 came).
    const { t, key } = await start({ bodyBytesInFlight: 30_000_000, bodyReadTimeoutMs: 10_000 });
    // Two keys, each up to its half of the budget (one key alone may hold only half: below).
    const otherKey = await t.createKey(['run', 'read']);
    const big = [open(t.url), open(t.url)];
    await Promise.all(big.map((c) => c.ready()));
    big[0]!.startPost('/v2/up/runsync', key, 15_000_000);
    big[1]!.startPost('/v2/up/runsync', otherKey, 15_000_000);
    // Probes only once both are counted: a probe read first would take bytes one of them needs.
    await eventually(async () => (t.gantry.bodies.inFlight >= 30_000_000 ? true : undefined), 10_000, 'both big bodies counted');
    const refused = await eventually(async () => {
      const res = await post(t, key, '/v2/up/run', JSON.stringify({ input: { s: 'x'.repeat(1_000_000) } }));
      return res.status === 503 ? res : undefined;
    }, 9_000, 'a 503 while 30 MB of bodies are being read');
    expect(refused.json.code).toBe('BODIES_IN_FLIGHT');
    expect(refused.headers.get('retry-after')).toBe('1');
    // The slow bodies time out and give their bytes back.
    await eventually(async () => (big.every((c) => c.status() === 408) ? true : undefined), 20_000, 'the big uploads timed out');
    expect((await post(t, key, '/v2/up/run', JSON.stringify({ input: { s: 'x'.repeat(1_000_000) } }))).status).toBe(200);
  }, 45_000);

  // Issue 24, item 4: the budget is shared between keys.
  it("holds one key's bodies to half the budget: another key's body is read while the first holds all it may", async () => {
    const { t, key } = await start({ bodyBytesInFlight: 30_000_000, bodyReadTimeoutMs: 20_000 });
    const keyB = await t.createKey(['run', 'read']);
    // Key A holds its half (15 MB) with two uploads that send one byte each.
    const slow = [open(t.url), open(t.url)];
    await Promise.all(slow.map((c) => c.ready()));
    slow[0]!.startPost('/v2/up/runsync', key, 9_000_000);
    slow[1]!.startPost('/v2/up/runsync', key, 6_000_000);
    await eventually(async () => (t.gantry.bodies.inFlight >= 15_000_000 ? true : undefined), 10_000, "A's uploads counted");
    // One more byte-megabyte of A is refused, though the gateway's budget has 15 MB left.
    const a = await post(t, key, '/v2/up/run', JSON.stringify({ input: { s: 'x'.repeat(1_000_000) } }));
    expect(a.status).toBe(503);
    expect(a.json.code).toBe('BODIES_IN_FLIGHT');
    expect(a.headers.get('retry-after')).toBe('1');
    // B's 9 MB body is read beside A's.
    const b = await post(t, keyB, '/v2/up/run', JSON.stringify({ input: { s: 'x'.repeat(9_000_000) } }));
    expect(b.status).toBe(200);
    expect(t.gantry.bodies.byKey.size).toBe(1); // A's uploads still held
  }, 45_000);
});

/** The most bytes the kernel's socket buffers may hold for one loopback connection: its receive and send maximums (Linux). */
function socketBufferBytes(): number {
  const max = (name: string): number => Number(readFileSync(`/proc/sys/net/ipv4/${name}`, 'utf8').trim().split(/\s+/)[2]);
  try {
    return max('tcp_rmem') + max('tcp_wmem');
  } catch {
    return 40_000_000;
  }
}

// Issue 22, item 3: a client posting body after body past its refusals made the gateway read and
// drop gigabytes at full speed; refused bodies are now read at a pace, one key's at half of it.
describe('refused bodies are read at a pace', () => {
  // The body must be larger than what the kernel can hold for the connection and what the
  // gateway reads in a second at the pace (8 MB), and at most the 64 MB read of a refused body.
  const size = Math.max(20_000_000, socketBufferBytes() + 12_000_000);
  it.skipIf(size > 64_000_000)("reads a refused body no faster than the key's half of the drain rate, answers it, and serves other keys meanwhile", async () => {
    const { t, key } = await start({ bodyDrainBytesPerSecond: 8_000_000 });
    const otherKey = await t.createKey(['run']);
    const c = open(t.url);
    await c.ready();
    // `size` declared on /run (limit 10 MB): refused 413, then read and dropped (up to 64 MB) so
    // the client can read the answer — at 4 MB/s, the key's half of 8 MB/s (48 MB: about 11 s).
    c.socket.write(`POST /v2/up/run HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${key}\r\nContent-Type: application/json\r\nContent-Length: ${size}\r\n\r\n`);
    c.socket.write(Buffer.alloc(size, 'x'));
    await new Promise((r) => setTimeout(r, 1_000));
    // In 1 s the gateway has read at most a second's burst and a second at the key's pace (8 MB),
    // and the kernel's socket buffers hold at most their maximums (tcp_rmem and tcp_wmem), so
    // the client's write cannot have gone out whole (Node counts a write in progress in
    // writableLength until the kernel took its last byte). Read at full speed, it has (0 then).
    expect(c.socket.writableLength).toBeGreaterThan(0);
    expect(c.status()).toBeUndefined();
    expect((await post(t, otherKey, '/v2/up/run', '{"input":{}}')).status).toBe(200);
    await eventually(async () => (c.closed ? true : undefined), 40_000, 'the refused upload answered and closed');
    expect(c.errors).toEqual([]);
    expect(c.status()).toBe(413);
    expect(c.received).toContain('PAYLOAD_TOO_LARGE');
    expect([...t.gantry.bodies.drains!.byKey.values()].map((entry) => entry.draining)).toEqual([0]);
  }, 60_000);

  it('paces refused bodies a key sends one after another as if they came together', async () => {
    const { t, key } = await start({ bodyDrainBytesPerSecond: 20_000_000 });
    const body = JSON.stringify({ input: { s: 'x'.repeat(11_000_000) } });
    const started = performance.now();
    for (let i = 0; i < 4; i++) expect((await post(t, key, '/v2/up/run', body)).status).toBe(413);
    // 44 MB at the key's 10 MB/s after its 10 MB burst: 3.4 s at least. A bucket made anew for
    // each body gave each a fresh 10 MB burst: 0.4 s of pacing in all.
    expect(performance.now() - started).toBeGreaterThan(2_500);
  }, 60_000);
});

describe.each<TestBackend>(['sqlite', 'postgres'])('oversize bodies (item 10, %s)', (backend) => {
  it('reads the whole oversize upload before answering 413, so the sender never gets a reset', async () => {
    const { t, key } = await start({}, backend);
    const c = open(t.url);
    await c.ready();
    // The whole 11 MB handed to the socket at once: a server that answered and closed without
    // reading it would reset the connection while the client still sends.
    c.startPost('/v2/up/run', key, 11_000_000, `{"input":"${'x'.repeat(11_000_000 - 12)}"}`);
    await eventually(async () => (c.closed ? true : undefined), 20_000, 'the connection closed');
    expect(c.errors).toEqual([]);
    expect(c.status()).toBe(413);
    expect(c.received).toContain('PAYLOAD_TOO_LARGE');
  }, 30_000);

  it('fetch reads the 413 JSON of an 11 MB /run body, 10 times out of 10', async () => {
    const { t, key } = await start({}, backend);
    const body = JSON.stringify({ input: { s: 'x'.repeat(11_000_000) } });
    for (let i = 0; i < 10; i++) {
      const res = await post(t, key, '/v2/up/run', body);
      expect(res.status).toBe(413);
      expect(res.json.code).toBe('PAYLOAD_TOO_LARGE');
    }
  }, 60_000);
});
