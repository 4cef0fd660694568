/**
 * Times one allocator decision (allocate() from dist/) on a large synthetic fleet: hosts of 8
 * GPUs of three models, 95% of the GPUs held by workers of the endpoints (a third of them
 * busy, a fifth of the endpoints preemptible), a third of the endpoints wanting 1–4 more
 * workers (contention: most must wait, reclaim or preempt). Timed around allocate() alone,
 * after WARM_UP decisions, two ways (timer): the process's CPU time (process.cpuUsage: every
 * thread, the collector's helpers and the compiler's among them) and the wall clock (what the
 * gateway's event loop waits for). The first decisions (code not yet optimized, compiled on
 * other threads) are given apart (`firstMs`, CPU).
 *
 * Two ways to feed it:
 * - `fresh` (timeDecisions): every decision on a fleet built anew just before it, every host
 *   and worker a new object. A scavenge that falls inside the decision then copies that whole
 *   young fleet (~8 MB): the worst case, and the figure measured before 2026-11-27 evening.
 * - `passes` (timePasses): the autoscaler's case. One fleet, 1% of its workers replaced between
 *   two decisions; a host whose workers did not change keeps its load object (as
 *   DockerHosts.loads() gives it again), one that changed gets a new one; every endpoint's
 *   demand is made anew each pass (as the autoscaler's plan() does), its wants drawn again.
 */
import { allocate } from '../../dist/src/services/allocator.js';
import { seededRandom as rng } from '../../dist/src/util/seeded-random.js';

const TYPES = ['L4', 'A100-80GB', 'H100'];
/**
 * Decisions made before the timed ones: the autoscaler decides once a pass (a second), so its
 * decisions past the first 40 s are made by optimized code; the first WARM_UP are in `firstMs`.
 */
const WARM_UP = 40;
/** Of the warm-up decisions, how many `firstMs` gives. */
const FIRST = 5;

/**
 * Times decisions: `time(i, fn)` runs fn, counting it when `i` (from 0) is past the warm-up;
 * CPU time (process.cpuUsage) and wall-clock time (performance.now) alike. Linux accounts CPU
 * time per scheduler tick (4 ms at HZ=250), so one decision's CPU time is off by a millisecond
 * or two either way (a 2 ms spin read 1.5–3.5 ms here); the wall clock is exact, and on a
 * machine with a core to spare it is the decision's time, its collections' pauses included.
 */
function timer(warmUp) {
  const cpu = [];
  const wall = [];
  const first = [];
  return {
    time(i, fn) {
      const before = process.cpuUsage();
      const start = performance.now();
      fn();
      const w = performance.now() - start;
      const used = process.cpuUsage(before);
      const ms = (used.user + used.system) / 1000;
      if (i < Math.min(FIRST, warmUp)) first.push(ms);
      if (i < warmUp) return;
      cpu.push(ms);
      wall.push(w);
    },
    summary() {
      return { ...timeSummary(cpu), wall: timeSummary(wall), warmUp, firstMs: first };
    },
  };
}

/** Endpoint `i`'s settings: priorities 10/50/50/90, weights 1–3, every fifth preemptible, every tenth keeps one worker, every other one takes two GPU models in order. */
function endpointSettings(i) {
  return {
    id: `ep-${i}`,
    priority: [10, 50, 50, 90][i % 4],
    shareWeight: 1 + (i % 3),
    preemptible: i % 5 === 0,
    workersMin: i % 10 === 0 ? 1 : 0,
    gpus: 1,
    ...(i % 2 === 0 ? { gpuTypes: [TYPES[i % 3], TYPES[(i + 1) % 3]] } : {}),
  };
}

/** Mean, median, p95 and max of the decision times (ms), which it sorts. */
function timeSummary(times) {
  times.sort((a, b) => a - b);
  return {
    meanMs: times.reduce((a, b) => a + b, 0) / times.length,
    medianMs: times[Math.floor((times.length - 1) / 2)],
    p95Ms: times[Math.floor(0.95 * (times.length - 1))],
    maxMs: times[times.length - 1],
  };
}

function buildInput(gpus, endpointCount, r) {
  const hosts = [];
  for (let i = 0; i < gpus / 8; i++) {
    const type = TYPES[i % TYPES.length];
    hosts.push({ name: `h${i}`, up: true, gpus: Array.from({ length: 8 }, (_, k) => String(k)), gpuTypes: Array(8).fill(type), gpusInUse: new Set(), workers: 0, holders: new Map() });
  }
  const endpoints = Array.from({ length: endpointCount }, (_, i) => ({ ...endpointSettings(i), workers: [], want: 0, waitingSince: null }));
  let held = 0;
  let n = 0;
  for (const host of hosts) {
    for (const id of host.gpus) {
      if (r() > 0.95) continue;
      const ep = endpoints[Math.floor(r() * endpoints.length)];
      const wid = `${ep.id}-w${++n}`;
      host.gpusInUse.add(id);
      host.holders.set(wid, [id]);
      host.workers++;
      ep.workers.push({ id: wid, busy: r() < 0.33, starting: false });
      held++;
    }
  }
  for (const ep of endpoints) {
    if (r() < 0.33) {
      ep.want = 1 + Math.floor(r() * 4);
      ep.waitingSince = 1_000_000 - Math.floor(r() * 300_000);
    }
  }
  // The demands as the autoscaler makes them (every field present, in one order; timePasses's too): the drafts above, made by spreads, came in shapes the gateway never makes.
  const demands = endpoints.map((e) => ({ id: e.id, priority: e.priority, shareWeight: e.shareWeight, preemptible: e.preemptible, workersMin: e.workersMin, gpus: e.gpus, gpuTypes: e.gpuTypes, image: undefined, workers: e.workers, paused: undefined, want: e.want, waitingSince: e.waitingSince }));
  return { now: 1_000_000, hosts, endpoints: demands, workers: held, wanting: endpoints.filter((e) => e.want > 0).length };
}

