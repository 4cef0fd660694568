// Shares between keys of the queue's bounds and of the connections (issue 24.4, docs/security.md
// "Shared limits"), over HTTP on both stores: a key alone on an endpoint may fill its queue (RunPod's
// behaviour), and once it has, another key's submission is still taken; a key holding half the
// gateway's connections with requests in progress is refused a further one (429
// TOO_MANY_CONNECTIONS), while another key is answered.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { eventually, startTestGantry, type TestBackend, type TestGantry } from '../helpers/gantry.js';
import { clientFor, isErrorBody, uniqueId } from '../http/http-helpers.js';

/** The count bound of these gateways: max(50, workersMax × 1) jobs may wait, one more is taken. */
const COUNT_CAP = 51;
/** The bytes bound: the least GANTRY_QUEUE_MAX_INPUT_BYTES takes. */
const MAX_BYTES = 1_000_000;
/** The connection cap of these gateways (GANTRY_MAX_CONNECTIONS): a key may hold 4. */
const CONNECTIONS = 8;

const input = (bytes: number): { s: string } => ({ s: 'x'.repeat(bytes) });

describe.each(['sqlite', 'postgres'] as const)('shares between keys (%s store)', (backend: TestBackend) => {
  let t: TestGantry;
  let keyA: string;
  let keyB: string;

  beforeAll(async () => {
    t = await startTestGantry({ queueLimitFactor: 1, queueMaxInputBytes: MAX_BYTES, maxConnections: CONNECTIONS }, { backend });
    keyA = await t.createKey(['run', 'read']);
    keyB = await t.createKey(['run', 'read']);
  }, 60_000);

  afterAll(async () => {
    await t?.close();
  });

  async function endpoint(): Promise<string> {
    const ep = uniqueId('shares');
    await t.createEndpoint(ep, { workersMax: 1 });
    return ep;
  }

  it('a key alone fills the queue; another key is then still taken, and each is held to its half', async () => {
    const ep = await endpoint();
    const a = clientFor(t, ep, keyA);
    const b = clientFor(t, ep, keyB);
    for (let i = 0; i < COUNT_CAP; i++) expect((await a.run({ input: { i } })).status).toBe(200);
    const full = await a.run({ input: { i: 'one more' } });
    expect(full.status).toBe(429);
    expect(full.json).toMatchObject({ code: 'QUEUE_FULL' });
    expect(full.json.error).toMatch(/Queue is full: 51 jobs waiting/);
    // B holds nothing: let in past the cap, up to its half (26 of 51).
    for (let i = 0; i < 26; i++) expect((await b.run({ input: { i } })).status, `B's job ${i}`).toBe(200);
    const past = await b.run({ input: { i: 'past its half' } });
    expect(past.status).toBe(429);
    expect(isErrorBody(past)).toBe(true);
    expect(Number(past.headers.get('retry-after'))).toBeGreaterThanOrEqual(1);
    expect((await a.run({ input: {} })).json).toMatchObject({ code: 'QUEUE_FULL' });
    expect((await a.health()).json).toMatchObject({ jobs: { inQueue: COUNT_CAP + 26 } });
  });

  it('while another key has jobs queued, a key past its half is refused under the cap, naming its share', async () => {
    const ep = await endpoint();
    const a = clientFor(t, ep, keyA);
    const b = clientFor(t, ep, keyB);
    expect((await b.run({ input: {} })).status).toBe(200);
    for (let i = 0; i < 26; i++) expect((await a.run({ input: { i } })).status).toBe(200);
    const share = await a.run({ input: { i: 26 } });
    expect(share.status).toBe(429);
    expect(share.json).toMatchObject({ code: 'QUEUE_FULL' });
    expect(share.json.error).toMatch(/Queue share used: this key has 26 of the 27 jobs waiting .* one key may hold 26 \(half of the queue's 51\)/);
    expect((await b.run({ input: {} })).status).toBe(200);
  });

  it('the bytes bound: a key alone fills it, another key is still taken up to its half', async () => {
    const ep = await endpoint();
    const a = clientFor(t, ep, keyA);
    const b = clientFor(t, ep, keyB);
    for (let i = 0; i < 3; i++) expect((await a.run({ input: input(300_000) })).status).toBe(200);
    const full = await a.run({ input: input(300_000) });
    expect(full.json).toMatchObject({ code: 'QUEUE_FULL' });
    expect(full.json.error).toMatch(/bytes of input/);
    // 900,024 bytes queued by A; B's 400,008 pass the bound but not B's half plus the bound.
    expect((await b.run({ input: input(400_000) })).status).toBe(200);
    const past = await b.run({ input: input(200_000) });
    expect(past.json).toMatchObject({ code: 'QUEUE_FULL' });
    expect(past.json.error).toMatch(/Queue share used: this key has 400008 of the 1300032 bytes|Queue is full: 1300032 bytes/);
  });

  it("a key holding half the gateway's connections with requests in progress is refused another; a second key is answered", async () => {
    const ep = await endpoint();
    const a = clientFor(t, ep, keyA);
    const b = clientFor(t, ep, keyB);
    const id = await a.submit(); // no worker: it stays queued, so status-sync holds
    const held = new AbortController();
    const polls = Array.from({ length: CONNECTIONS / 2 }, () =>
      fetch(`${t.url}/v2/${ep}/status-sync/${id}?wait=60000`, { headers: { authorization: `Bearer ${keyA}` }, signal: held.signal }).then(
        (res) => res.status,
        () => 'aborted',
      ),
    );
    try {
      // Once A's four long-polls are held, any further request of A is refused.
      const refused = await eventually(async () => {
        const r = await a.status(id);
        return r.status === 429 ? r : undefined;
      }, 20_000, "A's request refused at its share of the connections");
      expect(refused.json).toMatchObject({ code: 'TOO_MANY_CONNECTIONS' });
      expect(refused.json.error).toMatch(/holds 4 connections with requests in progress, its share of the gateway's 8/);
      expect(Number(refused.headers.get('retry-after'))).toBeGreaterThanOrEqual(1);
      expect(isErrorBody(refused)).toBe(true);
      // B is answered: a read and a submission.
      expect((await b.status(id)).json).toMatchObject({ id, status: 'IN_QUEUE' });
      expect((await b.run({ input: {} })).status).toBe(200);
      expect((await b.health()).status).toBe(200);
    } finally {
      held.abort();
    }
    expect(await Promise.all(polls)).toEqual(['aborted', 'aborted', 'aborted', 'aborted']);
    // A's connections closed: A is answered again.
    await eventually(async () => ((await a.status(id)).status === 200 ? true : undefined), 20_000, "A answered once its long-polls are gone");
  });
});
