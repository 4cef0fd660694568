// createDockerDriver's check of the host list (docs/scaling.md, "Several Docker hosts"): a
// host not on the gateway's machine needs a gatewayUrl or GANTRY_PUBLIC_URL its containers can
// reach, else the driver (and so the gateway's start) is refused. No engine is called.
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pino from 'pino';
import { afterAll, describe, expect, it } from 'vitest';
import { DOCKER_DEFAULTS, type DockerHostConfig } from '../../src/config/docker-config.js';
import { createDockerDriver } from '../../src/pool/docker/docker-driver.js';
import { systemClock } from '../../src/util/clock.js';

// The engine client reads the TLS files when the driver is made (and parses them only to connect).
const dir = mkdtempSync(join(tmpdir(), 'gantry-driver-'));
const TLS = Object.fromEntries((['ca', 'cert', 'key'] as const).map((f) => [f, join(dir, `${f}.pem`)])) as { ca: string; cert: string; key: string };
for (const file of Object.values(TLS)) writeFileSync(file, 'not read here\n');
afterAll(() => rmSync(dir, { recursive: true, force: true }));

function host(name: string, url: string, extra: Partial<DockerHostConfig> = {}): DockerHostConfig {
  return { name, url, gpus: [], gpuTypes: [], tls: url.startsWith('tcp:') ? TLS : null, gatewayUrl: null, network: 'bridge', sshConfig: null, ...extra };
}

const driverFor = (hosts: DockerHostConfig[], publicUrl: string | null = null) =>
  createDockerDriver({
    config: { ...DOCKER_DEFAULTS, hosts, defaultHost: false },
    instance: 'test-driver',
    publicUrl,
    localUrl: () => 'http://127.0.0.1:8080',
    logger: pino({ level: 'silent' }),
    clock: systemClock,
  });

describe('createDockerDriver', () => {
  it('refuses a host not on this machine without a gatewayUrl or GANTRY_PUBLIC_URL, naming it', () => {
    const remote = [
      host('gpu-b', 'tcp://10.0.0.7:2376'),
      host('cpu-1', 'ssh://gantry@10.0.0.9'),
      host('named', 'tcp://docker.example.com:2376'),
    ];
    for (const h of remote) {
      expect(() => driverFor([host('local', 'unix:///var/run/docker.sock'), h])).toThrow(
        `Docker host ${h.name} (${h.url}) is not on this machine: give it a gatewayUrl in GANTRY_DOCKER_HOSTS, or set GANTRY_PUBLIC_URL, so its containers can reach the gateway`,
      );
    }
  });

  it('takes such a host with its own gatewayUrl, or with GANTRY_PUBLIC_URL; hosts on this machine need neither', () => {
    const accepted = [
      driverFor([host('gpu-b', 'tcp://10.0.0.7:2376', { gatewayUrl: 'http://10.0.0.2:8080' })]),
      driverFor([host('gpu-b', 'tcp://10.0.0.7:2376'), host('cpu-1', 'ssh://gantry@10.0.0.9')], 'https://gantry.example.com'),
      driverFor([host('a', 'unix:///run/docker.sock'), host('b', 'tcp://127.0.0.1:2376'), host('c', 'ssh://gantry@localhost'), host('d', 'tcp://[::1]:2376')]),
    ];
    for (const driver of accepted) {
      expect(driver.hosts().map((h) => h.state)).not.toContain('down');
      driver.close();
    }
  });
});
