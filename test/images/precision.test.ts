/**
 * Half precision, bfloat16, mixed and QDQ-int8 exports through the real pipeline: tiny models
 * built in each precision (src/images/tiny-models.ts) must give the float32 image within the
 * tolerances below, on every Node version (onnxruntime-node returns float16 as a Uint16Array of
 * bits on Node 20/22 and as a Float16Array on Node 24+; both are read from their bytes).
 * Passes on Node 20.20, 22.23 and 24.21 (docs/models.md, "Precision", says how those were run).
 *
 * Tolerances (RGB levels of 0–255, mean over the image / worst pixel): the tiny models' weights
 * rounded to each format move the image by this much; the bugs these tests guard against
 * (16-bit patterns read as numbers, a Float16Array decoded twice) move it by tens of levels or
 * blank it.
 */
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import onnxProto from 'onnx-proto';
import ort from 'onnxruntime-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { readGraphBoundary } from '../../src/images/graph-boundary.js';
import { halfBitsToFloat32, toHalfBits, float16DataToFloat32, toBfloat16Bits, bfloat16BitsToFloat32 } from '../../src/images/half-precision.js';
import { loadPipeline, type GenerateRequest, type GeneratedImage } from '../../src/images/pipeline.js';
import { tensorToFloat32 } from '../../src/images/tensors.js';
import { ensureTinyModel, type TinyModelOptions, type TinyVariant } from '../../src/images/tiny-models.js';

const { onnx } = onnxProto;
const CPU = { provider: 'cpu', index: 0 } as const;
// The UNet runs classifier-free guidance at 7.5, which multiplies any difference between the
// two branches by 7.5, and starts from latents of sigma ≈ 14.6: it is the harder case.
const TOLERANCE: Record<string, Record<string, { mean: number; max: number }>> = {
  unet: {
    float16: { mean: 1.5, max: 24 },
    bfloat16: { mean: 8, max: 96 },
    mixed: { mean: 1.5, max: 24 },
    'mixed-bf16': { mean: 8, max: 96 },
    // The tiny UNet's conditioning is scaled 80× (so that a prompt shows through the padding)
    // and CFG multiplies branch differences by 7.5 again: per-tensor int8 weights move its
    // colours by ~13 levels on average (measured 13.1 / 14.3). FLUX-dev's tiny layout: < 1.
    'qdq-int8': { mean: 16, max: 192 },
    'qdq-int8-everywhere': { mean: 18, max: 224 },
  },
  'flux-dev': {
    float16: { mean: 0.5, max: 4 },
    bfloat16: { mean: 2, max: 16 },
    mixed: { mean: 0.5, max: 4 },
    'mixed-bf16': { mean: 2, max: 16 },
    'qdq-int8': { mean: 2, max: 16 },
    'qdq-int8-everywhere': { mean: 2, max: 16 },
  },
};

let dir: string;
beforeAll(() => {
  dir = mkdtempSync(join(tmpdir(), 'gantry-precision-'));
});
afterAll(() => rmSync(dir, { recursive: true, force: true }));

function diff(a: Uint8Array, b: Uint8Array): { mean: number; max: number } {
  let sum = 0;
  let max = 0;
  for (let i = 0; i < a.length; i++) {
    const d = Math.abs(a[i]! - b[i]!);
    sum += d;
    max = Math.max(max, d);
  }
  return { mean: sum / a.length, max };
}

async function generate(variant: TinyVariant, name: string, options: TinyModelOptions['precision'], request: GenerateRequest): Promise<GeneratedImage> {
  const folder = join(dir, `${variant}-${name}`);
  ensureTinyModel(folder, variant === 'unet' || variant === 'sd-turbo' ? 'quality' : 'fast', { variant, ...(options ? { precision: options } : {}) });
  const pipe = await loadPipeline(folder, { device: CPU });
  try {
    return await pipe.generate(request);
  } finally {
    await pipe.release();
  }
}

