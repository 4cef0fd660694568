#!/usr/bin/env node
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
 */
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';

const { values: args } = parseArgs({ options: { images: { type: 'string', default: '10' }, json: { type: 'boolean', default: false } } });
const N = Math.max(1, Math.min(200, Number(args.images)));
const { startGantry } = await import('../dist/src/server.js');
const { IMAGE_DEFAULTS } = await import('../dist/src/images/image-config.js');

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
