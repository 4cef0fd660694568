// Flashboot's fallback where an engine cannot pause (docs/scaling.md, "Warm pool"): a small
// HTTP server on a unix socket speaks the calls a worker container makes (its log stream and
// exit wait, held open) and answers the pause as Podman does without a cgroup freezer. The
// first refusal is the host's: remembered, logged once, and the next pause on that host is
// refused without asking the engine; a refusal about the container alone (not running) is not.
// The engine's refusal of the pause itself is what the stand-in answers; the real engines
// pause (cgroups v1 freezer here), so this is the one place the fallback can be made to happen.
import { randomBytes } from 'node:crypto';
import { createServer, type Server, type ServerResponse } from 'node:http';
import { rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pino } from 'pino';
import { afterEach, describe, expect, it } from 'vitest';
import { ContainerWorker } from '../../src/pool/docker/container-worker.js';
import type { DockerHost } from '../../src/pool/docker/docker-hosts.js';
import { createEngineClient } from '../../src/pool/docker/engine-client.js';
import { hostConfig } from '../fixtures/docker/test-engines.js';

const socket = join(tmpdir(), `gantry-pause-${randomBytes(4).toString('hex')}.sock`);
let server: Server | undefined;
const held: ServerResponse[] = [];

afterEach(async () => {
  for (const res of held.splice(0)) res.destroy();
  await new Promise<void>((r) => (server ? server.close(() => r()) : r()));
  server = undefined;
  rmSync(socket, { force: true });
});

/** The engine: log streams and exit waits held open; a pause answered by `pause(id)`. */
async function engine(pause: (id: string) => { status: number; message: string }): Promise<{ pauses: string[] }> {
  const pauses: string[] = [];
  server = createServer((req, res) => {
    const m = /^\/v1\.41\/containers\/([^/]+)\/(\w+)/.exec(req.url ?? '');
    if (m?.[2] === 'logs' || m?.[2] === 'wait') {
      res.writeHead(200, { 'content-type': m[2] === 'logs' ? 'application/vnd.docker.raw-stream' : 'application/json' });
      res.flushHeaders();
      held.push(res);
      return;
    }
    if (m?.[2] === 'pause') {
      pauses.push(m[1]!);
      const answer = pause(m[1]!);
      res.writeHead(answer.status, { 'content-type': 'application/json' }).end(JSON.stringify({ cause: 'x', message: answer.message, response: answer.status }));
      return;
    }
    res.writeHead(404).end('{"message":"not here"}');
  });
  await new Promise<void>((r) => server!.listen(socket, r));
  return { pauses };
}

function host(): DockerHost {
  const config = hostConfig(`unix://${socket}`, 'p');
  return {
    config,
    engine: createEngineClient(config),
    state: 'up',
    lastSeenAt: 0,
    failingSince: null,
    error: null,
    engineName: 'Podman Engine 4.3.1',
    identified: null,
    workers: new Map(),
    images: new Set(),
    pauseRefused: null,
  };
}

function worker(h: DockerHost, id: string, lines: string[]): ContainerWorker {
  const logger = pino({ level: 'warn' }, { write: (line: string) => void lines.push(line) });
  return new ContainerWorker({ id, host: h, deviceIds: [], output: () => {}, checkHost: async () => {}, release: () => {}, logger });
}

describe('a pause the engine cannot do (flashboot falls back to stopping)', () => {
  it('remembers the host\'s refusal, logs it once, and refuses the next pause there without asking', async () => {
    const calls = await engine(() => ({ status: 500, message: 'pause is not supported on cgroups v2 without the freezer controller: cgroup freezer not found' }));
    const h = host();
    const lines: string[] = [];
    const a = worker(h, 'a'.repeat(64), lines);
    const b = worker(h, 'b'.repeat(64), lines);
    await expect(a.pause()).rejects.toThrow(/freezer/);
    expect(h.pauseRefused).toMatch(/freezer/);
    await expect(b.pause()).rejects.toThrow(/^Docker host p cannot pause containers \(.*freezer/);
    expect(calls.pauses).toEqual(['a'.repeat(64)]);
    const warned = lines.map((l) => JSON.parse(l) as { msg: string; host: string }).filter((l) => /cannot pause containers/.test(l.msg));
    expect(warned).toEqual([expect.objectContaining({ host: 'p', msg: expect.stringMatching(/stopped when idle instead of paused/) as string })]);
    a.lost('test over');
    b.lost('test over');
  });

  it('a refusal about the container alone is not the host\'s', async () => {
    const calls = await engine(() => ({ status: 500, message: '"created" is not running, can\'t pause: container state improper' }));
    const h = host();
    const lines: string[] = [];
    const a = worker(h, 'c'.repeat(64), lines);
    await expect(a.pause()).rejects.toThrow(/state improper/);
    expect(h.pauseRefused).toBeNull();
    await expect(a.pause()).rejects.toThrow(/state improper/);
    expect(calls.pauses).toHaveLength(2);
    a.lost('test over');
  });
});
