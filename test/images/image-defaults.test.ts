/**
 * Defaults and bounds per model family, through the public endpoints: the gateway's image
 * workers serve tiny models in the FLUX.1-dev, FLUX.1-schnell and SD-Turbo layouts, and a
 * request that names nothing but a prompt runs at that family's defaults with the endpoint's
 * bounds on top; the usage record bills the size the image was made at. Needs `npm run build`.
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import sharp from 'sharp';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { IMAGE_DEFAULTS } from '../../src/config/image-config.js';
import { ensureTinyModel } from '../../src/images/tiny-models.js';
import { startTestGantry, type TestGantry } from '../helpers/gantry.js';

interface Output { width: number; height: number; num_inference_steps: number; guidance: number | null; cost: number; image_url: string }

let models: string;
beforeAll(() => {
  models = mkdtempSync(join(tmpdir(), 'gantry-defaults-'));
  ensureTinyModel(join(models, 'dev'), 'quality', { variant: 'flux-dev' });
  ensureTinyModel(join(models, 'schnell'), 'fast', { variant: 'flux-schnell', precision: { denoiser: 'float16', textEncoder2: 'bfloat16' } });
  ensureTinyModel(join(models, 'turbo'), 'quality', { variant: 'sd-turbo' });
  ensureTinyModel(join(models, 'dev-tuned'), 'fast', { variant: 'flux-dev' });
  writeFileSync(join(models, 'dev-tuned', 'gantry-defaults.json'), JSON.stringify({ num_inference_steps: 20, guidance: 5, width: 700, height: 300 }));
});
afterAll(() => rmSync(models, { recursive: true, force: true }));

async function run(t: TestGantry, key: string, endpoint: string, input: Record<string, unknown>): Promise<{ status: number; output?: Output; error?: string }> {
  const res = await fetch(`${t.url}/v2/${endpoint}/runsync`, { method: 'POST', headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' }, body: JSON.stringify({ input }) });
  const body = (await res.json()) as { output?: Output; error?: string };
  return { ...body, status: res.status };
}

async function billed(t: TestGantry): Promise<{ endpoint: string; megapixels: number }[]> {
  const res = await fetch(`${t.url}/admin/v1/usage?groupBy=endpoint`, { headers: { authorization: `Bearer ${t.adminKey}` } });
  return ((await res.json()) as { usage: { endpoint: string; megapixels: number }[] }).usage;
}

describe('quality = FLUX.1-dev layout, fast = FLUX.1-schnell layout (mixed precision)', () => {
  let t: TestGantry;
  let key: string;
  beforeAll(async () => {
    t = await startTestGantry({ images: { ...IMAGE_DEFAULTS, workers: true, qualityModel: join(models, 'dev'), fastModel: join(models, 'schnell') } });
    key = await t.createKey(['run', 'read']);
  });
  afterAll(async () => t?.close());

  it('FLUX.1-dev: 28 steps, guidance 3.5, 1024²', async () => {
    const job = await run(t, key, 'image-quality', { prompt: 'a lighthouse' });
    expect(job.output).toMatchObject({ num_inference_steps: 28, guidance: 3.5, width: 1024, height: 1024, cost: 0.02097152 });
    const meta = await sharp(Buffer.from(await (await fetch(job.output!.image_url)).arrayBuffer())).metadata();
    expect(meta).toMatchObject({ width: 1024, height: 1024 });
  });

  it('FLUX.1-schnell: 4 steps, no guidance (a given guidance is accepted and not used), 1024²', async () => {
    const job = await run(t, key, 'image-fast', { prompt: 'a kite' });
    expect(job.output).toMatchObject({ num_inference_steps: 4, guidance: null, width: 1024, height: 1024 });
    const guided = await run(t, key, 'image-fast', { prompt: 'a kite', guidance: 9, width: 256, height: 256, seed: 3 });
    expect(guided.output).toMatchObject({ guidance: null, num_inference_steps: 4 });
  });

  it("the endpoint's bounds still refuse what is out of range", async () => {
    expect(await run(t, key, 'image-fast', { prompt: 'x', num_inference_steps: 9 })).toMatchObject({ status: 400, error: 'Invalid parameter: num_inference_steps must be from 1 to 8' });
    expect(await run(t, key, 'image-quality', { prompt: 'x', guidance: 10.5 })).toMatchObject({ status: 400 });
  });
});

describe('quality = SD-Turbo layout, fast = FLUX-dev with gantry-defaults.json', () => {
  let t: TestGantry;
  let key: string;
  beforeAll(async () => {
    t = await startTestGantry({ images: { ...IMAGE_DEFAULTS, workers: true, qualityModel: join(models, 'turbo'), fastModel: join(models, 'dev-tuned') } });
    key = await t.createKey(['run', 'read']);
  });
  afterAll(async () => t?.close());

  it('SD-Turbo: 1 step, guidance 0 (no CFG), 512² from the UNet sample_size; billed at 512²', async () => {
    const job = await run(t, key, 'image-quality', { prompt: 'a lighthouse' });
    expect(job.output).toMatchObject({ num_inference_steps: 1, guidance: 0, width: 512, height: 512, cost: 0.00524288 });
    const usage = await billed(t);
    expect(usage.find((u) => u.endpoint === 'image-quality')?.megapixels).toBe(0.262144);
  });

  it("an operator's defaults file, with the fast endpoint's bounds on top (steps 20 → 8, 700×300 → 704×320)", async () => {
    const job = await run(t, key, 'image-fast', { prompt: 'a kite' });
    expect(job.output).toMatchObject({ num_inference_steps: 8, guidance: 5, width: 704, height: 320 });
    const asked = await run(t, key, 'image-fast', { prompt: 'a kite', num_inference_steps: 2, guidance: 1, width: 256, height: 256 });
    expect(asked.output).toMatchObject({ num_inference_steps: 2, guidance: 1, width: 256, height: 256 });
  });
});

describe('batching across jobs through the gateway (GANTRY_IMAGE_BATCH=4)', () => {
  let t: TestGantry;
  let key: string;
  beforeAll(async () => {
    // The longest window (10 s): the four requests arrive well within it, so the batch starts because it is full.
    t = await startTestGantry({ images: { ...IMAGE_DEFAULTS, workers: true, fastModel: join(models, 'schnell'), batchSize: 4, batchWindowMs: 10_000 } });
    key = await t.createKey(['run', 'read']);
  });
  afterAll(async () => t?.close());

  it('four queued requests of one size run as one denoiser batch, each with its own seed and image', async () => {
    const submit = async (seed: number): Promise<string> => {
      const res = await fetch(`${t.url}/v2/image-fast/run`, { method: 'POST', headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' }, body: JSON.stringify({ input: { prompt: 'a kite', width: 256, height: 256, seed } }) });
      return ((await res.json()) as { id: string }).id;
    };
    const ids = await Promise.all([1, 2, 3, 4].map(submit));
    const jobs = await Promise.all(ids.map(async (id) => {
      const res = await fetch(`${t.url}/v2/image-fast/status-sync/${id}?wait=60000`, { headers: { authorization: key } });
      return (await res.json()) as { status: string; output?: Output & { batch_size: number; seed: number } };
    }));
    expect(jobs.map((j) => j.status)).toEqual(['COMPLETED', 'COMPLETED', 'COMPLETED', 'COMPLETED']);
    expect(jobs.map((j) => j.output?.batch_size)).toEqual([4, 4, 4, 4]);
    expect(jobs.map((j) => j.output?.seed)).toEqual([1, 2, 3, 4]);
    expect(new Set(jobs.map((j) => j.output?.image_url)).size).toBe(4);
  });
});