const PRECISIONS: Record<string, TinyModelOptions['precision']> = {
  float16: { textEncoder: 'float16', textEncoder2: 'float16', denoiser: 'float16', vae: 'float16' },
  bfloat16: { textEncoder: 'bfloat16', textEncoder2: 'bfloat16', denoiser: 'bfloat16', vae: 'bfloat16' },
  // What GPU deployments serve: half-precision encoders and denoiser, a float32 VAE.
  mixed: { textEncoder: 'float16', textEncoder2: 'float16', denoiser: 'float16', vae: 'float32' },
  'mixed-bf16': { textEncoder: 'float32', textEncoder2: 'bfloat16', denoiser: 'bfloat16', vae: 'float32' },
  // int8 where quantisation pays (denoiser, VAE); the text encoders of such exports stay float.
  'qdq-int8': { textEncoder: 'float32', textEncoder2: 'float32', denoiser: 'qdq-int8', vae: 'qdq-int8' },
  'qdq-int8-everywhere': { textEncoder: 'qdq-int8', textEncoder2: 'qdq-int8', denoiser: 'qdq-int8', vae: 'qdq-int8' },
};

for (const variant of ['unet', 'flux-dev'] as const) {
  describe(`${variant}: every precision gives the float32 image`, () => {
    const request: GenerateRequest = { prompt: 'a lighthouse at dusk', negativePrompt: 'fog', width: 256, height: 256, steps: 4, guidance: variant === 'unet' ? 7.5 : 3.5, seed: 7 };
    let reference: GeneratedImage;
    beforeAll(async () => {
      reference = await generate(variant, 'float32', undefined, request);
    });

    for (const [name, precision] of Object.entries(PRECISIONS)) {
      const tolerance = TOLERANCE[variant]![name]!;
      it(`${name} within mean ${tolerance.mean} / max ${tolerance.max} levels`, async () => {
        const image = await generate(variant, name, precision, request);
        const d = diff(image.rgb, reference.rgb);
        expect(d.mean, `mean ${d.mean}`).toBeLessThanOrEqual(tolerance.mean);
        expect(d.max, `max ${d.max}`).toBeLessThanOrEqual(tolerance.max);
        // Not a blank or flat image (what a double-decoded float16 output gives).
        expect(new Set(image.rgb).size).toBeGreaterThan(50);
      });
    }
  });
}

describe('graph boundaries', () => {
  it('the tiny exports declare the element types they are built in', () => {
    const folder = join(dir, 'flux-dev-mixed-bf16');
    ensureTinyModel(folder, 'fast', { variant: 'flux-dev', precision: PRECISIONS['mixed-bf16'] });
    const transformer = readGraphBoundary(join(folder, 'transformer', 'model.onnx'));
    expect(transformer.inputs.find((i) => i.name === 'hidden_states')?.type).toBe('bfloat16');
    expect(transformer.outputs[0]).toEqual({ name: 'out_hidden_states', type: 'bfloat16' });
    expect(readGraphBoundary(join(folder, 'vae_decoder', 'model.onnx')).inputs[0]?.type).toBe('float32');
    const half = join(dir, 'unet-float16');
    ensureTinyModel(half, 'quality', { variant: 'unet', precision: PRECISIONS.float16 });
    expect(readGraphBoundary(join(half, 'text_encoder', 'model.onnx')).outputs.map((o) => o.type)).toEqual(['float16', 'float16']);
  });

  it('reads a float16 output from its bytes, whether the runtime hands out bits or a Float16Array', () => {
    const values = [0.53, -2, 1000, 6.1e-5, 0];
    const bits = toHalfBits(values);
    const expected = halfBitsToFloat32(bits);
    // Node 20/22: a Uint16Array of bit patterns.
    expect(Array.from(tensorToFloat32(new ort.Tensor('float16', bits, [5]), 'm', 'out'))).toEqual(Array.from(expected));
    // Node 24+: a Float16Array over the same bytes, whose elements are numbers. A stand-in with
    // those semantics: reading its elements as bit patterns (the old double decoding) gives
    // garbage; reading its bytes gives the values.
    const asFloat16 = new Proxy(bits, { get: (t, p) => (typeof p === 'string' && /^\d+$/.test(p) ? expected[Number(p)] : Reflect.get(t, p)) });
    expect(asFloat16[0]).toBeCloseTo(0.53, 3);
    const tensor = { type: 'float16', data: asFloat16, dims: [5] } as unknown as ort.Tensor;
    expect(Array.from(tensorToFloat32(tensor, 'm', 'out'))).toEqual(Array.from(expected));
    expect(Array.from(float16DataToFloat32(asFloat16))).toEqual(Array.from(expected));
  });

  it('converts halves and bfloat16 with round-to-nearest-even, subnormals and infinities', () => {
    expect(Array.from(toHalfBits([1, 0.5, -2, 65504, 65520, 1e-8, 2 ** -24, 2 ** -25 * 1.5, 1 + 2 ** -11, 1 + 3 * 2 ** -11, NaN]))).toEqual([
      0x3c00, 0x3800, 0xc000, 0x7bff, 0x7c00, 0, 0x0001, 0x0001, 0x3c00, 0x3c02, 0x7e00,
    ]);
    expect(Array.from(halfBitsToFloat32(new Uint16Array([0x3555, 0x0001, 0xfc00])))).toEqual([Math.fround(0.333251953125), 2 ** -24, -Infinity]);
    expect(Array.from(toBfloat16Bits([1, -2, 1 + 2 ** -8, 1 + 3 * 2 ** -8]))).toEqual([0x3f80, 0xc000, 0x3f80, 0x3f82]);
    expect(Array.from(bfloat16BitsToFloat32(new Uint16Array([0x3f80, 0xc000])))).toEqual([1, -2]);
  });
});

