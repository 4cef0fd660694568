// The hosts' health rules with the clock in the test's hands: a host whose engine socket does
// not answer goes down after downAfterMs, its workers count as lost and its GPUs are freed;
// once an engine answers on the socket (a small HTTP server speaking the two calls the checks
// make), it is up again and what it still runs of ours is to be removed.
import { randomBytes } from 'node:crypto';
import { createServer, type Server } from 'node:http';
import { rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pino } from 'pino';
import { afterEach, describe, expect, it } from 'vitest';
import { DockerHosts, type DockerHost } from '../../src/pool/docker/docker-hosts.js';
import { NoCapacityError } from '../../src/pool/driver.js';
import { hostConfig } from '../fixtures/docker/test-engines.js';

const socket = join(tmpdir(), `gantry-engine-${randomBytes(4).toString('hex')}.sock`);
let server: Server | undefined;

/** Hosts of one engine (the stand-in on `socket`) with `gpus` GPUs, checked only when a test asks, on a clock the test moves; down 100 ms after the last answer. */
function quietHosts(gpus: number, clock: { now: number }): DockerHosts {
  return new DockerHosts({
    hosts: [hostConfig(`unix://${socket}`, 'h', gpus)],
    quiet: true,
    pingIntervalMs: 60_000,
    downAfterMs: 100,
    onRecovered: () => {},
    logger: pino({ level: 'silent' }),
    clock: { now: () => clock.now, after: () => () => {} },
  });
}

afterEach(async () => {
  await new Promise<void>((r) => (server ? server.close(() => r()) : r()));
  server = undefined;
  rmSync(socket, { force: true });
});

/** An engine answering GET /v1.41/_ping and /v1.41/version on the socket. */
function answerOnSocket(): Promise<void> {
  server = createServer((req, res) => {
    if (req.url === '/v1.41/_ping') res.end('OK');
    else if (req.url === '/v1.41/version') res.end(JSON.stringify({ Version: '99.0', Components: [{ Name: 'Engine', Version: '99.0' }] }));
    else res.writeHead(404).end('{"message":"not here"}');
  });
  return new Promise((r) => server!.listen(socket, r));
}

describe('DockerHosts', () => {
  it('marks a silent host down after downAfterMs, ends its workers as lost, and brings it back when it answers', async () => {
    let now = 1_000;
    const recovered: string[] = [];
    const hosts = new DockerHosts({
      hosts: [hostConfig(`unix://${socket}`, 'h', 2)],
      quiet: false,
      pingIntervalMs: 60_000,
      downAfterMs: 5_000,
      onRecovered: (host: DockerHost) => recovered.push(host.config.name),
      logger: pino({ level: 'silent' }),
      clock: { now: () => now, after: () => () => {} },
    });
    const [host] = hosts.list as [DockerHost];
    // Before any check a host is `unknown`, and placement may use it.
    const reservation = hosts.reserve('w1', { count: 1 });
    const lost: string[] = [];
    expect(reservation.attach({ deviceIds: reservation.deviceIds, lost: (detail) => lost.push(detail) })).toBe(true);
    expect(hosts.views()[0]).toMatchObject({ state: 'unknown', gpus: 2, gpusInUse: 1, workers: 1 });

    await hosts.checkNow(host); // fails (nothing on the socket), but not for long enough
    now += 4_000;
    await hosts.checkNow(host);
    expect(host.state).toBe('unknown');
    expect(lost).toEqual([]);

    now += 1_500;
    await hosts.checkNow(host);
    expect(host.state).toBe('down');
    expect(lost).toEqual([expect.stringMatching(/^Docker host h stopped answering \(.*ENOENT/)]);
    expect(hosts.views()[0]).toMatchObject({ state: 'down', gpusInUse: 0, workers: 0, error: expect.stringMatching(/ENOENT/) as string });
    expect(() => hosts.reserve('w2', { count: 1 })).toThrow(NoCapacityError);
    expect(() => hosts.reserve('w2', { count: 0 })).toThrow('no Docker host is up (h: down)');
    reservation.release(); // a late release of the lost worker changes nothing
    expect(recovered).toEqual([]);

    await answerOnSocket();
    now += 1_000;
    await hosts.checkNow(host);
    expect(host.state).toBe('up');
    expect(recovered).toEqual(['h']);
    expect(hosts.views()[0]).toMatchObject({ state: 'up', error: null, lastSeenAt: now, engine: 'Docker Engine 99.0' });
    expect(hosts.reserve('w2', { count: 2 })).toMatchObject({ deviceIds: ['0', '1'] });
    hosts.close();
  });

  it('a reservation for a host lost while its container started does not attach', async () => {
    const clock = { now: 0 };
    const hosts = quietHosts(1, clock);
    const reservation = hosts.reserve('w1', { count: 1 });
    await hosts.checkNow(hosts.list[0]!);
    clock.now += 200;
    await hosts.checkNow(hosts.list[0]!);
    expect(reservation.attach({ deviceIds: reservation.deviceIds, lost: () => {} })).toBe(false);
    hosts.close();
  });

  it('gives the same load again while a host is unchanged, and a fresh one after each change', async () => {
    const clock = { now: 0 };
    const hosts = quietHosts(4, clock);
    const [first] = hosts.loads();
    expect(hosts.loads()[0]).toBe(first);
    const a = hosts.reserve('wa', { count: 1 });
    const [withA] = hosts.loads();
    expect(withA).not.toBe(first);
    expect(first!.gpusInUse.size).toBe(0); // a load given out is never written to
    expect([...withA!.holders!]).toEqual([['wa', a.deviceIds]]);
    expect(hosts.loads()[0]).toBe(withA);
    // The started worker replaces the reservation's record with its own device list.
    a.attach({ deviceIds: [...a.deviceIds], lost: () => {} });
    const [attached] = hosts.loads();
    expect(attached).not.toBe(withA);
    expect(attached!.holders!.get('wa')).toEqual(a.deviceIds);
    a.release();
    const [released] = hosts.loads();
    expect(released).toMatchObject({ workers: 0, up: true });
    expect(released!.gpusInUse.size).toBe(0);
    // Down: the same workers (none), another state.
    await hosts.checkNow(hosts.list[0]!);
    clock.now += 200;
    await hosts.checkNow(hosts.list[0]!);
    expect(hosts.loads()[0]).toMatchObject({ up: false });
    hosts.close();
  });
});
