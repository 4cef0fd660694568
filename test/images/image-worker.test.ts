/**
 * The image worker's own parts: batching across jobs (one denoiser run per step for several
 * requests), the start-up memory check, the device settings, and a CUDA setting on a machine
 * without a GPU failing loudly in a real worker process.
 */
import { spawnOwned } from '../helpers/processes.js';
import { appendFileSync, existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pino } from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { imageMemoryLimit, loadImageConfig } from '../../src/config/image-config.js';
import { BatchQueue } from '../../src/images/batch-queue.js';
import { planMemory } from '../../src/images/memory-plan.js';
import { GenerationStopped, loadPipeline, type DiffusionPipeline, type GenerateRequest } from '../../src/images/pipeline.js';
import { ensureTinyModel } from '../../src/images/tiny-models.js';

const CPU = { provider: 'cpu', index: 0 } as const;
let dir: string;
let schnell: DiffusionPipeline;
let unet: DiffusionPipeline;

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), 'gantry-worker-'));
  ensureTinyModel(join(dir, 'fast'), 'fast');
  ensureTinyModel(join(dir, 'quality'), 'quality');
  [schnell, unet] = await Promise.all([loadPipeline(join(dir, 'fast'), { device: CPU }), loadPipeline(join(dir, 'quality'), { device: CPU, textEncoders: 'offload' })]);
});
afterAll(async () => {
  await schnell?.release();
  await unet?.release();
  rmSync(dir, { recursive: true, force: true });
});

function meanAbsDiff(a: Uint8Array, b: Uint8Array): number {
  let d = 0;
  for (let i = 0; i < a.length; i++) d += Math.abs(a[i]! - b[i]!);
  return d / a.length;
}

describe('batching across jobs', () => {
  const base: GenerateRequest = { prompt: 'a red kite', negativePrompt: 'fog', width: 256, height: 256, steps: 3, guidance: 7.5, seed: 1 };
  const requests = [base, { ...base, seed: 2 }, { ...base, prompt: 'tidal pools', seed: 3, guidance: 4 }];

  for (const name of ['schnell', 'unet'] as const) {
    it(`${name}: a batch of three runs the denoiser once per step and gives each request its own image`, async () => {
      const pipe = name === 'schnell' ? schnell : unet;
      const batch = await pipe.generateBatch(requests);
      for (const [i, result] of batch.entries()) {
        if (result instanceof Error) throw result;
        expect(result).toMatchObject({ denoiserCalls: 3, batchSize: 3 });
        const alone = await pipe.generate(requests[i]!);
        expect(alone).toMatchObject({ denoiserCalls: 3, batchSize: 1 });
        expect(meanAbsDiff(result.rgb, alone.rgb)).toBeLessThan(0.05);
      }
      const [a, b] = batch as { rgb: Uint8Array }[];
      expect(meanAbsDiff(a!.rgb, b!.rgb)).toBeGreaterThan(5);
    });
  }

  it('a request cancelled mid-batch leaves it; the others finish', async () => {
    const controller = new AbortController();
    const results = await schnell.generateBatch([
      { ...base, steps: 6 },
      { ...base, steps: 6, seed: 9, signal: controller.signal, onStep: (i) => i === 1 && controller.abort() },
    ]);
    expect(results[0]).toMatchObject({ denoiserCalls: 6, batchSize: 2 });
    expect(results[1]).toBeInstanceOf(GenerationStopped);
  });

  it('requests of another size or step count are not mixed into a batch', async () => {
    expect(schnell.batchKey(base)).toBe(schnell.batchKey({ ...base, seed: 5, prompt: 'x', guidance: 2 }));
    expect(schnell.batchKey(base)).not.toBe(schnell.batchKey({ ...base, width: 320 }));
    expect(unet.batchKey(base)).not.toBe(unet.batchKey({ ...base, guidance: 1 })); // CFG on / off
    await expect(schnell.generateBatch([base, { ...base, steps: 2 }])).rejects.toThrow(/share size, steps/);
  });

  it('offloaded text encoders (opened per request, released after it) give the image resident ones give', async () => {
    expect(unet.memory.textEncoders).toBe('offload');
    const resident = await loadPipeline(join(dir, 'quality'), { device: CPU, textEncoders: 'device' });
    try {
      expect(resident.memory.textEncoders).toBe('device');
      expect(Buffer.from((await unet.generate(base)).rgb).equals(Buffer.from((await resident.generate(base)).rgb))).toBe(true);
    } finally {
      await resident.release();
    }
  });
});

