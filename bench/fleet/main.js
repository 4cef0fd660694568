/**
 * The fleet simulator (docs/scaling.md, "The fleet simulator"): runs the real allocator,
 * planScale and placement on a virtual clock, today's independent policy and the allocator
 * side by side, over a fleet file and a workload, and times one allocator decision at 10,000
 * GPUs and 1,000 endpoints.
 *
 * usage: npm run bench:fleet [-- --fleet F --workload W] [--json] [--skip-decision]
 *   without --fleet/--workload: every shipped workload (bench/fleet/workloads/<name>.{fleet.json,jsonl})
 *   --json: one object, { workloads: { <name>: { independent, allocator } }, decision, passes }
 *   (decision: a fresh fleet for each decision; passes: successive passes over one fleet)
 */
import { readFileSync, readdirSync } from 'node:fs';
import { basename, dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { simulate } from './sim.js';
import { timeDecisions, timePasses } from './decision-time.js';

const HERE = dirname(fileURLToPath(import.meta.url));
const args = process.argv.slice(2);
const flag = (name) => {
  const i = args.indexOf(name);
  return i >= 0 ? args[i + 1] : undefined;
};
const json = args.includes('--json');

function readWorkload(path) {
  return readFileSync(path, 'utf8')
    .split('\n')
    .filter((l) => l.trim() !== '')
    .map((l, i) => {
      const j = JSON.parse(l);
      if (typeof j.at !== 'number' || typeof j.endpoint !== 'string' || typeof j.runMs !== 'number') throw new Error(`${path}:${i + 1}: want {"at": ms, "endpoint": id, "runMs": ms}`);
      return j;
    })
    .sort((a, b) => a.at - b.at);
}

const runs = [];
if (flag('--fleet') || flag('--workload')) {
  if (!flag('--fleet') || !flag('--workload')) throw new Error('give both --fleet and --workload');
  runs.push({ name: basename(flag('--workload')).replace(/\.jsonl$/, ''), fleet: flag('--fleet'), workload: flag('--workload') });
} else {
  const dir = join(HERE, 'workloads');
  for (const f of readdirSync(dir).filter((f) => f.endsWith('.jsonl')).sort()) {
    const name = f.replace(/\.jsonl$/, '');
    runs.push({ name, fleet: join(dir, `${name}.fleet.json`), workload: join(dir, f) });
  }
}

const results = {};
for (const run of runs) {
  const fleet = JSON.parse(readFileSync(run.fleet, 'utf8'));
  const workload = readWorkload(run.workload);
  results[run.name] = { independent: simulate(fleet, workload, 'independent'), allocator: simulate(fleet, workload, 'allocator') };
}
const decision = args.includes('--skip-decision') ? null : timeDecisions({ gpus: 10_000, endpoints: 1_000 });
const passes = args.includes('--skip-decision') ? null : timePasses({ gpus: 10_000, endpoints: 1_000 });

/** One case's decision times: the process's CPU, the wall clock, and the first decisions'. */
function printTimes(what, t) {
  const line = (x) => `mean ${x.meanMs.toFixed(2)} ms, median ${x.medianMs.toFixed(2)} ms, p95 ${x.p95Ms.toFixed(2)} ms, max ${x.maxMs.toFixed(2)} ms`;
  console.log(`  ${what}, ${t.runs} decisions after ${t.warmUp}:`);
  console.log(`    CPU (all threads): ${line(t)}`);
  console.log(`    wall clock: ${line(t.wall)}`);
  console.log(`    the first ${t.firstMs.length} decisions (all threads): ${t.firstMs.map((ms) => ms.toFixed(1)).join(', ')} ms`);
}

if (json) {
  console.log(JSON.stringify({ workloads: results, decision, passes }, null, 2));
} else {
  const s = (ms) => (ms === null || ms === undefined ? '-' : `${(ms / 1000).toFixed(1)} s`);
  for (const [name, r] of Object.entries(results)) {
    console.log(`\n${name}`);
    console.log(`  ${'policy'.padEnd(12)} ${'GPU use'.padStart(8)} ${'cold'.padStart(5)} ${'preempt'.padStart(7)} ${'lost'.padStart(6)} ${'unfinished'.padStart(10)} ${'max delay'.padStart(10)}  queue delay p50 / p95 / p99 by priority;  Jain by priority`);
    for (const p of ['independent', 'allocator']) {
      const x = r[p];
      const delays = Object.entries(x.queueDelayMs)
        .sort((a, b) => Number(b[0]) - Number(a[0]))
        .map(([prio, d]) => `${prio}: ${s(d.p50)} / ${s(d.p95)} / ${s(d.p99)}`)
        .join('; ');
      const jain = Object.entries(x.jain).map(([prio, j]) => `${prio}: ${j.toFixed(3)}`).join('; ') || '-';
      console.log(`  ${p.padEnd(12)} ${(100 * x.gpuUse).toFixed(1).padStart(7)}% ${String(x.coldStarts).padStart(5)} ${String(x.preemptions).padStart(7)} ${(100 * x.lostToPreemption).toFixed(1).padStart(5)}% ${String(x.unfinished).padStart(10)} ${s(x.maxDelayMs).padStart(10)}  ${delays};  Jain ${jain}`);
    }
    const ratio = r.allocator.gpuUse / r.independent.gpuUse;
    console.log(`  allocator ÷ independent GPU use: ${ratio.toFixed(2)}×`);
  }
  if (decision) {
    console.log(`\nallocator decision at ${decision.gpus} GPUs (${decision.hosts} hosts), ${decision.endpoints} endpoints, ${decision.workers} workers, ${decision.wanting} endpoints wanting:`);
    printTimes('a fresh fleet each', decision);
  }
  if (passes) printTimes('successive passes (1% of workers replaced, unchanged hosts kept)', passes);
  console.log('\nGPU use: GPU-seconds of completed runs within the workload span ÷ (GPUs × span); lost: GPU-seconds of preempted runs (not counted in use), same scale.');
  console.log('Delay: arrival to the start of the run that completed.');
  console.log("Jain: over each priority's endpoints, GPUs held ÷ their weighted max-min fair share, summed over contended passes (1 = exactly fair).");
}
