/**
 * The fleet simulator's engine (docs/scaling.md, "The fleet simulator"): a virtual clock, jobs
 * from a workload, workers that cold-start, run jobs and stop, and every `passMs` a scaler
 * pass that runs the real code from dist/: planScale (services/scale-policy.js) for each
 * endpoint, then either
 * - `independent` (today's policy before the allocator): endpoint by endpoint, each start
 *   placed at once by placeWorker (pool/docker/placement.js) where there is room, else waiting
 *   for room and tried again next pass; or
 * - `allocator`: one allocate() (services/allocator.js) across all endpoints, its starts placed
 *   by placeWorker, its reclaims and preemptions carried out.
 * What is not real: the worker (a timer for its cold start, each job's run time and its exit).
 */
import { allocate } from '../../dist/src/services/allocator.js';
import { planScale } from '../../dist/src/services/scale-policy.js';
import { placeWorker } from '../../dist/src/pool/docker/placement.js';

/** A min-heap of events by time (then by insertion order). */
class Events {
  constructor() {
    this.items = [];
    this.seq = 0;
  }
  push(t, fn) {
    const a = this.items;
    a.push({ t, n: this.seq++, fn });
    for (let i = a.length - 1; i > 0; ) {
      const p = (i - 1) >> 1;
      if (a[p].t < a[i].t || (a[p].t === a[i].t && a[p].n < a[i].n)) break;
      [a[i], a[p]] = [a[p], a[i]];
      i = p;
    }
  }
  pop() {
    const a = this.items;
    const top = a[0];
    const last = a.pop();
    if (a.length > 0) {
      a[0] = last;
      for (let i = 0; ; ) {
        const l = 2 * i + 1;
        const r = l + 1;
        let m = i;
        const less = (x, y) => a[x].t < a[y].t || (a[x].t === a[y].t && a[x].n < a[y].n);
        if (l < a.length && less(l, m)) m = l;
        if (r < a.length && less(r, m)) m = r;
        if (m === i) break;
        [a[i], a[m]] = [a[m], a[i]];
        i = m;
      }
    }
    return top;
  }
  get size() {
    return this.items.length;
  }
}

/** The hosts of a fleet file as placement sees them: `gpus` a count (unnamed model) or {model: count}. */
function hostsOf(fleet) {
  return fleet.hosts.map((h) => {
    const types = typeof h.gpus === 'number' ? Array(h.gpus).fill('') : Object.entries(h.gpus).flatMap(([t, n]) => Array(n).fill(t));
    return { name: h.name, up: true, gpus: types.map((_, i) => String(i)), gpuTypes: types, gpusInUse: new Set(), workers: 0, holders: new Map() };
  });
}

const ENDPOINT_DEFAULTS = { priority: 50, shareWeight: 1, preemptible: false, workersMin: 0, workersMax: 4, idleTimeout: 60, scalerType: 'QUEUE_DELAY', scalerValue: 4, gpus: 1 };

/**
 * Runs one policy over the workload; returns the figures (see report in main.js).
 * @param {object} fleet the fleet file
 * @param {{at: number, endpoint: string, runMs: number}[]} workload sorted by `at`
 * @param {'independent' | 'allocator'} policy
 */
