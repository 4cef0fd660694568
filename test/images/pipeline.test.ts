import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import sharp from 'sharp';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { readModelFolder } from '../../src/images/model-folder.js';
import { encodeImage, GenerationStopped, loadPipeline, type DiffusionPipeline, type GenerateRequest } from '../../src/images/pipeline.js';
import { createScheduler } from '../../src/images/scheduler.js';
import { ensureTinyModel } from '../../src/images/tiny-models.js';

/** The real pipeline (onnxruntime-node on CPU) on the tiny models Gantry builds. */
const CPU = { provider: 'cpu', index: 0 } as const;
let dir: string;
let quality: DiffusionPipeline;
let fast: DiffusionPipeline;

const base: GenerateRequest = { prompt: 'a lighthouse at dusk', negativePrompt: '', width: 256, height: 256, steps: 4, guidance: 7.5, seed: 42 };

function meanAbsDiff(a: Uint8Array, b: Uint8Array): number {
  let d = 0;
  for (let i = 0; i < a.length; i++) d += Math.abs(a[i]! - b[i]!);
  return d / a.length;
}

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), 'gantry-pipeline-'));
  expect(ensureTinyModel(join(dir, 'quality'), 'quality')).toBe(true);
  expect(ensureTinyModel(join(dir, 'quality'), 'quality')).toBe(false); // built once
  ensureTinyModel(join(dir, 'fast'), 'fast');
  [quality, fast] = await Promise.all([loadPipeline(join(dir, 'quality'), { device: CPU }), loadPipeline(join(dir, 'fast'), { device: CPU })]);
});

afterAll(async () => {
  await quality?.release();
  await fast?.release();
  rmSync(dir, { recursive: true, force: true });
});

describe('diffusion pipeline on the tiny models', () => {
  it('reads the folders as a UNet and a flow-transformer export', () => {
    expect(quality.model).toMatchObject({ family: 'unet', latentChannels: 4, vaeScaleFactor: 8, scalingFactor: 0.18215, tiny: true, textEncoder2: null });
    expect(fast.model).toMatchObject({ family: 'transformer', latentChannels: 16, vaeScaleFactor: 8, shiftFactor: 0.1159, tiny: true });
    expect(fast.model.textEncoder2).toMatch(/text_encoder_2\/model\.onnx$/);
  });

  for (const kind of ['quality', 'fast'] as const) {
    const pipe = () => (kind === 'quality' ? quality : fast);

    it(`${kind}: same seed gives identical bytes; another seed or prompt a different image`, async () => {
      const a = await pipe().generate(base);
      const again = await pipe().generate(base);
      expect(Buffer.from(await encodeImage(again, 'png')).equals(await encodeImage(a, 'png'))).toBe(true);
      expect(Buffer.from(await encodeImage(again, 'jpeg')).equals(await encodeImage(a, 'jpeg'))).toBe(true);
      const otherSeed = await pipe().generate({ ...base, seed: 43 });
      const otherPrompt = await pipe().generate({ ...base, prompt: 'a field of sunflowers' });
      expect(meanAbsDiff(a.rgb, otherSeed.rgb)).toBeGreaterThan(5);
      expect(meanAbsDiff(a.rgb, otherPrompt.rgb)).toBeGreaterThan(5);
    });

    it(`${kind}: runs the denoiser exactly once per step`, async () => {
      for (const steps of [1, 3, 8]) {
        let seen = 0;
        const image = await pipe().generate({ ...base, steps, onStep: () => seen++ });
        expect(image.denoiserCalls).toBe(steps);
        expect(seen).toBe(steps);
      }
    });

    it(`${kind}: has the requested size and format, neither blank nor saturated`, async () => {
      const image = await pipe().generate({ ...base, width: 384, height: 256 });
      expect(image.rgb.length).toBe(384 * 256 * 3);
      let sum = 0;
      let sq = 0;
      let clipped = 0;
      for (const v of image.rgb) {
        sum += v;
        sq += v * v;
        if (v === 0 || v === 255) clipped++;
      }
      const mean = sum / image.rgb.length;
      const std = Math.sqrt(sq / image.rgb.length - mean * mean);
      expect(mean).toBeGreaterThan(40);
      expect(mean).toBeLessThan(215);
      expect(std).toBeGreaterThan(15);
      expect(clipped / image.rgb.length).toBeLessThan(0.05);
      for (const format of ['jpeg', 'png'] as const) {
        const meta = await sharp(await encodeImage(image, format)).metadata();
        expect(meta).toMatchObject({ format, width: 384, height: 256, channels: 3 });
      }
    });
  }

  it('quality: guidance and the negative prompt change the image', async () => {
    const a = await quality.generate(base);
    const lowGuidance = await quality.generate({ ...base, guidance: 3 });
    const negative = await quality.generate({ ...base, negativePrompt: 'blurry, grey' });
    const unguided = await quality.generate({ ...base, guidance: 1 });
    expect(meanAbsDiff(a.rgb, lowGuidance.rgb)).toBeGreaterThan(2);
    expect(meanAbsDiff(a.rgb, negative.rgb)).toBeGreaterThan(2);
    expect(meanAbsDiff(a.rgb, unguided.rgb)).toBeGreaterThan(2);
  });

  it('fast (FLUX-schnell layout) takes no guidance; a FLUX-dev layout feeds its embedded guidance input', async () => {
    expect(fast.defaults).toMatchObject({ family: 'flux-schnell', guidanceMode: 'none', steps: 4, maxSequenceLength: 256 });
    const a = await fast.generate(base);
    const b = await fast.generate({ ...base, guidance: 2 });
    expect(meanAbsDiff(a.rgb, b.rgb)).toBe(0);
    ensureTinyModel(join(dir, 'dev'), 'quality', { variant: 'flux-dev' });
    const dev = await loadPipeline(join(dir, 'dev'), { device: CPU });
    try {
      expect(dev.defaults).toMatchObject({ family: 'flux-dev', guidanceMode: 'embedded', guidance: 3.5, steps: 28, maxSequenceLength: 512 });
      const c = await dev.generate(base);
      const d = await dev.generate({ ...base, guidance: 2 });
      expect(meanAbsDiff(c.rgb, d.rgb)).toBeGreaterThan(1);
    } finally {
      await dev.release();
    }
  });

  it('cancel stops the loop between steps; a passed deadline is a timeout', async () => {
    const controller = new AbortController();
    let steps = 0;
    const run = quality.generate({ ...base, steps: 20, signal: controller.signal, onStep: (i) => { steps++; if (i === 2) controller.abort(); } });
    await expect(run).rejects.toThrow(GenerationStopped);
    await expect(run).rejects.toMatchObject({ reason: 'cancelled' });
    expect(steps).toBe(3);
    await expect(fast.generate({ ...base, deadline: Date.now() - 1 })).rejects.toMatchObject({ reason: 'timeout' });
  });

  it('names the execution provider explicitly: CUDA without a GPU or its provider library fails loudly', async () => {
    await expect(loadPipeline(join(dir, 'quality'), { device: { provider: 'cuda', index: 0 } })).rejects.toThrow(/cuda:0.*no NVIDIA driver.*CUDA provider is not installed.*No CPU fallback/s);
  });

  it('refuses a folder that is not a diffusion export, naming what is missing', () => {
    expect(() => readModelFolder(join(dir, 'nope'))).toThrow(/does not exist/);
    expect(() => readModelFolder(join(dir, 'quality', 'unet'))).toThrow(/model_index\.json/);
  });
});