/** Times `runs` decisions on fresh synthetic fleets of `gpus` GPUs and `endpoints` endpoints, after `warmUp` (`decide`: as timePasses's). */
export function timeDecisions({ gpus, endpoints, runs = 30, warmUp = WARM_UP, decide = allocate }) {
  const r = rng(42);
  const clock = timer(warmUp);
  let last;
  for (let i = 0; i < runs + warmUp; i++) {
    const input = buildInput(gpus, endpoints, r);
    last = input;
    clock.time(i, () => decide({ now: input.now, hosts: input.hosts, endpoints: input.endpoints }));
  }
  return { gpus, hosts: gpus / 8, endpoints, workers: last.workers, wanting: last.wanting, runs, ...clock.summary() };
}

/** A host's load as DockerHosts.loads() makes it, from its workers (worker id → device ids). */
function hostLoad(name, type, workers) {
  return {
    name,
    up: true,
    gpus: Array.from({ length: 8 }, (_, k) => String(k)),
    gpuTypes: Array(8).fill(type),
    gpusInUse: new Set([...workers.values()].flat()),
    workers: workers.size,
    holders: new Map(workers),
  };
}

/**
 * Times `runs` decisions on successive passes over one fleet of `gpus` GPUs and `endpoints`
 * endpoints (see the top: 1% of the workers replaced between passes, unchanged hosts' loads kept).
 * `decide`: what each pass calls with its input (allocate; passes-instructions.js gives a
 * function that does nothing, to count what the passes cost without the decision).
 */
export function timePasses({ gpus, endpoints: endpointCount, runs = 30, warmUp = WARM_UP, decide = allocate }) {
  const r = rng(42);
  const hostCount = gpus / 8;
  const types = Array.from({ length: hostCount }, (_, i) => TYPES[i % TYPES.length]);
  const hostWorkers = Array.from({ length: hostCount }, () => new Map());
  const settings = Array.from({ length: endpointCount }, (_, i) => endpointSettings(i));
  /** Worker id → [endpoint index, host index]. */
  const placed = new Map();
  let n = 0;
  const add = (h, device) => {
    const e = Math.floor(r() * endpointCount);
    const id = `${settings[e].id}-${(++n).toString(16).padStart(8, '0')}`;
    hostWorkers[h].set(id, [device]);
    placed.set(id, [e, h]);
  };
  for (let h = 0; h < hostCount; h++) for (let k = 0; k < 8; k++) if (r() <= 0.95) add(h, String(k));
  const loads = hostWorkers.map((w, h) => hostLoad(`h${h}`, types[h], w));
  const ids = () => [...placed.keys()];
  const clock = timer(warmUp);
  let last;
  for (let i = 0; i < runs + warmUp; i++) {
    // 1% of the workers go, as many start on free devices; their hosts get new loads.
    const all = ids();
    const changed = new Set();
    for (let k = 0; k < Math.ceil(all.length / 100); k++) {
      const id = all[Math.floor(r() * all.length)];
      const at = placed.get(id);
      if (!at) continue;
      const [, h] = at;
      const [device] = hostWorkers[h].get(id);
      hostWorkers[h].delete(id);
      placed.delete(id);
      const h2 = Math.floor(r() * hostCount);
      const used = new Set([...hostWorkers[h2].values()].flat());
      const free = Array.from({ length: 8 }, (_, d) => String(d)).filter((d) => !used.has(d));
      add(free.length > 0 ? h2 : h, free.length > 0 ? free[0] : device);
      changed.add(h).add(h2);
    }
    for (const h of changed) loads[h] = hostLoad(`h${h}`, types[h], hostWorkers[h]);
    // Every endpoint's demand made anew, as the autoscaler's pass does (every field present, in one order).
    const byEndpoint = settings.map(() => []);
    for (const [id, [e]] of placed) byEndpoint[e].push({ id, busy: r() < 0.33, starting: false });
    const endpoints = settings.map((s, e) => {
      const wants = r() < 0.33;
      return { id: s.id, priority: s.priority, shareWeight: s.shareWeight, preemptible: s.preemptible, workersMin: s.workersMin, gpus: s.gpus, gpuTypes: s.gpuTypes, image: undefined, workers: byEndpoint[e], paused: undefined, want: wants ? 1 + Math.floor(r() * 4) : 0, waitingSince: wants ? 1_000_000 - Math.floor(r() * 300_000) : null };
    });
    const hosts = [...loads];
    last = { workers: placed.size, wanting: endpoints.filter((e) => e.want > 0).length };
    clock.time(i, () => decide({ now: 1_000_000, hosts, endpoints }));
  }
  return { gpus, hosts: hostCount, endpoints: endpointCount, workers: last.workers, wanting: last.wanting, runs, ...clock.summary() };
}
