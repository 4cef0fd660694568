#!/usr/bin/env node
/* global setInterval, clearInterval */
/**
 * Image endpoints benchmark: per-image time of both public endpoints on the tiny demo models
 * at 512² and 1024² (their default steps: quality 28, fast 4), and Gantry's own overhead
 * around the pipeline = runsync wall time − the pipeline time the worker measured
 * (tokenize → denoise → decode → encode). The overhead holds the HTTP round trip, queueing,
 * the job-take hand-off, the job-done post, the store writes and the image file write.
 * Aim: overhead < 20 ms per image.
 *
 * The gateway (with its two image worker processes) runs in this process via
 * dist/src/server.js on a temp data folder; requests are sequential (one image at a time).
 *
 * usage: npm run build && node bench/images.js [--images N] [--json]
 *
 * GPU mode (docs/benchmarks.md): the pipeline alone, in this process, on one CUDA device —
 * images/s and the GPU memory this process holds, at 512² and 1024², batch 1 and 4 (batches
 * of requests as the image worker forms them across jobs, GANTRY_IMAGE_BATCH):
 *
 *   npm run build && node bench/images.js --gpu --model /models/flux-schnell-onnx [--device cuda:0]
 *     [--steps N] [--batches N] [--text-encoders device|cpu|offload] [--json]
 *
 * Without an NVIDIA GPU and onnxruntime's CUDA provider it stops at once, saying what is missing.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';

const { values: args } = parseArgs({
  options: {
    images: { type: 'string', default: '10' },
    json: { type: 'boolean', default: false },
    gpu: { type: 'boolean', default: false },
    model: { type: 'string' },
    device: { type: 'string', default: 'cuda:0' },
    steps: { type: 'string' },
    batches: { type: 'string', default: '5' },
    'text-encoders': { type: 'string', default: 'device' },
  },
});
if (args.gpu) {
  await gpuBench().catch((err) => {
    console.error(`bench/images.js --gpu: ${err instanceof Error ? err.message : String(err)}`);
    process.exitCode = 1;
  });
  process.exit();
}
const N = Math.max(1, Math.min(200, Number(args.images)));
const { startGantry } = await import('../dist/src/server.js');
const { IMAGE_DEFAULTS } = await import('../dist/src/config/image-config.js');

const dataDir = mkdtempSync(join(os.tmpdir(), 'gantry-bench-images-'));
const adminKey = `bench-admin-${Date.now()}-key`;
const gantry = await startGantry({
  env: {},
  config: { port: 0, host: '127.0.0.1', dataDir, adminKey, logLevel: process.env.GANTRY_LOG_LEVEL ?? 'silent', rateLimits: false, images: { ...IMAGE_DEFAULTS, workers: true } },
});

async function runsync(endpoint, input) {
  const t0 = performance.now();
  const res = await fetch(`${gantry.url}/v2/${endpoint}/runsync`, {
    method: 'POST',
    headers: { authorization: `Bearer ${adminKey}`, 'content-type': 'application/json' },
    body: JSON.stringify({ input }),
  });
  const body = await res.json();
  const wall = performance.now() - t0;
  if (body.status !== 'COMPLETED') throw new Error(`job not completed: ${JSON.stringify(body)}`);
  return { wall, pipeline: body.output.timings.pipeline_ms, store: body.output.timings.store_ms, delay: body.delayTime, execution: body.executionTime };
}

const pct = (xs, p) => {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.floor((p / 100) * s.length))];
};
const fmt = (ms) => `${ms.toFixed(1)} ms`;

const rows = [];
try {
  for (const endpoint of ['image-quality', 'image-fast']) {
    for (const size of [512, 1024]) {
      const input = { prompt: 'a lighthouse on a cliff at dusk', width: size, height: size, seed: 1 };
      for (let i = 0; i < 2; i++) await runsync(endpoint, input); // warm-up (model pages, JIT)
      const runs = [];
      for (let i = 0; i < N; i++) runs.push(await runsync(endpoint, { ...input, seed: i + 1 }));
      const overhead = runs.map((r) => r.wall - r.pipeline);
      rows.push({
        endpoint,
        size: `${size}x${size}`,
        steps: endpoint === 'image-quality' ? 28 : 4,
        images: N,
        wallP50: pct(runs.map((r) => r.wall), 50),
        pipelineP50: pct(runs.map((r) => r.pipeline), 50),
        storeP50: pct(runs.map((r) => r.store), 50),
        overheadP50: pct(overhead, 50),
        overheadP90: pct(overhead, 90),
        // Split of the overhead: queue → taken (delayTime), taken → result stored beyond the pipeline, the rest (HTTP both ways).
        delayP50: pct(runs.map((r) => r.delay), 50),
        workerExtraP50: pct(runs.map((r) => r.execution - r.pipeline), 50),
      });
    }
  }
} catch (err) {
  console.error(err);
  process.exitCode = 1;
}

if (args.json) {
  console.log(JSON.stringify({ cpus: os.cpus().length, node: process.version, rows }, null, 2));
} else {
  console.log(`image endpoints on the tiny demo models, ${os.cpus().length} CPUs, node ${process.version}, ${N} images per row (sequential)`);
  console.log('| endpoint | size | steps | runsync p50 | pipeline p50 | image write p50 | overhead p50 | overhead p90 | of which queue→taken p50 | of which taken→done beyond the pipeline p50 | aim < 20 ms |');
  console.log('|---|---|---|---|---|---|---|---|---|---|---|');
  for (const r of rows) {
    console.log(`| ${r.endpoint} | ${r.size} | ${r.steps} | ${fmt(r.wallP50)} | ${fmt(r.pipelineP50)} | ${fmt(r.storeP50)} | ${fmt(r.overheadP50)} | ${fmt(r.overheadP90)} | ${fmt(r.delayP50)} | ${fmt(r.workerExtraP50)} | ${r.overheadP50 < 20 ? 'met' : 'miss'} |`);
  }
}
// Close after printing, and never wait on it for long: the figures are already out.
await Promise.race([gantry.close(), new Promise((r) => setTimeout(r, 15_000))]);
rmSync(dataDir, { recursive: true, force: true });
process.exit();

/** Peak GPU memory of this process (MiB) while `work` runs, sampled from nvidia-smi every 200 ms. */
async function withGpuMemory(work) {
  const { execFileSync } = await import('node:child_process');
  const sample = () => {
    try {
      const out = execFileSync('nvidia-smi', ['--query-compute-apps=pid,used_memory', '--format=csv,noheader,nounits'], { encoding: 'utf8', timeout: 5000 });
      return out.split('\n').map((l) => l.split(',').map((x) => x.trim())).filter(([pid]) => Number(pid) === process.pid).reduce((sum, [, mb]) => sum + Number(mb), 0);
    } catch {
      return NaN;
    }
  };
  let peak = sample();
  const timer = setInterval(() => (peak = Math.max(peak, sample())), 200);
  try {
    const result = await work();
    return { result, peakMiB: Math.max(peak, sample()) };
  } finally {
    clearInterval(timer);
  }
}