describe('schedulers', () => {
  it('Euler discrete: diffusers spacings and sigmas', () => {
    const cfg = { _class_name: 'EulerDiscreteScheduler', beta_schedule: 'scaled_linear', beta_start: 0.00085, beta_end: 0.012 };
    expect(createScheduler({ ...cfg, timestep_spacing: 'trailing' }, 4).timesteps).toEqual([999, 749, 499, 249]);
    expect(createScheduler({ ...cfg, timestep_spacing: 'leading', steps_offset: 1 }, 4).timesteps).toEqual([751, 501, 251, 1]);
    const s = createScheduler({ ...cfg, timestep_spacing: 'linspace' }, 2);
    expect(s.timesteps).toEqual([999, 0]);
    expect(s.sigmas[0]).toBeCloseTo(14.6146, 3); // SD's sigma_max
    expect(s.sigmas.at(-1)).toBe(0);
    expect(s.initNoiseSigma).toBeCloseTo(14.6146, 3);
  });

  it('flow matching: sigmas 1 → 0 with static and dynamic shift', () => {
    const plain = createScheduler({ _class_name: 'FlowMatchEulerDiscreteScheduler', shift: 1 }, 4);
    expect(plain.sigmas).toEqual([1, 0.75, 0.5, 0.25, 0]);
    const shifted = createScheduler({ _class_name: 'FlowMatchEulerDiscreteScheduler', shift: 3 }, 2);
    expect(shifted.sigmas[1]).toBeCloseTo((3 * 0.5) / (1 + 2 * 0.5), 10);
    const dynamic = createScheduler({ _class_name: 'FlowMatchEulerDiscreteScheduler', use_dynamic_shifting: true }, 4, 4096);
    expect(dynamic.sigmas[1]).toBeCloseTo(Math.exp(1.15) / (Math.exp(1.15) + 1 / 0.75 - 1), 10);
    // One Euler step moves x by (sigma_next - sigma) × v.
    const x = new Float32Array([1]);
    plain.step(0, x, new Float32Array([2]));
    expect(x[0]).toBeCloseTo(0.5, 6);
    expect(() => createScheduler({ _class_name: 'KarrasVeScheduler' }, 4)).toThrow(/unsupported scheduler/);
  });
});
