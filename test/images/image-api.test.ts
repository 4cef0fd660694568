/**
 * End to end through the gateway: the public image endpoints with their image worker processes
 * (the real pipeline on the tiny models), the local object store's signed URLs, usage records.
 * Needs `npm run build`: with image workers on, the test gateway runs from dist/ (its pool spawns
 * dist/src/images/worker-main.js).
 */
import sharp from 'sharp';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { IMAGE_DEFAULTS } from '../../src/config/image-config.js';
import { eventually, startTestGantry, type TestGantry } from '../helpers/gantry.js';

let t: TestGantry;
let key: string;
const Q = 'image-quality';
const F = 'image-fast';

interface JobBody {
  id: string;
  status: string;
  workerId?: string;
  output?: { image_url: string; cost: number; seed: number; width: number; height: number; format: string; megapixels: number };
  error?: string;
  code?: string;
}

async function post(path: string, body: unknown, auth = key): Promise<{ status: number; body: JobBody }> {
  const res = await fetch(`${t.url}${path}`, { method: 'POST', headers: { authorization: `Bearer ${auth}`, 'content-type': 'application/json' }, body: JSON.stringify(body) });
  return { status: res.status, body: (await res.json()) as JobBody };
}

async function runsync(endpoint: string, input: Record<string, unknown>, extra: Record<string, unknown> = {}): Promise<JobBody> {
  const { status, body } = await post(`/v2/${endpoint}/runsync`, { input, ...extra });
  expect(status, JSON.stringify(body)).toBe(200);
  return body;
}

async function download(url: string): Promise<Buffer> {
  const res = await fetch(url);
  expect(res.status).toBe(200);
  return Buffer.from(await res.arrayBuffer());
}

async function requestCount(endpoint: string): Promise<number> {
  const res = await fetch(`${t.url}/v2/${endpoint}/requests`, { headers: { authorization: key } });
  return ((await res.json()) as { requests: unknown[] }).requests.length;
}

beforeAll(async () => {
  t = await startTestGantry({ images: { ...IMAGE_DEFAULTS, workers: true } });
  key = await t.createKey(['run', 'read']);
});

afterAll(async () => {
  await t?.close();
});