export function simulate(fleet, workload, policy) {
  const passMs = fleet.passMs ?? 1_000;
  const coldStartMs = fleet.coldStartMs ?? 20_000;
  const stopMs = fleet.stopMs ?? 2_000;
  const windowMs = workload.length > 0 ? workload[workload.length - 1].at : 0;
  const capMs = windowMs * 4 + 600_000;
  const hosts = hostsOf(fleet);
  // What the allocator is given of each host, as DockerHosts.loads() gives it: the same object
  // again while the host's workers did not change, a new one (a copy) once they did; the hosts
  // above change in place (an allocator that kept what it read of each load would misread them).
  const loads = new Map();
  const loadOf = (h) => {
    let load = loads.get(h);
    if (!load) loads.set(h, (load = { ...h, gpusInUse: new Set(h.gpusInUse), holders: new Map(h.holders) }));
    return load;
  };
  const totalGpus = hosts.reduce((n, h) => n + h.gpus.length, 0);
  const eps = fleet.endpoints.map((e) => ({ ...ENDPOINT_DEFAULTS, ...e, queue: [], workers: new Map(), waiting: 0, held: 0, sumHeld: 0, sumFair: 0 }));
  const byId = new Map(eps.map((e) => [e.id, e]));
  const events = new Events();
  const m = { busyGpuMs: 0, lostGpuMs: 0, coldStarts: 0, preemptions: 0, delays: new Map(), done: 0, jobs: workload.length, maxDelayMs: 0 };
  let now = 0;
  let seq = 0;

  const take = (w) => {
    const ep = w.ep;
    if (w.state !== 'serving' || w.job || ep.queue.length === 0) return;
    ep.queue.sort((a, b) => a.at - b.at || a.n - b.n);
    const job = ep.queue.shift();
    w.job = job;
    w.idleSince = null;
    job.startedAt = now;
    job.worker = w;
    const end = now + job.runMs;
    job.end = end;
    events.push(end, () => {
      if (w.job !== job) return; // preempted
      m.busyGpuMs += Math.max(0, Math.min(end, windowMs) - Math.max(job.startedAt, 0)) * ep.gpus;
      const delay = job.startedAt - job.at;
      const list = m.delays.get(ep.priority) ?? [];
      list.push(delay);
      m.delays.set(ep.priority, list);
      m.maxDelayMs = Math.max(m.maxDelayMs, delay);
      m.done++;
      w.job = null;
      if (w.state === 'stopping') return leave(w);
      take(w);
      if (!w.job && ep.queue.length === 0) w.idleSince = now;
    });
  };

  const release = (w) => {
    const host = w.host;
    for (const id of w.devices) host.gpusInUse.delete(id);
    host.holders.delete(w.id);
    host.workers--;
    loads.delete(host);
    w.ep.workers.delete(w.id);
    w.ep.held -= w.devices.length;
  };
  const leave = (w) => {
    w.state = 'gone';
    events.push(now + stopMs, () => release(w));
  };

  const startWorker = (ep) => {
    if (ep.gpus === 0) return false;
    const placed = placeWorker(hosts, { count: ep.gpus, ...(ep.gpuTypes ? { types: ep.gpuTypes } : {}) });
    if ('refused' in placed) return false;
    const host = hosts.find((h) => h.name === placed.host);
    const w = { id: `${ep.id}-${++seq}`, ep, host, devices: placed.deviceIds, state: 'starting', job: null, idleSince: null };
    for (const id of w.devices) host.gpusInUse.add(id);
    host.holders.set(w.id, w.devices);
    host.workers++;
    loads.delete(host);
    ep.workers.set(w.id, w);
    ep.held += w.devices.length;
    m.coldStarts++;
    events.push(now + coldStartMs, () => {
      if (w.state !== 'starting') return;
      w.state = 'serving';
      take(w);
      if (!w.job && ep.queue.length === 0) w.idleSince = now;
    });
    return true;
  };

  /** Stops a worker: idle or starting ones go now; a busy one finishes its job first (a drain), unless preempted. */
  const stopWorker = (w, preempt) => {
    if (w.state === 'gone' || w.state === 'stopping') return;
    if (w.job && preempt) {
      const job = w.job;
      w.job = null;
      job.worker = null;
      job.preemptions = (job.preemptions ?? 0) + 1;
      m.preemptions++;
      // The GPU ran it for nothing: lost work, not use (the run that completes later counts).
      m.lostGpuMs += Math.max(0, Math.min(now, windowMs) - Math.max(job.startedAt, 0)) * w.ep.gpus;
      w.ep.queue.push(job);
    }
    if (w.job) w.state = 'stopping';
    else leave(w);
  };

  const planOf = (ep) => {
    const live = [...ep.workers.values()].filter((w) => w.state === 'starting' || w.state === 'serving');
    const inProgress = live.filter((w) => w.job).length;
    let oldest = null;
    for (const j of ep.queue) if (oldest === null || j.at < oldest) oldest = j.at;
    const stats = { inQueue: ep.queue.length, inQueueNormal: ep.queue.length, oldestNormalQueuedAt: oldest, inProgress, heldBy: new Map() };
    const active = live.map((w) => ({ id: w.id, starting: w.state === 'starting', idleSince: w.idleSince, busy: w.job !== null, waiting: false }));
    for (let i = 0; i < ep.waiting; i++) active.push({ id: `${ep.id}-wait-${i}`, starting: true, idleSince: ep.queue.length === 0 ? now : null, busy: false, waiting: true });
    const plan = planScale({ endpoint: ep, stats, now, workers: active });
    for (const id of plan.stop) {
      if (id.includes('-wait-')) ep.waiting--;
      else stopWorker(ep.workers.get(id), false);
    }
    const running = live.length;
    if (ep.queue.length === 0) ep.waiting = Math.min(ep.waiting, Math.max(0, ep.workersMin - running));
    return { fresh: plan.start, stats };
  };

  const independentPass = () => {
    for (const ep of eps) {
      const { fresh } = planOf(ep);
      const want = ep.waiting + fresh;
      let started = 0;
      while (started < want && startWorker(ep)) started++;
      ep.waiting = want - started;
    }
  };

  const allocatorPass = () => {
    const planned = eps.map((ep) => ({ ep, ...planOf(ep) }));
    const demands = planned.map(({ ep, fresh, stats }) => ({
      id: ep.id,
      priority: ep.priority,
      shareWeight: ep.shareWeight,
      preemptible: ep.preemptible,
      workersMin: ep.workersMin,
      gpus: ep.gpus,
      ...(ep.gpuTypes ? { gpuTypes: ep.gpuTypes } : {}),
      workers: [...ep.workers.values()]
        .filter((w) => w.state === 'starting' || w.state === 'serving')
        .map((w) => ({ id: w.id, busy: w.job !== null, starting: w.state === 'starting', ...(w.job ? { busySince: w.job.startedAt } : {}) })),
      want: fresh + ep.waiting,
      waitingSince: stats.oldestNormalQueuedAt,
    }));
    const decided = allocate({ now, hosts: hosts.map(loadOf), endpoints: demands });
    for (const { ep } of planned) {
      const a = decided.get(ep.id);
      for (const o of a.reclaim) stopWorker(ep.workers.get(o.workerId), false);
      for (const o of a.preempt) stopWorker(ep.workers.get(o.workerId), true);
    }
    for (const { ep, fresh } of planned) {
      const a = decided.get(ep.id);
      let started = 0;
      while (started < a.start && startWorker(ep)) started++;
      ep.waiting = ep.waiting + fresh - started;
    }
  };

  /** Weighted max-min fair GPUs of each endpoint of one priority, from its demand (water-filling). */
  const sampleFairness = () => {
    const groups = new Map();
    for (const ep of eps) {
      const demand = Math.min(ep.workersMax, [...ep.workers.values()].filter((w) => w.job).length + ep.queue.length) * ep.gpus;
      const g = groups.get(ep.priority) ?? [];
      g.push({ ep, demand });
      groups.set(ep.priority, g);
    }
    for (const g of groups.values()) {
      if (g.length < 2) continue;
      const capacity = g.reduce((n, x) => n + x.ep.held, 0);
      const demand = g.reduce((n, x) => n + x.demand, 0);
      if (capacity === 0 || demand <= capacity) continue; // not contended
      const fair = waterFill(g.map((x) => ({ demand: x.demand, weight: x.ep.shareWeight })), capacity);
      g.forEach((x, i) => {
        if (x.demand === 0) return;
        x.ep.sumHeld += x.ep.held;
        x.ep.sumFair += fair[i];
      });
    }
  };

  for (const job of workload) {
    const ep = byId.get(job.endpoint);
    if (!ep) throw new Error(`workload names endpoint ${job.endpoint}, which the fleet file does not`);
    const j = { ...job, n: ++seq };
    events.push(job.at, () => {
      ep.queue.push(j);
      for (const w of ep.workers.values()) if (w.state === 'serving' && !w.job) return take(w);
    });
  }
  const pass = () => {
    if (policy === 'allocator') allocatorPass();
    else independentPass();
    sampleFairness();
    if (m.done < m.jobs && now < capMs) events.push(now + passMs, pass);
  };
  events.push(0, pass);
  while (events.size > 0) {
    const e = events.pop();
    now = e.t;
    e.fn();
  }
  return report(m, { windowMs, totalGpus, eps, policy, endMs: now });
}

