/**
 * The scenarios of issue 13, written once against the system interface of gantry.js / peers.js:
 * submit, end to end (one job per take, and batch takes), backlog fill / wait / drain with RSS
 * over time, runsync latency at light and heavy load, status reads.
 */
import { setInterval, clearInterval } from 'node:timers';
import { closedLoop, distribution, processCpuMs, rssMiB, sleep } from './lib.js';

const round = (x, d = 1) => (Number.isFinite(x) ? Math.round(x * 10 ** d) / 10 ** d : NaN);

/** CPU ms of the system's own process (the gateway; for in-process peers, this whole process). */
function cpuNow(sys) {
  if (sys.inProcess) {
    const u = process.cpuUsage();
    return (u.user + u.system) / 1000;
  }
  return processCpuMs(sys.pid);
}

/** 1. Submissions, 64 in flight. Keeps up to 50k ids for the status scenario. */
export async function submit(sys, o) {
  const ids = [];
  let c0 = 0;
  const r = await closedLoop({
    concurrency: 64,
    seconds: o.seconds,
    warmup: o.warmup,
    onMeasureStart: () => (c0 = cpuNow(sys)),
    op: async (i) => {
      const id = await sys.submit('submit', i);
      if (ids.length < 50_000) ids.push(id);
      return id !== undefined && id !== null;
    },
  });
  const cpuUs = ((cpuNow(sys) - c0) * 1000) / Math.max(1, r.ok);
  return { ids, figures: { submit: r.perSecond }, details: { submit: { ok: r.ok, errors: r.errors, cpuUsPerOp: round(cpuUs), firstError: r.firstError } } };
}

/** 5. Status reads of the queued jobs left by `submit`, 64 in flight, striding over them. */
export async function status(sys, o, ids) {
  if (!ids.length) return { figures: {}, details: {} };
  let pick = 0;
  const r = await closedLoop({
    concurrency: 64,
    seconds: o.seconds,
    warmup: o.warmup,
    op: () => {
      pick = (pick + 7919) % ids.length;
      return sys.status('submit', ids[pick]);
    },
  });
  return { figures: { status: r.perSecond }, details: { status: { ok: r.ok, errors: r.errors, firstError: r.firstError } } };
}

/**
 * 2. End to end: 32 producers submit one job per call (pausing while 4,000 are outstanding);
 * workers take one job per call (`batch` 1, 32 workers) or batches. Figure: jobs finished per
 * second in the measured window.
 */
export async function endToEnd(sys, o, batch) {
  const key = batch > 1 ? 'e2eBatch' : 'e2e1';
  if (batch > 1 && !sys.supportsBatch) return { figures: { [key]: NaN }, details: { [key]: { skipped: 'no batch take' } } };
  const queue = batch > 1 ? 'e2eb' : 'e2e1';
  let done = 0;
  let submitted = 0;
  let errors = 0;
  let producing = true;
  const workers = sys.workers(queue, { batch, concurrency: batch > 1 ? (sys.batchConcurrency ?? 4) : 32, onDone: (n) => (done += n) });
  const producer = async () => {
    while (producing) {
      if (submitted - done >= 4000) {
        await sleep(1);
        continue;
      }
      submitted++;
      try {
        await sys.submit(queue, submitted);
      } catch {
        submitted--;
        errors++;
        await sleep(5);
      }
    }
  };
  const producers = Array.from({ length: 32 }, producer);
  await sleep(o.warmup * 1000);
  const d0 = done;
  const c0 = cpuNow(sys);
  const t0 = performance.now();
  await sleep(o.seconds * 1000);
  const completed = done - d0;
  const elapsed = (performance.now() - t0) / 1000;
  const cpuUs = ((cpuNow(sys) - c0) * 1000) / Math.max(1, completed);
  producing = false;
  await Promise.all(producers);
  await workers.stop();
  return { figures: { [key]: completed / elapsed }, details: { [key]: { completed, errors, cpuUsPerJob: round(cpuUs), workerError: sys.lastWorkerError } } };
}

/**
 * 3. Backlog: `n` jobs queued (the system's fastest bulk path for peers, /run for Gantry), then
 * submissions for a few seconds while they wait, then drained by the system's best take mode.
 * RSS of the system's process is sampled every 250 ms throughout.
 */
