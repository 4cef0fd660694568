#!/usr/bin/env node
// What the console's per-minute recorder costs a job on the hot path: the observer calls one
// job makes (submitted, started, ended), timed in-process over many jobs. Compare with the
// gateway CPU per job in docs/benchmarks.md. usage: npm run build && node bench/minute-recorder.js
import { createMinuteRecorder } from '../dist/src/console/minute-recorder.js';

const N = 2_000_000;
const recorder = createMinuteRecorder(Date.now);
const endpoints = ['echo', 'image-fast', 'image-quality', 'llm'];
const jobs = endpoints.map((endpointId) => ({ endpointId, status: 'COMPLETED', queuedAt: Date.now() - 5, startedAt: Date.now() - 3, finishedAt: Date.now() }));
const one = [undefined];
function round(n) {
  for (let i = 0; i < n; i++) {
    const job = jobs[i & 3];
    one[0] = job;
    recorder.observer.submitted(job);
    recorder.observer.started(one);
    recorder.observer.ended(job);
  }
}
round(200_000); // warm-up
const results = [];
for (let r = 0; r < 5; r++) {
  const t0 = process.hrtime.bigint();
  round(N);
  results.push(Number(process.hrtime.bigint() - t0) / N);
}
results.sort((a, b) => a - b);
console.log(`minute recorder: ${results[2].toFixed(1)} ns per job (median of 5 × ${N} jobs; min ${results[0].toFixed(1)}, max ${results[4].toFixed(1)})`);