/** Weighted max-min shares of `capacity` among demands. */
function waterFill(items, capacity) {
  const out = items.map(() => 0);
  let left = capacity;
  let open = items.map((_, i) => i).filter((i) => items[i].demand > 0);
  while (left > 1e-9 && open.length > 0) {
    const weight = open.reduce((n, i) => n + items[i].weight, 0);
    const unit = left / weight;
    const next = [];
    for (const i of open) {
      const give = Math.min(items[i].demand - out[i], unit * items[i].weight);
      out[i] += give;
      left -= give;
      if (items[i].demand - out[i] > 1e-9) next.push(i);
    }
    if (next.length === open.length) break;
    open = next;
  }
  return out;
}

const pct = (sorted, p) => (sorted.length === 0 ? null : sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))]);

function report(m, { windowMs, totalGpus, eps, policy, endMs }) {
  const delays = {};
  for (const [priority, list] of [...m.delays].sort((a, b) => b[0] - a[0])) {
    const s = list.sort((a, b) => a - b);
    delays[priority] = { jobs: s.length, p50: pct(s, 50), p95: pct(s, 95), p99: pct(s, 99) };
  }
  const jain = {};
  const groups = new Map();
  for (const ep of eps) if (ep.sumFair > 0) groups.set(ep.priority, [...(groups.get(ep.priority) ?? []), ep.sumHeld / ep.sumFair]);
  for (const [priority, xs] of groups) if (xs.length >= 2) jain[priority] = (xs.reduce((a, b) => a + b, 0) ** 2) / (xs.length * xs.reduce((a, b) => a + b * b, 0));
  return {
    policy,
    gpuUse: windowMs > 0 ? m.busyGpuMs / (windowMs * totalGpus) : 0,
    lostToPreemption: windowMs > 0 ? m.lostGpuMs / (windowMs * totalGpus) : 0,
    queueDelayMs: delays,
    coldStarts: m.coldStarts,
    preemptions: m.preemptions,
    jain,
    jobs: m.jobs,
    unfinished: m.jobs - m.done,
    maxDelayMs: m.maxDelayMs,
    endMs,
  };
}
