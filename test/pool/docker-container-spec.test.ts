import { describe, expect, it } from 'vitest';
import { containerCreateBody } from '../../src/pool/docker/container-spec.js';
import { createLogFrameReader } from '../../src/pool/docker/log-frames.js';
import type { ContainerStartSpec } from '../../src/pool/driver.js';

const host = { name: 'gpu-a', url: 'unix:///var/run/docker.sock', gpus: ['0', '1'], gpuTypes: ['', ''], tls: null, gatewayUrl: null, network: 'bridge', sshConfig: null };
const spec = (over: Partial<ContainerStartSpec> = {}): ContainerStartSpec => ({
  workerId: 'sd-1a2b3c4d',
  endpointId: 'sd',
  image: 'acme/sd:1',
  env: { MODEL: 'x', RUNPOD_POD_ID: 'spoofed' },
  runpod: { endpointId: 'sd', workerId: 'sd-1a2b3c4d', apiKey: 'gk_secret', pingIntervalMs: 10_000 },
  ...over,
});
const ctx = { host, deviceIds: [] as string[], gatewayUrl: 'http://host.docker.internal:8080', hostGatewayAlias: true, instance: 'inst1', gateway: 'gw pid 1' };

describe('containerCreateBody', () => {
  it('keeps the image CMD, sets the RUNPOD_* env over the endpoint’s, labels, init, no restart, bounded logs', () => {
    const body = containerCreateBody(spec(), ctx);
    expect(body.Cmd).toBeUndefined();
    expect(body.Env).toEqual(expect.arrayContaining(['MODEL=x', 'RUNPOD_POD_ID=sd-1a2b3c4d', 'RUNPOD_AI_API_KEY=gk_secret', 'RUNPOD_WEBHOOK_GET_JOB=http://host.docker.internal:8080/v2/sd/job-take/$ID?']));
    expect(body.Env).not.toContain('RUNPOD_POD_ID=spoofed');
    expect(body.Labels).toEqual({ 'io.gantry.instance': 'inst1', 'io.gantry.endpoint': 'sd', 'io.gantry.worker': 'sd-1a2b3c4d', 'io.gantry.gateway': 'gw pid 1' });
    expect(body.HostConfig).toEqual({
      Init: true,
      NetworkMode: 'bridge',
      RestartPolicy: { Name: 'no' },
      AutoRemove: false,
      LogConfig: { Type: 'json-file', Config: { 'max-size': '10m', 'max-file': '2' } },
      SecurityOpt: ['no-new-privileges'],
      ExtraHosts: ['host.docker.internal:host-gateway'],
    });
  });

  it('turns the settings into a command, memory limit, GPU device request and binds', () => {
    const body = containerCreateBody(spec({ command: 'python -u handler.py', memoryMb: 512, volumes: ['/models:/models:ro'] }), { ...ctx, deviceIds: ['1'], hostGatewayAlias: false });
    expect(body.Cmd).toEqual(['/bin/sh', '-c', 'python -u handler.py']);
    expect(body.HostConfig).toMatchObject({
      Memory: 512 * 1024 * 1024,
      MemorySwap: 512 * 1024 * 1024,
      DeviceRequests: [{ Driver: 'nvidia', DeviceIDs: ['1'], Capabilities: [['gpu']] }],
      Binds: ['/models:/models:ro'],
    });
    expect((body.HostConfig as Record<string, unknown>).ExtraHosts).toBeUndefined();
    expect(containerCreateBody(spec({ command: ['python', '-u', 'h.py'] }), ctx).Cmd).toEqual(['python', '-u', 'h.py']);
  });
});

describe('createLogFrameReader', () => {
  const frame = (stream: 1 | 2, text: string | Buffer): Buffer => {
    const payload = typeof text === 'string' ? Buffer.from(text) : text;
    const header = Buffer.alloc(8);
    header[0] = stream;
    header.writeUInt32BE(payload.length, 4);
    return Buffer.concat([header, payload]);
  };

  it('splits the multiplexed stream into stdout and stderr, whatever the chunking, without breaking UTF-8', () => {
    const got: string[] = [];
    const read = createLogFrameReader((stream, text) => got.push(`${stream}:${text}`));
    const euro = Buffer.from('€'); // 3 bytes, sent in two frames
    const all = Buffer.concat([frame(1, 'hello\n'), frame(2, 'boom: '), frame(2, euro.subarray(0, 1)), frame(2, Buffer.concat([euro.subarray(1), Buffer.from('\n')]))]);
    for (let i = 0; i < all.length; i += 5) read(all.subarray(i, i + 5));
    expect(got.join('')).toBe('stdout:hello\nstderr:boom: stderr:€\n');
  });

  it('drops a stream whose frame announces more than a log line could be, instead of buffering it', () => {
    const got: string[] = [];
    const read = createLogFrameReader((stream, text) => got.push(`${stream}:${text}`));
    const huge = Buffer.alloc(8);
    huge[0] = 1;
    huge.writeUInt32BE(0xffffffff, 4);
    read(huge);
    read(frame(1, 'after\n'));
    expect(got).toEqual([expect.stringMatching(/^stderr:\n\[gantry: the engine's log stream broke/)]);
  });
});
