/**
 * Successive passes for counting instructions (docs/scaling.md, "A decision under 10 ms"):
 * `runs` passes of bench:fleet's `passes` case (10,000 GPUs, 1,000 endpoints), with the
 * allocator or, with --no-allocate, without it; the difference of two callgrind counts,
 * divided by the passes, is what one decision costs, whatever the machine's load:
 *
 *   valgrind --tool=callgrind --callgrind-out-file=/tmp/with.out node --single-threaded bench/fleet/passes-instructions.js 35
 *   valgrind --tool=callgrind --callgrind-out-file=/tmp/without.out node --single-threaded bench/fleet/passes-instructions.js 35 --no-allocate
 *   (each prints its total on stderr: "Collected : N"; (N_with − N_without) ÷ 35 per decision;
 *   add --predictable --no-memory-reducer to node, or the counts move by 20% from run to run;
 *   --fresh: a fleet made anew for each decision, bench:fleet's `decision` case)
 */
import { timeDecisions, timePasses } from './decision-time.js';

const runs = Number(process.argv[2] ?? 35);
const skip = process.argv.includes('--no-allocate');
// --fresh: bench:fleet's `decision` case (a fleet made anew for each decision) instead.
const time = process.argv.includes('--fresh') ? timeDecisions : timePasses;
// `runs` passes in all: 5 of warm-up, then the `runs − 5` timed (instructions count every pass alike).
const out = time({ gpus: 10_000, endpoints: 1_000, runs: runs - 5, warmUp: 5, ...(skip ? { decide: () => {} } : {}) });
console.log(JSON.stringify({ passes: runs, fresh: time === timeDecisions, allocate: !skip, workers: out.workers, wanting: out.wanting }));