describe('public image endpoints', () => {
  it('exist on a fresh install and generate with the defaults (quality: 1024², jpeg, 28 steps)', async () => {
    const endpoints = await fetch(`${t.url}/admin/v1/endpoints`, { headers: { authorization: `Bearer ${t.adminKey}` } });
    const ids = ((await endpoints.json()) as { endpoints: { id: string }[] }).endpoints.map((e) => e.id);
    expect(ids).toEqual(expect.arrayContaining([Q, F]));

    const job = await runsync(Q, { prompt: 'a lighthouse at dusk' });
    expect(job.status).toBe('COMPLETED');
    expect(job.workerId).toMatch(/^image-quality-/);
    expect(job.output).toMatchObject({ cost: 0.02097152, width: 1024, height: 1024, format: 'jpeg', megapixels: 1.048576 });
    expect(Number.isSafeInteger(job.output?.seed)).toBe(true);
    expect(job.output?.seed).toBeGreaterThanOrEqual(0);
    const meta = await sharp(await download(job.output!.image_url)).metadata();
    expect(meta).toMatchObject({ format: 'jpeg', width: 1024, height: 1024 });
  });

  it('fast model defaults, png, non-square sizes; the image URL decodes to the requested size', async () => {
    const job = await runsync(F, { prompt: 'a red kite', width: 1536, height: 256, image_format: 'png', seed: 7 });
    expect(job.output).toMatchObject({ cost: 0.0009437184, width: 1536, height: 256, format: 'png', seed: 7 });
    expect(job.workerId).toMatch(/^image-fast-/);
    const meta = await sharp(await download(job.output!.image_url)).metadata();
    expect(meta).toMatchObject({ format: 'png', width: 1536, height: 256 });
    const quality = await runsync(Q, { prompt: 'a red kite', width: 1536, height: 256, num_inference_steps: 2 });
    expect(quality.output?.cost).toBe(0.00786432); // not 0.0078643201
  });

  it('same seed → identical bytes; the seed used is reported', async () => {
    const input = { prompt: 'tidal pools', width: 256, height: 320, num_inference_steps: 2, seed: 1234 };
    const [a, b] = [await runsync(F, input), await runsync(F, input)];
    expect(a.output?.seed).toBe(1234);
    expect((await download(a.output!.image_url)).equals(await download(b.output!.image_url))).toBe(true);
    const random = await runsync(F, { ...input, seed: -1 });
    expect(random.output?.seed).not.toBe(-1);
  });

  it('refuses out-of-range input with 400 naming the field: no job created, nothing charged', async () => {
    const base = { prompt: 'p', width: 256, height: 256, num_inference_steps: 1 };
    const before = await requestCount(Q);
    const bad: [string, Record<string, unknown>, RegExp][] = [
      [Q, { ...base, width: 192 }, /^Invalid parameter: width must be from 256 to 1536$/],
      [Q, { ...base, width: 1600 }, /^Invalid parameter: width /],
      [Q, { ...base, width: 288 }, /^Invalid parameter: width must be divisible by 64$/],
      [Q, { ...base, height: 192 }, /^Invalid parameter: height /],
      [Q, { ...base, height: 1600 }, /^Invalid parameter: height /],
      [Q, { ...base, height: 1000 }, /^Invalid parameter: height must be divisible by 64$/],
      [Q, { ...base, width: 256.5 }, /^Invalid parameter: width must be an integer$/],
      [Q, { ...base, num_inference_steps: 0 }, /^Invalid parameter: num_inference_steps must be from 1 to 50$/],
      [Q, { ...base, num_inference_steps: 51 }, /num_inference_steps/],
      [F, { ...base, num_inference_steps: 9 }, /^Invalid parameter: num_inference_steps must be from 1 to 8$/],
      [F, { ...base, num_inference_steps: 0 }, /num_inference_steps/],
      [Q, { ...base, guidance: -0.1 }, /^Invalid parameter: guidance must be from 0 to 10$/],
      [Q, { ...base, guidance: 10.01 }, /guidance/],
      [Q, { ...base, guidance: '5' }, /guidance must be a number/],
      [Q, { ...base, seed: 1.5 }, /^Invalid parameter: seed /],
      [Q, { ...base, seed: '42' }, /seed/],
      [Q, { ...base, image_format: 'gif' }, /^Invalid parameter: image_format must be jpeg or png$/],
      [Q, { ...base, prompt: undefined }, /^Invalid parameter: prompt is required$/],
      [Q, { ...base, prompt: 42 }, /prompt must be a string/],
      [Q, { ...base, negative_prompt: 1 }, /negative_prompt must be a string/],
      [Q, { ...base, steps: 4 }, /^Invalid parameter: steps is not a known field/],
    ];
    for (const [endpoint, input, message] of bad) {
      for (const op of ['run', 'runsync']) {
        const { status, body } = await post(`/v2/${endpoint}/${op}`, { input });
        expect(status, JSON.stringify(input)).toBe(400);
        expect(body.code).toBe('INVALID_PARAMETER');
        expect(body.error).toMatch(message);
      }
    }
    expect(await requestCount(Q)).toBe(before);
  });

  it('accepts every bound just inside', async () => {
    const base = { prompt: 'p', width: 256, height: 256, num_inference_steps: 1 };
    const good: [string, Record<string, unknown>][] = [
      [Q, { ...base, width: 1536, height: 1536 }],
      [Q, { ...base, num_inference_steps: 50, width: 256 }],
      [F, { ...base, num_inference_steps: 8 }],
      [F, { ...base, num_inference_steps: 1 }],
      [Q, { ...base, guidance: 0 }],
      [Q, { ...base, guidance: 10 }],
      [F, { ...base, seed: Number.MAX_SAFE_INTEGER, negative_prompt: 'fog', image_format: 'png' }],
      [F, { ...base, seed: -5 }],
    ];
    const jobs = await Promise.all(good.map(async ([endpoint, input]) => ({ endpoint, input, ...(await post(`/v2/${endpoint}/run`, { input })) })));
    for (const job of jobs) expect(job.status, JSON.stringify(job.input)).toBe(200);
    const done = await Promise.all(
      jobs.map(async (job) => {
        const res = await fetch(`${t.url}/v2/${job.endpoint}/status-sync/${job.body.id}?wait=60000`, { headers: { authorization: key } });
        return (await res.json()) as JobBody;
      }),
    );
    for (const job of done) expect(job.status, JSON.stringify(job)).toBe('COMPLETED');
    expect(done[0]?.output).toMatchObject({ width: 1536, height: 1536, cost: 0.04718592 });
  });

  it('records usage for completed jobs only, summed exactly by key and endpoint; a failed job costs 0', async () => {
    const billed = await t.createKey(['run', 'read']);
    const run = async (endpoint: string, input: Record<string, unknown>, extra: Record<string, unknown> = {}) =>
      (await post(`/v2/${endpoint}/runsync`, { input, ...extra }, billed)).body;
    const jobs = [
      await run(Q, { prompt: 'a', width: 1536, height: 256, num_inference_steps: 1 }),
      await run(Q, { prompt: 'b', width: 512, height: 512, num_inference_steps: 1 }),
      await run(F, { prompt: 'c', width: 256, height: 256, num_inference_steps: 1 }),
    ];
    // Unreachable bucket: generation succeeds, the upload fails, the job FAILS and is not billed.
    const failed = await run(F, { prompt: 'd', width: 256, height: 256, num_inference_steps: 1 }, {
      s3Config: { accessId: 'x', accessSecret: 'y', bucketName: 'b', endpointUrl: 'http://127.0.0.1:9' },
    });
    expect(failed.status).toBe('FAILED');
    expect(failed.output).toBeUndefined();
    const costs = jobs.map((j) => j.output!.cost);
    expect(costs).toEqual([0.00786432, 0.00524288, 0.0001572864]);

    const usage = async (query: string) => {
      const res = await fetch(`${t.url}/admin/v1/usage?${query}`, { headers: { authorization: `Bearer ${t.adminKey}` } });
      expect(res.status).toBe(200);
      return (await res.json()) as { usage: Record<string, unknown>[]; total: Record<string, unknown> };
    };
    const keys = (await t.gantry.gateway.keys.list()).filter((k) => k.scopes.includes('run'));
    const billedId = keys.at(-1)!.id;
    const byKey = await usage('groupBy=key');
    // Four runs metered (the failed one too: its execution seconds), three billed by the megapixel.
    const row = byKey.usage.find((u) => u.key === billedId);
    expect(row).toMatchObject({ key: billedId, keyName: keys.at(-1)!.name, jobs: 4, megapixels: 0.720896, cost: 0.0132644864, costUsd: '0.0132644864', workerSeconds: null });
    expect(row!.executionSeconds as number).toBeGreaterThan(0);
    const byEndpoint = await usage(`groupBy=endpoint&from=${new Date(Date.now() - 3_600_000).toISOString()}`);
    expect(byEndpoint.usage.map((u) => u.endpoint).sort()).toEqual([F, Q]);
    const none = await usage(`groupBy=key&from=${Date.now() + 60_000}&to=${Date.now() + 120_000}`);
    expect(none).toMatchObject({ usage: [], total: { jobs: 0, cost: 0 } });
    const bad = await fetch(`${t.url}/admin/v1/usage?groupBy=model`, { headers: { authorization: `Bearer ${t.adminKey}` } });
    expect(bad.status).toBe(400);
    const denied = await fetch(`${t.url}/admin/v1/usage`, { headers: { authorization: `Bearer ${billed}` } });
    expect(denied.status).toBe(401);
  });

  it('serves images only at signed, unexpired URLs', async () => {
    const job = await runsync(F, { prompt: 'signed', width: 256, height: 256, num_inference_steps: 1 });
    const url = new URL(job.output!.image_url);
    expect(url.pathname).toBe(`/files/${F}/${job.id}.jpeg`);
    expect(Number(url.searchParams.get('expires')) * 1000 - Date.now()).toBeGreaterThan(6.9 * 86_400_000);
    const tampered = new URL(url);
    tampered.searchParams.set('sig', `${url.searchParams.get('sig')!.slice(0, -2)}AA`);
    expect((await fetch(tampered)).status).toBe(403);
    const longer = new URL(url);
    longer.searchParams.set('expires', String(Number(url.searchParams.get('expires')) + 1));
    expect((await fetch(longer)).status).toBe(403);
    expect((await fetch(`${t.url}/files/${F}/${job.id}.jpeg`)).status).toBe(403);
    expect((await fetch(`${t.url}/files/..%2Fgantry.db?expires=1&sig=x`)).status).toBe(404);
  });

  it('restarts an image worker that dies', async () => {
    const workers = await eventually(async () => {
      const res = await fetch(`${t.url}/v2/${F}/health`, { headers: { authorization: key } });
      const body = (await res.json()) as { workers: { idle: number } };
      return body.workers.idle >= 1 ? body : undefined;
    });
    expect(workers.workers.idle).toBeGreaterThanOrEqual(1);
    const { execSync } = await import('node:child_process');
    // [.] keeps pgrep's own shell (whose command line holds the pattern) out of the match.
    const workerPids = () => execSync(`pgrep -P ${process.pid} -f 'worker-main[.]js' || true`).toString().trim().split('\n').filter(Boolean).map(Number);
    const pids = workerPids();
    expect(pids.length).toBe(2);
    process.kill(pids[0]!, 'SIGKILL');
    await eventually(async () => {
      const now = workerPids();
      return now.length === 2 && !now.includes(pids[0]!) ? now : undefined;
    }, 10_000, 'a restarted worker');
    const job = await runsync(Q, { prompt: 'after restart', width: 256, height: 256, num_inference_steps: 1 });
    const again = await runsync(F, { prompt: 'after restart', width: 256, height: 256, num_inference_steps: 1 });
    expect([job.status, again.status]).toEqual(['COMPLETED', 'COMPLETED']);
  });
});