async function gpuBench() {
  const { loadPipeline } = await import('../dist/src/images/pipeline.js');
  const { parseImageDevice } = await import('../dist/src/config/image-config.js');
  const { ensureTinyModel } = await import('../dist/src/images/tiny-models.js');
  const device = parseImageDevice(args.device);
  if (!device || device.provider !== 'cuda') throw new Error(`--device must be cuda or cuda:N, got ${args.device}`);
  let model = args.model ?? process.env.GANTRY_IMAGE_QUALITY_MODEL;
  if (!model) {
    model = join(mkdtempSync(join(os.tmpdir(), 'gantry-bench-gpu-')), 'tiny');
    ensureTinyModel(model, 'fast');
    console.error('no --model: timing the tiny demo model, which says nothing about a real one');
  }
  const pipe = await loadPipeline(model, { device, textEncoders: args['text-encoders'] });
  const steps = Number(args.steps ?? pipe.defaults.steps);
  const batches = Math.max(1, Number(args.batches));
  const rows = [];
  for (const size of [512, 1024]) {
    for (const batch of [1, 4]) {
      const requests = (round) => Array.from({ length: batch }, (_, i) => ({ prompt: 'a lighthouse on a cliff at dusk', negativePrompt: '', width: size, height: size, steps, guidance: pipe.defaults.guidance, seed: round * 16 + i }));
      await pipe.generateBatch(requests(0)); // warm-up: kernels, arena
      const { result: seconds, peakMiB } = await withGpuMemory(async () => {
        const t0 = performance.now();
        for (let r = 1; r <= batches; r++) for (const image of await pipe.generateBatch(requests(r))) if (image instanceof Error) throw image;
        return (performance.now() - t0) / 1000;
      });
      rows.push({ size: `${size}x${size}`, batch, steps, images: batch * batches, imagesPerSecond: (batch * batches) / seconds, secondsPerImage: seconds / (batch * batches), peakGpuMiB: peakMiB });
    }
  }
  await pipe.release();
  if (args.json) {
    console.log(JSON.stringify({ model, device: args.device, family: pipe.defaults.family, textEncoders: args['text-encoders'], node: process.version, rows }, null, 2));
    return;
  }
  console.log(`${pipe.defaults.family} from ${model} on ${args.device}, ${steps} steps, text encoders: ${args['text-encoders']}, node ${process.version}`);
  console.log('| size | batch | images | images/s | s/image | peak GPU memory of this process |');
  console.log('|---|---|---|---|---|---|');
  for (const r of rows) console.log(`| ${r.size} | ${r.batch} | ${r.images} | ${r.imagesPerSecond.toFixed(3)} | ${r.secondsPerImage.toFixed(2)} | ${Number.isNaN(r.peakGpuMiB) ? '?' : `${r.peakGpuMiB} MiB`} |`);
}
