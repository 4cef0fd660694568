// The parts of a pull that are pure (pool/docker/image-pull.ts, prepull-hosts.ts): image
// references as the engine's create call wants them, the X-Registry-Auth header, progress by
// layer bytes from the engine's lines, and which hosts an image is prepulled to.
import { describe, expect, it } from 'vitest';
import { createPullProgress, parseImageRef, registryAuthHeader } from '../../src/pool/docker/image-pull.js';
import { couldRun } from '../../src/pool/docker/prepull-hosts.js';

describe('image pulls', () => {
  it('splits references: registry by the Docker rule, tag, digest over tag, latest by default', () => {
    expect(parseImageRef('127.0.0.1:5000/team/echo:1')).toEqual({ repository: '127.0.0.1:5000/team/echo', tag: '1', registry: '127.0.0.1:5000' });
    expect(parseImageRef('ghcr.io/acme/sd')).toEqual({ repository: 'ghcr.io/acme/sd', tag: 'latest', registry: 'ghcr.io' });
    expect(parseImageRef('localhost/x:2')).toEqual({ repository: 'localhost/x', tag: '2', registry: 'localhost' });
    expect(parseImageRef('acme/sd:1')).toEqual({ repository: 'acme/sd', tag: '1', registry: 'docker.io' });
    expect(parseImageRef('ubuntu')).toEqual({ repository: 'ubuntu', tag: 'latest', registry: 'docker.io' });
    const digest = `sha256:${'a'.repeat(64)}`;
    expect(parseImageRef(`reg:5000/n:1@${digest}`)).toEqual({ repository: 'reg:5000/n', tag: digest, registry: 'reg:5000' });
  });

  it('encodes the login as padded URL-safe base64 JSON with the server address', () => {
    const header = registryAuthHeader({ username: 'u', password: 'p?>~' }, '127.0.0.1:5000');
    expect(header).not.toMatch(/[+/]/);
    const json = JSON.parse(Buffer.from(header.replace(/-/g, '+').replace(/_/g, '/'), 'base64').toString('utf8')) as Record<string, string>;
    expect(json).toEqual({ username: 'u', password: 'p?>~', serveraddress: '127.0.0.1:5000' });
    expect(JSON.parse(Buffer.from(registryAuthHeader({ username: 'u', password: 'p' }, 'docker.io'), 'base64url').toString()).serveraddress).toBe('https://index.docker.io/v1/');
  });

  it('counts progress by the bytes of the layers being downloaded; layers already there count for nothing', () => {
    const p = createPullProgress();
    p.add({ status: 'Pulling from team/echo', id: '1' });
    p.add({ status: 'Already exists', id: 'base' });
    p.add({ status: 'Pulling fs layer', id: 'l1' });
    expect(p.percent()).toBeNull();
    p.add({ status: 'Downloading', id: 'l1', progressDetail: { current: 100, total: 1_000 } });
    p.add({ status: 'Downloading', id: 'l2', progressDetail: { current: 0, total: 3_000 } });
    expect(p.percent()).toBe(2);
    p.add({ status: 'Download complete', id: 'l1' });
    expect(p.percent()).toBe(25);
    p.add({ status: 'Downloading', id: 'l2', progressDetail: { current: 1_500, total: 3_000 } });
    expect(p.percent()).toBe(62);
    p.add({ status: 'Extracting', id: 'l2', progressDetail: { current: 10, total: 3_000 } });
    expect(p.percent()).toBe(100);
  });

  it('prepulls to the hosts that could ever run the worker', () => {
    const typed = { gpus: ['0', '1', '2'], gpuTypes: ['L4', 'L4', 'A100'] };
    expect(couldRun(typed, { image: 'x' })).toBe(true);
    expect(couldRun(typed, { image: 'x', gpus: 2 })).toBe(true);
    expect(couldRun(typed, { image: 'x', gpus: 2, gpuTypes: ['A100'] })).toBe(false);
    expect(couldRun(typed, { image: 'x', gpus: 1, gpuTypes: ['H100', 'A100'] })).toBe(true);
    expect(couldRun(typed, { image: 'x', gpus: 3 })).toBe(false);
    expect(couldRun(typed, { image: 'x', gpus: ['2'] })).toBe(true);
    expect(couldRun(typed, { image: 'x', gpus: ['3'] })).toBe(false);
    expect(couldRun({ gpus: [], gpuTypes: [] }, { image: 'x', gpus: 1 })).toBe(false);
  });
});