/** Moves a graph's weights into `model.onnx_data` beside it, as large exports are stored. */
function externalize(file: string): void {
  const model = onnx.ModelProto.decode(readFileSync(file));
  const chunks: Uint8Array[] = [];
  let offset = 0;
  for (const tensor of model.graph?.initializer ?? []) {
    const raw = tensor.rawData;
    if (!raw || raw.length < 64) continue;
    chunks.push(raw);
    tensor.rawData = new Uint8Array();
    tensor.dataLocation = onnx.TensorProto.DataLocation.EXTERNAL;
    tensor.externalData = [{ key: 'location', value: 'model.onnx_data' }, { key: 'offset', value: String(offset) }, { key: 'length', value: String(raw.length) }];
    offset += raw.length;
  }
  writeFileSync(join(dirname(file), 'model.onnx_data'), Buffer.concat(chunks));
  writeFileSync(file, onnx.ModelProto.encode(model).finish());
}

describe('bfloat16 graphs with external weights', () => {
  const request: GenerateRequest = { prompt: 'a kite', negativePrompt: '', width: 256, height: 256, steps: 3, guidance: 3.5, seed: 11 };

  it('are opened from a float32-boundary graph written beside the weights, or in the cache with hard links when that fails', async () => {
    const embedded = await generate('flux-dev', 'bf16-embedded', { denoiser: 'bfloat16' }, request);
    const folder = join(dir, 'flux-dev-bf16-external');
    ensureTinyModel(folder, 'fast', { variant: 'flux-dev', precision: { denoiser: 'bfloat16' } });
    const graph = join(folder, 'transformer', 'model.onnx');
    externalize(graph);
    const boundary = readGraphBoundary(graph);
    expect(boundary.externalFiles).toEqual(['model.onnx_data']);
    expect(boundary.weightBytes).toBe(statSync(graph).size + statSync(join(folder, 'transformer', 'model.onnx_data')).size);

    const beside = join(folder, 'transformer', 'model.gantry-float32-io.onnx');
    let pipe = await loadPipeline(folder, { device: CPU, cacheDir: join(dir, 'cache') });
    expect(existsSync(beside)).toBe(true);
    expect(Array.from((await pipe.generate(request)).rgb)).toEqual(Array.from(embedded.rgb));
    await pipe.release();

    // The folder refuses the copy (a directory stands where it would go): the cache holds it.
    rmSync(beside);
    mkdirSync(beside);
    pipe = await loadPipeline(folder, { device: CPU, cacheDir: join(dir, 'cache') });
    const cached = readdirSync(join(dir, 'cache'));
    expect(cached).toHaveLength(1);
    expect(readdirSync(join(dir, 'cache', cached[0]!)).sort()).toEqual(['model.onnx', 'model.onnx_data']);
    expect(statSync(join(dir, 'cache', cached[0]!, 'model.onnx_data')).nlink).toBe(2); // a hard link, not a copy
    expect(Array.from((await pipe.generate(request)).rgb)).toEqual(Array.from(embedded.rgb));
    await pipe.release();
  });
});
