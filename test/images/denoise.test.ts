/**
 * The denoising loops build their conditioning tensors once per batch, not once per step
 * (docs/models.md, "IO binding"): every denoiser run of a batch gets the same
 * encoder_hidden_states tensor object, and a new one only when a request leaves the batch.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type * as ort from 'onnxruntime-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { flowLoop, unetLoop, type LoopContext, type LoopRequest } from '../../src/images/denoise.js';
import { readModelFolder } from '../../src/images/model-folder.js';
import { openGraph, type SessionSettings } from '../../src/images/tensors.js';
import { PromptEncoders } from '../../src/images/text-encoders.js';
import { ensureTinyModel } from '../../src/images/tiny-models.js';

let dir: string;
const opened: { release(): Promise<void> }[] = [];

beforeAll(() => {
  dir = mkdtempSync(join(tmpdir(), 'gantry-denoise-'));
  ensureTinyModel(join(dir, 'quality'), 'quality');
  ensureTinyModel(join(dir, 'fast'), 'fast');
});
afterAll(async () => {
  await Promise.all(opened.map((o) => o.release()));
  rmSync(dir, { recursive: true, force: true });
});

/** A loop context on the tiny model of `kind`, whose denoiser records the encoder_hidden_states tensor of each run. */
async function context(kind: 'quality' | 'fast', steps: number): Promise<{ ctx: LoopContext; seen: ort.Tensor[] }> {
  const model = readModelFolder(join(dir, kind));
  const settings: SessionSettings = { device: { provider: 'cpu', index: 0 }, threads: 1, arena: true, cacheDir: join(dir, 'cache') };
  const denoiser = (await openGraph(model.denoiser, settings)).session;
  const encoders = await PromptEncoders.load(model, settings, 'device', null);
  opened.push(denoiser, encoders);
  const seen: ort.Tensor[] = [];
  const run = denoiser.run.bind(denoiser) as (feeds: ort.InferenceSession.FeedsType) => Promise<ort.InferenceSession.ReturnType>;
  (denoiser as { run: unknown }).run = (feeds: ort.InferenceSession.FeedsType) => {
    seen.push(feeds.encoder_hidden_states!);
    return run(feeds);
  };
  return { ctx: { model, encoders, denoiser, steps, h: 8, w: 8 }, seen };
}

describe('conditioning tensors are built once per batch', () => {
  const base: LoopRequest = { prompt: 'a red kite', negativePrompt: 'fog', guidance: 7.5, seed: 1 };

  for (const kind of ['quality', 'fast'] as const) {
    it(`${kind === 'quality' ? 'UNet' : 'FLUX'}: one encoder_hidden_states tensor for every step, a new one when a request leaves`, async () => {
      const { ctx, seen } = await context(kind, 5);
      const loop = kind === 'quality' ? unetLoop : flowLoop;
      const controller = new AbortController();
      const result = await loop(ctx, [base, { ...base, seed: 2, signal: controller.signal, onStep: (i) => i === 1 && controller.abort() }]);
      expect(result.calls).toBe(5);
      expect(seen).toHaveLength(5);
      // Steps 0 and 1 ran both requests; from step 2 on only the first.
      expect(seen[1]).toBe(seen[0]);
      expect(seen[2]).not.toBe(seen[1]);
      expect(seen[3]).toBe(seen[2]);
      expect(seen[4]).toBe(seen[2]);
      expect(seen[0]!.dims[0]).toBe(kind === 'quality' ? 4 : 2); // CFG doubles the UNet's rows
      expect(seen[2]!.dims[0]).toBe(kind === 'quality' ? 2 : 1);
    });
  }
});
