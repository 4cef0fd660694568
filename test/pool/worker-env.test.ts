// What a process worker inherits from the gateway (src/pool/worker-env.ts): the allow-list,
// which includes the GPU visibility settings an operator starts the gateway with
// (CUDA_VISIBLE_DEVICES, NVIDIA_VISIBLE_DEVICES, CUDA_DEVICE_ORDER; docs/models.md, "Memory and
// devices"), and never the gateway's secrets. A real worker process prints its environment.
import { describe, expect, it } from 'vitest';
import { createLocalProcessDriver } from '../../src/pool/local-process-driver.js';
import { inheritedWorkerEnv } from '../../src/pool/worker-env.js';

const GPU = { CUDA_VISIBLE_DEVICES: '2,3', NVIDIA_VISIBLE_DEVICES: 'GPU-5f1c,GPU-77aa', CUDA_DEVICE_ORDER: 'PCI_BUS_ID' };
const SECRETS = { GANTRY_S3_SECRET_ACCESS_KEY: 's3-secret-value', PGPASSWORD: 'pg-secret-value', DATABASE_URL: 'postgres://u:pw@db/x', GANTRY_ADMIN_KEY: 'admin-key-value' };

describe('the environment a process worker inherits', () => {
  it('keeps the GPU visibility settings and drops the secrets', () => {
    expect(inheritedWorkerEnv({ PATH: '/bin', ...GPU, ...SECRETS })).toEqual({ PATH: '/bin', ...GPU });
  });

  it('a real process worker sees CUDA_VISIBLE_DEVICES, NVIDIA_VISIBLE_DEVICES and CUDA_DEVICE_ORDER, and none of the secrets', async () => {
    const driver = createLocalProcessDriver({ baseEnv: { PATH: process.env.PATH, ...GPU, ...SECRETS } });
    let out = '';
    const handle = await driver.start({ workerId: 'w-env', endpointId: 'ep', command: 'env', env: { RUNPOD_POD_ID: 'w-env' } }, (_stream, text) => void (out += text));
    expect(await handle.exited).toEqual({ code: 0, signal: null });
    const lines = out.split('\n');
    for (const [name, value] of Object.entries(GPU)) expect(lines).toContain(`${name}=${value}`);
    expect(lines).toContain('RUNPOD_POD_ID=w-env');
    for (const [name, value] of Object.entries(SECRETS)) {
      expect(out).not.toContain(name);
      expect(out).not.toContain(value);
    }
  });
});
