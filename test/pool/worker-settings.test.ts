import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestGantry, type TestGantry } from '../helpers/gantry.js';

describe('endpoint worker settings: a command or an image', () => {
  let t: TestGantry;
  beforeAll(async () => {
    // No Docker host answers here: settings are checked without one.
    t = await startTestGantry({ docker: { hosts: [], defaultHost: false, pingIntervalMs: 1_000, downAfterMs: 5_000, instance: 'settings-test' } });
  });
  afterAll(async () => {
    await t.close();
  });

  const post = async (body: unknown): Promise<{ status: number; json: Record<string, unknown> }> => {
    const res = await fetch(`${t.url}/admin/v1/endpoints`, { method: 'POST', headers: { authorization: `Bearer ${t.adminKey}`, 'content-type': 'application/json' }, body: JSON.stringify(body) });
    return { status: res.status, json: (await res.json()) as Record<string, unknown> };
  };

  it('stores and shows an image worker as given', async () => {
    const worker = { image: 'registry.example.com:5000/acme/sd-worker:1.2', command: ['python', '-u', 'handler.py'], env: { HF_HOME: '/cache' }, gpus: 1, memoryMb: 16_384, volumes: ['/srv/models:/models:ro', 'hf-cache:/cache'] };
    const { status, json } = await post({ id: 'sd', worker });
    expect(status).toBe(200);
    expect(json.worker).toEqual(worker);
    expect((await post({ id: 'pinned', worker: { image: 'acme/w@sha256:' + 'a'.repeat(64), gpus: ['0', 'GPU-8f2a'] } })).status).toBe(200);
    const typed = await post({ id: 'typed', worker: { image: 'acme/w:1', gpus: 2, gpuTypes: ['A100-80GB', 'L4'] } });
    expect(typed.json.worker).toEqual({ image: 'acme/w:1', gpus: 2, gpuTypes: ['A100-80GB', 'L4'] });
    expect((await post({ id: 'shell', worker: { image: 'acme/w', command: 'python -u handler.py' } })).status).toBe(200);
  });

  it('refuses bad image settings with 400 naming the field, and stores nothing', async () => {
    const bad: [Record<string, unknown>, string][] = [
      [{ image: '' }, 'worker.image'],
      [{ image: 'Acme/Upper:1' }, 'worker.image'],
      [{ image: 'acme/w', cwd: '/app' }, 'worker.cwd'],
      [{ image: 'acme/w', command: [] }, 'worker.command'],
      [{ image: 'acme/w', command: ['python', 3] }, 'worker.command'],
      [{ image: 'acme/w', gpus: 1.5 }, 'worker.gpus'],
      [{ image: 'acme/w', gpus: 65 }, 'worker.gpus'],
      [{ image: 'acme/w', gpus: ['0', '0'] }, 'worker.gpus'],
      [{ image: 'acme/w', memoryMb: 2 }, 'worker.memoryMb'],
      [{ image: 'acme/w', volumes: ['./models:/x'] }, 'worker.volumes[0]'],
      [{ image: 'acme/w', volumes: ['/a:/b', '/a:relative'] }, 'worker.volumes[1]'],
      [{ image: 'acme/w', env: { 'A=B': 'x' } }, 'worker.env.A=B'],
      [{ image: 'acme/w', env: { A: 1 } }, 'worker.env.A'],
      [{ command: 'x', gpus: 1 }, 'worker.gpus'],
      [{ image: 'acme/w', gpus: 1, gpuTypes: [] }, 'worker.gpuTypes'],
      [{ image: 'acme/w', gpus: 1, gpuTypes: ['L4', 'T4', 'A10', 'A100'] }, 'worker.gpuTypes'],
      [{ image: 'acme/w', gpus: 1, gpuTypes: ['L4', 'L4'] }, 'worker.gpuTypes'],
      [{ image: 'acme/w', gpus: 1, gpuTypes: ['L4!'] }, 'worker.gpuTypes'],
      [{ image: 'acme/w', gpuTypes: ['L4'] }, 'worker.gpuTypes'],
      [{ image: 'acme/w', gpus: ['0'], gpuTypes: ['L4'] }, 'worker.gpuTypes'],
    ];
    for (const [worker, field] of bad) {
      const { status, json } = await post({ id: 'bad', worker });
      expect({ worker, status, code: json.code, field: json.field }).toEqual({ worker, status: 400, code: 'INVALID_PARAMETER', field });
      expect(json.error).toMatch(new RegExp(`^Invalid parameter: ${field.replace(/[[\]]/g, '\\$&')} `));
    }
    const res = await fetch(`${t.url}/admin/v1/endpoints/bad`, { headers: { authorization: `Bearer ${t.adminKey}` } });
    expect(res.status).toBe(404);
  });
});
