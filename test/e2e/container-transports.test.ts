// The remote transports, against engine b of test/fixtures/docker/engines.sh: tcp:// with TLS
// and a client certificate (it also listens on tcp://127.0.0.1:23762 with --tlsverify), and
// ssh:// (an sshd of engines.sh on 127.0.0.1:23763 runs `docker system dial-stdio`).
import { randomBytes } from 'node:crypto';
import { existsSync } from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { DockerHostConfig } from '../../src/config/docker-config.js';
import type { PoolHostInfo } from '../../src/jobs/pool-view.js';
import { createEngineClient, EngineError } from '../../src/pool/docker/engine-client.js';
import { containersOf, findTestEngines, type TestEngine } from '../fixtures/docker/test-engines.js';
import { ensureWorkerImage } from '../fixtures/docker/test-images.js';
import { eventually, startTestGantry, type TestGantry } from '../helpers/gantry.js';

const TLS = '/run/gantry-test-docker/tls';
const SSH = '/run/gantry-test-docker/ssh';
const URL_SSH = 'ssh://root@127.0.0.1:23763/run/gantry-test-docker/b/docker.sock';
const URL_TLS = 'tcp://127.0.0.1:23762';
const engines = await findTestEngines();
const b = engines.find((e) => e.url.includes('/run/gantry-test-docker/b/'));
const ready = existsSync(`${TLS}/client-key.pem`) && b !== undefined;
if (!ready && process.env.CI === 'true') throw new Error('the TLS engine of test/fixtures/docker/engines.sh is missing: run engines.sh start');

const tlsHost = (tls: Partial<DockerHostConfig['tls']> = {}): DockerHostConfig => ({
  name: 'tls',
  url: URL_TLS,
  gpus: [],
  gpuTypes: [],
  tls: { ca: `${TLS}/ca.pem`, cert: `${TLS}/client.pem`, key: `${TLS}/client-key.pem`, ...tls },
  gatewayUrl: null,
  network: 'bridge',
  sshConfig: null,
});

describe.skipIf(!ready)('a Docker host over tcp:// with TLS', { timeout: 120_000 }, () => {
  const engine = b as TestEngine;
  const instance = `test-${randomBytes(4).toString('hex')}`;
  let t: TestGantry;
  let image: string;

  beforeAll(async () => {
    image = await ensureWorkerImage(engine); // the same engine, by its socket
    t = await startTestGantry({
      host: '0.0.0.0',
      autoscalerIntervalMs: 50,
      workerRestartBackoffMs: 300,
      docker: { hosts: [tlsHost()], defaultHost: false, pingIntervalMs: 1_000, downAfterMs: 10_000, instance },
    });
  }, 300_000);

  afterAll(async () => {
    await t?.close();
  });

  it('answers with the client certificate, and refuses without it or with another CA', async () => {
    const good = createEngineClient(tlsHost());
    expect(await good.call('GET', '/_ping')).toBe('OK');
    good.close();
    // Server-verified TLS without a client certificate: the engine refuses the handshake.
    const noClient = createEngineClient(tlsHost({ cert: `${TLS}/server.pem`, key: `${TLS}/server-key.pem` }));
    await expect(noClient.call('GET', '/_ping', { timeoutMs: 5_000 })).rejects.toThrow();
    noClient.close();
    // A CA that did not sign the server's certificate: the client refuses the server.
    const wrongCa = createEngineClient(tlsHost({ ca: `${TLS}/client.pem` }));
    await expect(wrongCa.call('GET', '/_ping', { timeoutMs: 5_000 })).rejects.toThrow(/certificate/);
    wrongCa.close();
    // An error status comes back as an EngineError with the engine's message.
    const client = createEngineClient(tlsHost());
    await expect(client.call('GET', '/containers/nope-nope/json')).rejects.toThrow(EngineError);
    client.close();
    expect(() => createEngineClient(tlsHost({ key: `${TLS}/missing.pem` }))).toThrow(/Docker host tls: cannot read its TLS key/);
  });

  it('runs a worker container there, end to end', async () => {
    await t.createEndpoint('tls', { workersMin: 1, idleTimeout: 60, worker: { image } });
    const res = await fetch(`${t.url}/v2/tls/runsync`, { method: 'POST', headers: { authorization: `Bearer ${t.adminKey}`, 'content-type': 'application/json' }, body: JSON.stringify({ input: { over: 'tls' } }) });
    expect(await res.json()).toMatchObject({ status: 'COMPLETED', output: { over: 'tls' } });
    const listing = (await (await fetch(`${t.url}/admin/v1/endpoints/tls/workers`, { headers: { authorization: `Bearer ${t.adminKey}` } })).json()) as { hosts: PoolHostInfo[] };
    expect(listing.hosts).toEqual([expect.objectContaining({ name: 'tls', url: URL_TLS, state: 'up', workers: 1 })]);
    expect(await containersOf(engine, instance)).toHaveLength(1);
    await fetch(`${t.url}/admin/v1/endpoints/tls`, { method: 'DELETE', headers: { authorization: `Bearer ${t.adminKey}` } });
    await eventually(async () => ((await containersOf(engine, instance)).length === 0 ? true : undefined), 30_000, 'the container to go');
  });
});