describe('BatchQueue', () => {
  function controlled() {
    const batches: string[][] = [];
    const waiting: (() => void)[] = [];
    const queue = new BatchQueue<string, string>(
      { key: (r) => r[0]!, run: (rs) => new Promise((resolve) => { batches.push(rs); waiting.push(() => resolve(rs.map((r) => `done ${r}`))); }) },
      { maxBatch: 2, windowMs: 0 },
    );
    return { queue, batches, release: () => waiting.shift()?.() };
  }

  it('runs the oldest request first, with later ones of its key, at most maxBatch at a time', async () => {
    const { queue, batches, release } = controlled();
    const done = [queue.submit('A1')];
    expect(batches).toEqual([['A1']]); // window 0: an idle queue starts at once
    done.push(queue.submit('B1'), queue.submit('A2'), queue.submit('A3'), queue.submit('A4'));
    release();
    await done[0];
    expect(batches[1]).toEqual(['B1']);
    release();
    await done[1];
    expect(batches[2]).toEqual(['A2', 'A3']);
    release();
    await done[2];
    release();
    expect(await Promise.all(done)).toEqual(['done A1', 'done B1', 'done A2', 'done A3', 'done A4']);
    expect(batches).toEqual([['A1'], ['B1'], ['A2', 'A3'], ['A4']]);
  });

  it('a full batch does not wait for its window; each request gets its own error', async () => {
    const queue = new BatchQueue<number, number>({ key: () => 'k', run: async (rs) => rs.map((r) => (r < 0 ? new Error(`bad ${r}`) : r * 2)) }, { maxBatch: 2, windowMs: 3_600_000 });
    const [a, b] = [queue.submit(1), queue.submit(-1)];
    expect(await a).toBe(2);
    await expect(b).rejects.toThrow('bad -1');
  });
});