export async function backlog(sys, o, n, log) {
  const rss = [];
  const t0 = performance.now();
  const sample = setInterval(() => rss.push([round((performance.now() - t0) / 1000, 2), rssMiB(sys.pid)]), 250);
  try {
    const tf = performance.now();
    await sys.fill('backlog', n, (k) => log(`    filled ${k}/${n}`));
    const fillRate = n / ((performance.now() - tf) / 1000);
    const rssFilled = rssMiB(sys.pid);
    const during = await closedLoop({ concurrency: 64, seconds: o.waitSeconds, warmup: 0, op: async (i) => (await sys.submit('backlog', n + i)) != null });
    let done = 0;
    const td = performance.now();
    const workers = sys.workers('backlog', { batch: sys.supportsBatch ? 50 : 1, concurrency: sys.supportsBatch ? (sys.batchConcurrency ?? 4) : 32, onDone: (k) => (done += k) });
    // Ends when all are done, when nothing moved for 15 s (a stall is reported, not hidden), or
    // at the drain limit (the rate so far is reported, marked capped).
    let lastLog = td;
    let lastProgress = td;
    let lastDone = 0;
    let tDone = td;
    const limitAt = td + (o.drainLimitSeconds ?? 300) * 1000;
    while (done < during.ok + n && performance.now() - lastProgress < 15_000 && performance.now() < limitAt) {
      await sleep(20);
      const now = performance.now();
      if (done !== lastDone) {
        lastDone = done;
        lastProgress = now;
        tDone = now;
      }
      if (now - lastLog > 10_000) {
        lastLog = now;
        log(`    drained ${done}/${during.ok + n}`);
      }
    }
    const capped = done < during.ok + n && performance.now() >= limitAt;
    const stalled = done < during.ok + n && !capped;
    const drainSeconds = ((stalled ? tDone : performance.now()) - td) / 1000;
    if (capped) log(`    drain capped at ${o.drainLimitSeconds ?? 300} s: ${done}/${during.ok + n} drained`);
    await workers.stop();
    const rssValues = rss.map(([, v]) => v).filter(Number.isFinite);
    return {
      figures: { [`drain${n}`]: done / drainSeconds, [`submitWaiting${n}`]: during.perSecond },
      details: {
        [`backlog${n}`]: { n, fillRate: round(fillRate), drained: done, total: during.ok + n, submitErrorsWhileWaiting: during.errors, stalled, capped, workerErrors: sys.workerErrors ?? 0, lastWorkerError: sys.lastWorkerError, drainSeconds: round(drainSeconds, 2), rssFilledMiB: rssFilled, rssMaxMiB: Math.max(...rssValues), rssEndMiB: rssMiB(sys.pid), rss: rss.filter((_, i) => i % 4 === 0) },
      },
    };
  } finally {
    clearInterval(sample);
  }
}

/** Sequential (light) or `callers`-wide (heavy) timed loop of `once`; latency samples in ms. */
async function timedLatency(o, callers, once) {
  const samples = [];
  let errors = 0;
  const warmEnd = performance.now() + o.warmup * 1000;
  const end = warmEnd + o.seconds * 1000;
  let i = 0;
  await Promise.all(
    Array.from({ length: callers }, async () => {
      while (performance.now() < end) {
        const t = performance.now();
        const ok = await once(i++).catch(() => false);
        if (t < warmEnd) continue;
        if (ok) samples.push(performance.now() - t);
        else errors++;
      }
    }),
  );
  return { ...distribution(samples), errors };
}

/**
 * 4. runsync: one caller (light) and 32 callers (heavy); 32 workers taking one job per call,
 * answering at once. Gantry's "added" latency subtracts a GET /healthz round trip at the same
 * concurrency; a peer's figure is submit → its handler finished, in this process.
 */
export async function runsync(sys, o) {
  const workers = sys.workers('sync', { batch: 1, concurrency: 32, onDone: () => {} });
  await sleep(100);
  try {
    const out = {};
    for (const [load, callers] of [['Light', 1], ['Heavy', 32]]) {
      const sync = await timedLatency(o, callers, (i) => sys.runsync('sync', i));
      const base = sys.baseline ? await timedLatency({ ...o, seconds: Math.min(o.seconds, 2) }, callers, () => sys.baseline()) : { p50: 0, p99: 0, max: 0 };
      out[`sync${load}`] = { p50: round(sync.p50 - base.p50, 3), p99: round(sync.p99 - base.p99, 3), max: round(sync.max, 3), count: sync.count, errors: sync.errors, raw: { p50: round(sync.p50, 3), p99: round(sync.p99, 3) }, baseline: { p50: round(base.p50, 3), p99: round(base.p99, 3) } };
    }
    return { figures: { syncLightP50: out.syncLight.p50, syncLightP99: out.syncLight.p99, syncLightMax: out.syncLight.max, syncHeavyP50: out.syncHeavy.p50, syncHeavyP99: out.syncHeavy.p99, syncHeavyMax: out.syncHeavy.max }, details: out };
  } finally {
    await workers.stop();
  }
}