const sshReady = existsSync(`${SSH}/ssh_config`) && b !== undefined;
if (!sshReady && process.env.CI === 'true') throw new Error('the sshd of test/fixtures/docker/engines.sh is missing: install openssh-server, run engines.sh start');
const sshHost: DockerHostConfig = { name: 'ssh', url: URL_SSH, gpus: [], gpuTypes: [], tls: null, gatewayUrl: null, network: 'bridge', sshConfig: `${SSH}/ssh_config` };

// sshd is there where openssh-server is installed (.ci/run installs it).
describe.skipIf(!sshReady)('a Docker host over ssh://', { timeout: 120_000 }, () => {
  const engine = b as TestEngine;
  const instance = `test-${randomBytes(4).toString('hex')}`;
  let t: TestGantry;
  let image: string;

  beforeAll(async () => {
    image = await ensureWorkerImage(engine);
    t = await startTestGantry({
      host: '0.0.0.0',
      autoscalerIntervalMs: 50,
      workerRestartBackoffMs: 300,
      docker: { hosts: [sshHost], defaultHost: false, pingIntervalMs: 1_000, downAfterMs: 10_000, instance },
    });
  }, 300_000);

  afterAll(async () => {
    await t?.close();
  });

  it('reaches the engine through `docker system dial-stdio`, and says why when ssh fails', async () => {
    const client = createEngineClient(sshHost);
    expect(await client.call('GET', '/_ping')).toBe('OK');
    expect(((await client.call('GET', '/version')) as { ApiVersion: string }).ApiVersion).toMatch(/^1\./);
    client.close();
    const wrongPort = createEngineClient({ ...sshHost, url: 'ssh://root@127.0.0.1:1/run/gantry-test-docker/b/docker.sock' });
    await expect(wrongPort.call('GET', '/_ping', { timeoutMs: 10_000 })).rejects.toThrow(/ssh exited with code 255/);
  });

  it('runs a worker container there, logs and all', async () => {
    await t.createEndpoint('ssh', { workersMin: 1, idleTimeout: 60, worker: { image } });
    const res = await fetch(`${t.url}/v2/ssh/runsync`, { method: 'POST', headers: { authorization: `Bearer ${t.adminKey}`, 'content-type': 'application/json' }, body: JSON.stringify({ input: { over: 'ssh' } }) });
    expect(await res.json()).toMatchObject({ status: 'COMPLETED', output: { over: 'ssh' } });
    const [worker] = t.gantry.gateway.autoscaler.view.workers('ssh') ?? [];
    // The log stream is its own ssh channel: its lines may come a little after the job.
    const started = (): true | undefined => ((t.gantry.gateway.autoscaler.view.logs('ssh', worker?.id ?? '', 50) ?? []).some((l) => l.line.includes('Starting Serverless Worker')) ? true : undefined);
    await eventually(async () => started(), 10_000, 'the worker output over ssh');
    await fetch(`${t.url}/admin/v1/endpoints/ssh`, { method: 'DELETE', headers: { authorization: `Bearer ${t.adminKey}` } });
    await eventually(async () => ((await containersOf(engine, instance)).length === 0 ? true : undefined), 30_000, 'the container to go');
  });
});