describe('memory and devices', () => {
  const GB = 1e9;
  const flux = [
    { name: 'text_encoder', bytes: 0.25 * GB, encoder: true },
    { name: 'text_encoder_2', bytes: 9.5 * GB, encoder: true },
    { name: 'transformer', bytes: 23.8 * GB, encoder: false },
    { name: 'vae_decoder', bytes: 0.17 * GB, encoder: false },
  ];
  const gpu = { deviceName: 'cuda:1', onGpu: true, hostBudget: 64 * GB, budgetSource: 'free on cuda:1' };

  it('says in words what does not fit and what to change', () => {
    const plan = planMemory({ ...gpu, graphs: flux, textEncoders: 'device', deviceBudget: 30 * GB });
    expect(plan.fits).toBe(false);
    expect(plan.problem).toMatch(/does not fit on cuda:1: transformer 22\.2 GiB \+ vae_decoder 0\.16 GiB \+ text_encoder 0\.23 GiB \+ text_encoder_2 8\.8 GiB \+ working memory 7\.9 GiB = 39\.3 GiB, but 27\.9 GiB is available \(free on cuda:1\)/);
    expect(plan.problem).toMatch(/GANTRY_IMAGE_TEXT_ENCODERS=cpu would keep 9\.1 GiB/);
  });

  it('text encoders on the CPU or offloaded make FLUX.1-dev fit beside another model on an 80 GB card', () => {
    expect(planMemory({ ...gpu, graphs: flux, textEncoders: 'cpu', deviceBudget: 40 * GB })).toMatchObject({ fits: true });
    const offload = planMemory({ ...gpu, graphs: flux, textEncoders: 'offload', deviceBudget: 45 * GB });
    expect(offload.fits).toBe(true);
    expect(offload.devicePeak).toBeCloseTo((23.8 + 0.17 + 9.5) * GB * 1.25, -6);
    expect(planMemory({ ...gpu, graphs: flux, textEncoders: 'cpu', deviceBudget: 40 * GB, hostBudget: 5 * GB }).problem).toMatch(/host memory/);
  });

  it('the start-up check refuses a model over the memory limit in one sentence naming the setting, and loads it under a generous limit', async () => {
    // The tiny UNet padded to 2 MiB (a ModelProto doc_string appended: protobuf keeps the last
    // value), so that the smallest limit, 1 MiB, is too small.
    const big = join(dir, 'quality-2mib');
    ensureTinyModel(big, 'quality');
    const pad = 2 * 1024 * 1024;
    appendFileSync(join(big, 'unet', 'model.onnx'), Buffer.concat([Buffer.from([0x32, 0x80, 0x80, 0x80, 0x01]), Buffer.alloc(pad, 0x20)]));
    const sizes = /^the image model does not fit on cpu: unet 2\.0 MiB \+ vae_decoder 0\.0 MiB \+ text_encoder 0\.1 MiB \+ working memory 0\.5 MiB = 2\.[0-9] MiB, but 1\.0 MiB is available/;
    await expect(loadPipeline(big, { device: CPU, memoryLimitMb: 1 })).rejects.toThrow(
      new RegExp(`${sizes.source} \\(GANTRY_IMAGE_MEMORY_LIMIT_MB=1\\)\\. Or use a smaller export \\(float16, int8\\), or another device\\.$`),
    );
    await expect(loadPipeline(big, { device: CPU, memoryLimitMb: 1, memoryLimitSetting: 'GANTRY_IMAGE_QUALITY_MEMORY_LIMIT_MB' })).rejects.toThrow(/is available \(GANTRY_IMAGE_QUALITY_MEMORY_LIMIT_MB=1\)/);
    const pipe = await loadPipeline(big, { device: CPU, memoryLimitMb: 64 });
    try {
      expect(pipe.memory.devicePeakBytes).toBeGreaterThan(pad);
      expect((await pipe.generate({ prompt: 'a red kite', negativePrompt: '', width: 64, height: 64, steps: 1, guidance: 0, seed: 1 })).rgb.length).toBe(64 * 64 * 3);
    } finally {
      await pipe.release();
    }
  });

  it('a memory limit per endpoint, so that two workers sharing a device can split it; else the global one', () => {
    const config = loadImageConfig({ GANTRY_IMAGE_MEMORY_LIMIT_MB: '8000', GANTRY_IMAGE_FAST_MEMORY_LIMIT_MB: '30000' });
    expect(imageMemoryLimit(config, 'fast')).toEqual({ mb: 30000, setting: 'GANTRY_IMAGE_FAST_MEMORY_LIMIT_MB' });
    expect(imageMemoryLimit(config, 'quality')).toEqual({ mb: 8000, setting: 'GANTRY_IMAGE_MEMORY_LIMIT_MB' });
    expect(imageMemoryLimit(loadImageConfig({ GANTRY_IMAGE_QUALITY_MEMORY_LIMIT_MB: '0' }), 'quality')).toEqual({ mb: 0, setting: 'GANTRY_IMAGE_QUALITY_MEMORY_LIMIT_MB' });
    expect(() => loadImageConfig({ GANTRY_IMAGE_QUALITY_MEMORY_LIMIT_MB: '-1' })).toThrow(/GANTRY_IMAGE_QUALITY_MEMORY_LIMIT_MB="-1": expected an integer from 0 to/);
  });

  it('the gateway hands each image worker its own memory limit, which the worker reads as it does', async () => {
    // From the build, as the gateway runs: the feature refuses to start workers without dist/src/images/worker-main.js.
    const built = join(process.cwd(), 'dist', 'src', 'images', 'image-feature.js');
    expect(existsSync(built), 'run npm run build first').toBe(true);
    const { setUpImageFeature } = (await import(built)) as typeof import('../../src/images/image-feature.js');
    const builtIns = new Map<string, { env?: Record<string, string> }>();
    const images = { ...loadImageConfig({ GANTRY_IMAGE_MEMORY_LIMIT_MB: '8000', GANTRY_IMAGE_FAST_MEMORY_LIMIT_MB: '30000' }), qualityModel: join(dir, 'quality'), fastModel: join(dir, 'fast') };
    const feature = await setUpImageFeature({
      config: { images, dataDir: dir, logLevel: 'silent', outboundAllow: [] },
      endpoints: { ensure: async () => false, addHooks: () => {} },
      routes: { add: () => {} } as never,
      builtIns: builtIns as never,
      fileSigningKey: Buffer.alloc(32),
      logger: pino({ level: 'silent' }),
      now: Date.now,
    });
    feature.startWorkers('http://127.0.0.1:9');
    feature.stop();
    const workerLimit = (id: string, kind: 'quality' | 'fast') => imageMemoryLimit(loadImageConfig(builtIns.get(id)!.env!), kind);
    expect(workerLimit('image-fast', 'fast')).toEqual({ mb: 30000, setting: 'GANTRY_IMAGE_FAST_MEMORY_LIMIT_MB' });
    expect(workerLimit('image-quality', 'quality')).toEqual({ mb: 8000, setting: 'GANTRY_IMAGE_MEMORY_LIMIT_MB' });
  });

  it('reads a device per endpoint, and names a bad setting', () => {
    const config = loadImageConfig({ GANTRY_IMAGE_PROVIDER: 'cuda', GANTRY_IMAGE_FAST_DEVICE: 'cuda:1', GANTRY_IMAGE_TEXT_ENCODERS: 'offload', GANTRY_IMAGE_BATCH: '4', GANTRY_IMAGE_BATCH_WINDOW_MS: '50', GANTRY_IMAGE_ARENA: 'off' });
    expect(config).toMatchObject({ qualityDevice: { provider: 'cuda', index: 0 }, fastDevice: { provider: 'cuda', index: 1 }, textEncoders: 'offload', batchSize: 4, batchWindowMs: 50, arena: false });
    expect(loadImageConfig({}).qualityDevice).toEqual(CPU);
    expect(() => loadImageConfig({ GANTRY_IMAGE_QUALITY_DEVICE: 'gpu0' })).toThrow(/GANTRY_IMAGE_QUALITY_DEVICE="gpu0": expected cpu, cuda or cuda:N/);
    expect(() => loadImageConfig({ GANTRY_IMAGE_FAST_DEVICE: 'cpu:1' })).toThrow(/GANTRY_IMAGE_FAST_DEVICE/);
    expect(() => loadImageConfig({ GANTRY_IMAGE_BATCH: '0' })).toThrow(/GANTRY_IMAGE_BATCH="0": expected an integer from 1 to 16/);
    expect(() => loadImageConfig({ GANTRY_IMAGE_TEXT_ENCODERS: 'gpu' })).toThrow(/GANTRY_IMAGE_TEXT_ENCODERS/);
  });

  it('GANTRY_IMAGE_PROVIDER=cuda without a GPU: the worker process exits at once, saying why, and never falls back to the CPU', async () => {
    const script = join(process.cwd(), 'dist', 'src', 'images', 'worker-main.js');
    expect(existsSync(script), 'run npm run build first').toBe(true);
    const child = spawnOwned(process.execPath, [script], {
      env: { PATH: process.env.PATH, GANTRY_IMAGE_KIND: 'fast', GANTRY_IMAGE_MODEL_DIR: join(dir, 'fast'), GANTRY_IMAGE_PROVIDER: 'cuda', RUNPOD_ENDPOINT_ID: 'image-fast', GANTRY_FILES_DIR: dir, GANTRY_FILES_BASE_URL: 'http://127.0.0.1:9', GANTRY_FILES_SIGNING_KEY: 'a2V5' },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stderr = '';
    child.stderr!.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
    const code = await new Promise<number | null>((resolve) => child.on('exit', resolve));
    expect(code).toBe(1);
    expect(stderr).toMatch(/image worker failed: .*run on cuda:0 .*no NVIDIA driver.*CUDA provider is not installed.*No CPU fallback is used: set GANTRY_IMAGE_PROVIDER=cpu/s);
  });
});
