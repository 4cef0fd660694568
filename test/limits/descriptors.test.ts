// Issue 22 item 6: descriptors before connections. Under an open-file limit of 1,024, 1,100
// connections that only sit open (no key, no request) used every descriptor and other clients
// got ECONNRESET long before GANTRY_MAX_CONNECTIONS. `gantry serve` now caps connections by the
// limit (with room for the store, workers and webhooks), logs what it chose, and closes the
// connections idle longest to make room: another client's /healthz and /run are answered, and
// the gateway's descriptors stay under the limit. A real `gantry serve` under `prlimit`.
import { readdirSync } from 'node:fs';
import { request } from 'node:http';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { connectionCap } from '../../src/http/connection-guard.js';
import { startGateway, type LogLine, type ServeProcess } from '../helpers/serve-process.js';
import { eventually } from '../helpers/gantry.js';
import { RawConnection } from './raw-http.js';

const IDLE = 1_100;

/** One request on a connection of its own; a reset or a close without an answer rejects. */
function fresh(method: string, url: string, headers: Record<string, string> = {}, body?: string): Promise<{ status: number; text: string }> {
  return new Promise((resolve, reject) => {
    const req = request(url, { method, headers, agent: false, timeout: 30_000 }, (res) => {
      let text = '';
      res.setEncoding('utf8').on('data', (d: string) => (text += d));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, text }));
    });
    req.on('timeout', () => req.destroy(new Error('no answer within 30 s')));
    req.on('error', reject);
    req.end(body);
  });
}

describe('descriptors before connections', () => {
  let gw: ServeProcess;
  const idle: RawConnection[] = [];
  beforeAll(async () => {
    gw = await startGateway({ runThrough: ['prlimit', '--nofile=1024:1024', '--'] });
  }, 150_000);
  afterAll(async () => {
    for (const c of idle) c.close();
    await gw?.stop();
  });

  it('logs the connection cap it derived from the open-file limit', async () => {
    const line: LogLine = await gw.waitForLog((l) => typeof l.maxConnections === 'number', 'the connection cap');
    const expected = connectionCap({ configured: 10_000, fileLimit: 1_024, storeConnections: 0, webhookSockets: 32 });
    expect(line).toMatchObject({ maxConnections: expected, configuredMaxConnections: 10_000, openFiles: { soft: 1_024, hard: 1_024 }, openFilesRaised: 'at-hard-limit' });
    expect(expected).toBeLessThan(1_024 - 128);
  });

  it(`answers another client's /healthz and /run while ${IDLE} idle keyless connections are open, within the limit`, async () => {
    await gw.admin.createEndpoint({ id: 'fd' });
    const key = (await gw.admin.createKey({ name: 'fd run', scopes: ['run'], endpoints: ['fd'] })).key;
    for (let i = 0; i < IDLE; i++) {
      const c = new RawConnection(gw.url);
      idle.push(c);
      await c.ready().catch(() => undefined);
    }
    // Every one was accepted and sits open, or was closed by the gateway to make room: none is left half-open.
    const fds = (): number => readdirSync(`/proc/${gw.proc.pid}/fd`).length;
    await eventually(async () => (idle.filter((c) => !c.closed).length < 1_024 - 128 ? true : undefined), 60_000, 'idle connections past the cap closed');
    expect(fds()).toBeLessThan(1_024);
    // Each on a new connection (fetch would reuse the admin client's kept-alive one).
    for (let round = 0; round < 5; round++) {
      expect(await fresh('GET', `${gw.url}/healthz`)).toMatchObject({ status: 200 });
      const run = await fresh('POST', `${gw.url}/v2/fd/run`, { authorization: `Bearer ${key}`, 'content-type': 'application/json' }, '{"input":{"n":1}}');
      expect(run.status).toBe(200);
      expect(JSON.parse(run.text)).toMatchObject({ status: 'IN_QUEUE' });
    }
    expect(fds()).toBeLessThan(1_024);
    // The gateway never ran out: no EMFILE in its log.
    expect(gw.output()).not.toMatch(/EMFILE|too many open files/i);
  }, 180_000);
});
