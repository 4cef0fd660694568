import { describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/config/config.js';
import { dockerInstance, loadDockerConfig, parseDockerHosts } from '../../src/config/docker-config.js';

const hosts = (value: unknown): string => JSON.stringify(value);

describe('Docker settings', () => {
  it('reads hosts with GPU counts or ids, TLS files for tcp, a gateway URL and a network', () => {
    const parsed = parseDockerHosts(
      hosts([
        { name: 'gpu-a', url: 'unix:///var/run/docker.sock', gpus: 2 },
        { name: 'gpu-b', url: 'tcp://10.0.0.7:2376', gpus: ['GPU-1f2e', 'GPU-3c4d'], tls: { ca: '/etc/g/ca.pem', cert: '/etc/g/cert.pem', key: '/etc/g/key.pem' }, gatewayUrl: 'http://10.0.0.2:8080/' },
        { name: 'cpu', url: 'ssh://gantry@10.0.0.8:2222/run/podman/podman.sock', network: 'workers' },
      ]),
    );
    expect(parsed).toEqual([
      { name: 'gpu-a', url: 'unix:///var/run/docker.sock', gpus: ['0', '1'], gpuTypes: ['', ''], tls: null, gatewayUrl: null, network: 'bridge', sshConfig: null },
      { name: 'gpu-b', url: 'tcp://10.0.0.7:2376', gpus: ['GPU-1f2e', 'GPU-3c4d'], gpuTypes: ['', ''], tls: { ca: '/etc/g/ca.pem', cert: '/etc/g/cert.pem', key: '/etc/g/key.pem' }, gatewayUrl: 'http://10.0.0.2:8080', network: 'bridge', sshConfig: null },
      { name: 'cpu', url: 'ssh://gantry@10.0.0.8:2222/run/podman/podman.sock', gpus: [], gpuTypes: [], tls: null, gatewayUrl: null, network: 'workers', sshConfig: null },
    ]);
  });

  it('reads GPU models: per model a count (ids follow each other from 0) or device ids', () => {
    const [h] = parseDockerHosts(hosts([{ name: 'mixed', url: 'unix:///s', gpus: { L4: 2, 'A100-80GB': 3, 'RTX 4090': ['GPU-aa'] } }]));
    expect(h).toMatchObject({ gpus: ['0', '1', '2', '3', '4', 'GPU-aa'], gpuTypes: ['L4', 'L4', 'A100-80GB', 'A100-80GB', 'A100-80GB', 'RTX 4090'] });
    const bad: [unknown, RegExp][] = [
      [{ 'L4!': 1 }, /\[0\]\.gpus has an invalid GPU model name "L4!"/],
      [{ L4: -2 }, /\[0\]\.gpus\.L4 must be an integer from 0 to 64/],
      [{ L4: 40, T4: 40 }, /\[0\]\.gpus has more than 64 devices/],
      [{ L4: ['1'], T4: 2 }, /\[0\]\.gpus lists a device id twice/],
    ];
    for (const [gpus, message] of bad) expect(() => parseDockerHosts(hosts([{ name: 'a', url: 'unix:///s', gpus }]))).toThrow(message);
  });

  it('refuses a bad host list naming the host and field', () => {
    const bad: [unknown, RegExp][] = [
      ['nope', /GANTRY_DOCKER_HOSTS: expected a JSON array/],
      [[], /GANTRY_DOCKER_HOSTS: must be a JSON array of 1 to 256 hosts/],
      [[{ name: 'a', url: 'http://x:1' }], /\[0\]\.url has scheme http:/],
      [[{ name: 'a', url: 'unix://relative/sock' }], /\[0\]\.url must be unix:\/\/\/absolute/],
      [[{ name: 'a', url: 'tcp://10.0.0.1:2375' }], /\[0\]\.tls is required for a tcp:\/\/ host/],
      [[{ name: 'a', url: 'tcp://10.0.0.1' , tls: {} }], /\[0\]\.url needs a port/],
      [[{ name: 'a', url: 'unix:///s', tls: { ca: 'x', cert: 'y', key: 'z' } }], /\[0\]\.tls applies to tcp:\/\/ hosts only/],
      [[{ name: 'a', url: 'ssh://u:pw@h' }], /\[0\]\.url must not carry a password/],
      [[{ name: 'a', url: 'unix:///s', gpus: -1 }], /\[0\]\.gpus must be an integer from 0 to 64/],
      [[{ name: 'a', url: 'unix:///s', gpus: ['0', '0'] }], /\[0\]\.gpus lists a device id twice/],
      [[{ name: 'a', url: 'unix:///s' }, { name: 'a', url: 'unix:///t' }], /\[1\]\.name repeats "a"/],
      [[{ name: 'a', url: 'unix:///s', gpu: 1 }], /\[0\]\.gpu is not a known field/],
      [[{ name: 'a', url: 'unix:///s', gatewayUrl: 'ftp://x' }], /\[0\]\.gatewayUrl must be an http/],
    ];
    for (const [value, message] of bad) expect(() => parseDockerHosts(typeof value === 'string' ? value : hosts(value))).toThrow(message);
  });

  it('defaults to one local host without GPUs (DOCKER_HOST when set); other settings fail naming the variable', () => {
    expect(loadDockerConfig({})).toMatchObject({ defaultHost: true, hosts: [{ name: 'local', url: 'unix:///var/run/docker.sock', gpus: [] }], pingIntervalMs: 5_000, downAfterMs: 15_000 });
    expect(loadDockerConfig({ DOCKER_HOST: 'unix:///run/user/1000/podman/podman.sock' }).hosts[0]?.url).toBe('unix:///run/user/1000/podman/podman.sock');
    expect(() => loadDockerConfig({ DOCKER_HOST: 'tcp://1.2.3.4:2375' })).toThrow(/DOCKER_HOST.*use unix:\/\/ or ssh:\/\//);
    expect(() => loadDockerConfig({ GANTRY_DOCKER_PING_MS: '5' })).toThrow(/GANTRY_DOCKER_PING_MS="5"/);
    expect(() => loadDockerConfig({ GANTRY_DOCKER_INSTANCE: 'a b' })).toThrow(/GANTRY_DOCKER_INSTANCE/);
  });

  it('labels an installation: the same for every gateway of one store, different for another', () => {
    const pg = dockerInstance({ DATABASE_URL: 'postgres://u:secret@db:5432/gantry' }, '/a');
    expect(pg).toMatch(/^[0-9a-f]{16}$/);
    expect(dockerInstance({ DATABASE_URL: 'postgres://u:other@db:5432/gantry' }, '/b')).toBe(pg); // the password does not count
    expect(dockerInstance({ DATABASE_URL: 'postgres://u:secret@db:5432/other' }, '/a')).not.toBe(pg);
    expect(dockerInstance({}, '/srv/gantry/data')).not.toBe(dockerInstance({}, '/srv/other/data'));
    // loadConfig fills it in for the final data folder, unless GANTRY_DOCKER_INSTANCE names it.
    expect(loadConfig({}, { dataDir: '/srv/x' }).docker.instance).toBe(dockerInstance({}, '/srv/x'));
    expect(loadConfig({ GANTRY_DOCKER_INSTANCE: 'prod' }).docker.instance).toBe('prod');
  });
});
