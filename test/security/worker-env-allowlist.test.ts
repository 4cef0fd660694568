// Issue 9, item 14: pool workers start from an allow-list environment — their endpoint's
// worker.env, PATH, HOME, the locale and time zone, and the RUNPOD_* set — never the gateway's
// other variables (GANTRY_S3_*, PGPASSWORD, AWS_*, ...). A real worker process prints its
// environment; the test reads it through the admin API's worker log.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { eventually, startTestGantry, type TestGantry } from '../helpers/gantry.js';
import { call, uniqueId } from '../http/http-helpers.js';
import { workerProcessEnv } from '../../src/pool/local-process-driver.js';

const SECRETS = { GANTRY_S3_SECRET_ACCESS_KEY: 's3-secret-value', PGPASSWORD: 'pg-secret-value', AWS_SECRET_ACCESS_KEY: 'aws-secret-value', SOME_TOKEN: 'token-value' };

describe('the environment of pool workers', () => {
  let t: TestGantry;
  const saved: Record<string, string | undefined> = {};

  beforeAll(async () => {
    for (const [k, v] of Object.entries(SECRETS)) {
      saved[k] = process.env[k];
      process.env[k] = v;
    }
    t = await startTestGantry({ autoscalerIntervalMs: 100 });
  });
  afterAll(async () => {
    await t?.close();
    for (const [k, v] of Object.entries(saved)) {
      if (v === undefined) delete process.env[k];
      else process.env[k] = v;
    }
  });

  it('keeps only the allow-list of the gateway’s environment', () => {
    const env = workerProcessEnv(
      { PATH: '/bin', HOME: '/h', LANG: 'C.UTF-8', LC_ALL: 'C', TZ: 'UTC', ...SECRETS, RUNPOD_POD_ID: 'inherited', GANTRY_ADMIN_KEY: 'admin' },
      { env: { RUNPOD_POD_ID: 'w1', MODEL: 'm' } },
    );
    expect(env).toEqual({ PATH: '/bin', HOME: '/h', LANG: 'C.UTF-8', LC_ALL: 'C', TZ: 'UTC', RUNPOD_POD_ID: 'w1', MODEL: 'm' });
  });

  it('a real pool worker sees its worker.env, PATH, HOME and RUNPOD_*, and none of the gateway’s secrets', async () => {
    const id = uniqueId('envdump');
    await t.createEndpoint(id, { workersMin: 1, workersMax: 1, worker: { command: 'env; echo ENV-DONE; exec sleep 60', env: { MINE: 'yes' } } });
    const lines = await eventually(
      async () => {
        const workers = (await call(t.url, 'GET', `/admin/v1/endpoints/${id}/workers`, { key: t.adminKey })).json.workers as { id: string }[] | undefined;
        const worker = workers?.[0];
        if (!worker) return undefined;
        const log = await call(t.url, 'GET', `/admin/v1/endpoints/${id}/workers/${worker.id}/logs?lines=500`, { key: t.adminKey });
        const text = ((log.json?.lines ?? []) as { line: string }[]).map((l) => l.line);
        return text.includes('ENV-DONE') ? text : undefined;
      },
      20_000,
      'the worker to print its environment',
    );
    const names = lines.filter((l) => /^[A-Za-z_][A-Za-z0-9_]*=/.test(l)).map((l) => l.slice(0, l.indexOf('=')));
    expect(lines).toContain('MINE=yes');
    expect(names).toEqual(expect.arrayContaining(['PATH', 'RUNPOD_POD_ID', 'RUNPOD_AI_API_KEY', 'RUNPOD_WEBHOOK_GET_JOB']));
    for (const [name, value] of Object.entries(SECRETS)) {
      expect(names).not.toContain(name);
      expect(lines.join('\n')).not.toContain(value);
    }
    const allowed = /^(PATH|HOME|USER|LOGNAME|SHELL|LANG|LANGUAGE|LC_[A-Z]+|TZ|TMPDIR|LD_LIBRARY_PATH|CUDA_VISIBLE_DEVICES|NVIDIA_VISIBLE_DEVICES|CUDA_DEVICE_ORDER|PWD|SHLVL|_|OLDPWD|MINE|RUNPOD_[A-Z_]+)$/;
    expect(names.filter((n) => !allowed.test(n))).toEqual([]);
  }, 30_000);
});
