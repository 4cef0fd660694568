/**
 * Writes the fleet simulator's shipped workloads (bench/fleet/workloads/): for each, a fleet
 * file (<name>.fleet.json: hosts, GPU models, endpoint settings) and a workload (<name>.jsonl:
 * one job a line, {"at": ms, "endpoint": id, "runMs": ms}), from a fixed seed, so the files
 * can be made again byte for byte: `npm run build && node bench/fleet/gen-workloads.js` (the
 * generator is the project's seeded one, src/util/seeded-random.ts).
 */
import { mkdirSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { seededRandom as rng } from '../../dist/src/util/seeded-random.js';

const OUT = join(dirname(fileURLToPath(import.meta.url)), 'workloads');

/** 16 GPUs: two hosts of 4 L4, two of 4 A100-80GB. */
const HOSTS = [
  { name: 'l4-a', gpus: { L4: 4 } },
  { name: 'l4-b', gpus: { L4: 4 } },
  { name: 'a100-a', gpus: { 'A100-80GB': 4 } },
  { name: 'a100-b', gpus: { 'A100-80GB': 4 } },
];
const TIMING = { passMs: 1_000, coldStartMs: 20_000, stopMs: 2_000 };
const MINUTE = 60_000;

function write(name, fleet, jobs) {
  jobs.sort((a, b) => a.at - b.at);
  writeFileSync(join(OUT, `${name}.fleet.json`), `${JSON.stringify({ ...TIMING, hosts: HOSTS, ...fleet }, null, 2)}\n`);
  writeFileSync(join(OUT, `${name}.jsonl`), jobs.map((j) => JSON.stringify({ at: Math.round(j.at), endpoint: j.endpoint, runMs: Math.round(j.runMs) })).join('\n') + '\n');
  console.log(`${name}: ${jobs.length} jobs`);
}

/** Four endpoints of one priority, each in bursts of 20–40 jobs at random times over 40 minutes; idle workers kept 3 minutes. */
function bursty() {
  const r = rng(23);
  const endpoints = ['chat', 'embed', 'whisper', 'sdxl'].map((id) => ({ id, workersMax: 16, idleTimeout: 180, scalerType: 'REQUEST_COUNT', scalerValue: 1, gpus: 1 }));
  const jobs = [];
  for (const e of endpoints) {
    for (let b = 0; b < 5; b++) {
      const start = r() * 40 * MINUTE;
      const n = 20 + Math.floor(r() * 20);
      for (let i = 0; i < n; i++) jobs.push({ at: start + r() * 20_000, endpoint: e.id, runMs: 15_000 + r() * 30_000 });
    }
  }
  write('bursty', { endpoints }, jobs);
}

/** Three endpoints whose load rises and falls over a 20-minute "day", each a third of a day apart. */
function diurnal() {
  const r = rng(7);
  const endpoints = ['eu', 'us', 'asia'].map((id) => ({ id, workersMax: 16, idleTimeout: 300, scalerType: 'REQUEST_COUNT', scalerValue: 2, gpus: 1 }));
  const jobs = [];
  endpoints.forEach((e, k) => {
    for (let t = 0; t < 60 * MINUTE; t += 1_000) {
      const rate = 0.15 * (1 + Math.sin((2 * Math.PI * t) / (20 * MINUTE) + (k * 2 * Math.PI) / 3)); // jobs a second
      if (r() < rate) jobs.push({ at: t, endpoint: e.id, runMs: 20_000 + r() * 20_000 });
    }
  });
  write('diurnal', { endpoints }, jobs);
}

/** One preemptible batch endpoint floods the fleet; three quiet ones of the same priority send a job every ~20 s. */
function noisy() {
  const r = rng(99);
  const endpoints = [
    { id: 'noisy', workersMax: 16, idleTimeout: 60, scalerType: 'REQUEST_COUNT', scalerValue: 1, gpus: 1, preemptible: true },
    ...['q1', 'q2', 'q3'].map((id) => ({ id, workersMax: 8, idleTimeout: 60, scalerType: 'REQUEST_COUNT', scalerValue: 1, gpus: 1 })),
  ];
  const jobs = [];
  for (let i = 0; i < 500; i++) jobs.push({ at: MINUTE + r() * 5 * MINUTE, endpoint: 'noisy', runMs: 40_000 + r() * 40_000 });
  for (const q of ['q1', 'q2', 'q3']) for (let t = r() * 20_000; t < 30 * MINUTE; t += 10_000 + r() * 20_000) jobs.push({ at: t, endpoint: q, runMs: 20_000 + r() * 20_000 });
  write('noisy', { endpoints }, jobs);
}

/** Priorities 90 / 50 / 10: short interactive bursts, a steady service, and a preemptible batch backlog. */
function mixed() {
  const r = rng(5);
  const endpoints = [
    { id: 'interactive', priority: 90, workersMax: 8, idleTimeout: 30, scalerType: 'REQUEST_COUNT', scalerValue: 1, gpus: 1 },
    { id: 'service', priority: 50, workersMax: 8, idleTimeout: 120, scalerType: 'REQUEST_COUNT', scalerValue: 2, gpus: 1, gpuTypes: ['A100-80GB', 'L4'] },
    { id: 'batch', priority: 10, workersMax: 16, idleTimeout: 60, scalerType: 'REQUEST_COUNT', scalerValue: 1, gpus: 2, preemptible: true },
  ];
  const jobs = [];
  for (let i = 0; i < 150; i++) jobs.push({ at: r() * 10 * MINUTE, endpoint: 'batch', runMs: 120_000 + r() * 120_000 });
  for (let t = 0; t < 40 * MINUTE; t += 3_000 + r() * 6_000) jobs.push({ at: t, endpoint: 'service', runMs: 15_000 + r() * 15_000 });
  for (let b = 0; b < 8; b++) {
    const start = 2 * MINUTE + r() * 36 * MINUTE;
    for (let i = 0; i < 12; i++) jobs.push({ at: start + r() * 10_000, endpoint: 'interactive', runMs: 5_000 + r() * 10_000 });
  }
  write('mixed', { endpoints }, jobs);
}

mkdirSync(OUT, { recursive: true });
bursty();
diurnal();
noisy();
mixed();
