import type { Logger } from 'pino';
import type { JobObserver } from '../jobs/job-observer.js';
import { delayTimeOf } from '../model/job-times.js';
import type { JobRecord } from '../model/records.js';
import { emptyBuckets, MINUTE_BUCKETS_MS, type MinuteDelta, type MinuteStore } from '../store/minute-store.js';
import type { Store } from '../store/store.js';
import { systemClock, type Clock } from '../util/clock.js';
import { periodic, type Periodic } from '../util/periodic.js';

const MINUTE = 60_000;

/** Keeps per-minute aggregates of every endpoint's jobs for the console's charts. */
export interface MinuteRecorder {
  /** Told of every committed transition (in memory only: a map lookup and a few additions). */
  readonly observer: JobObserver;
  /** Starts writing to the store every `intervalMs` (and sampling each endpoint's queue depth); idle minutes are not written. */
  start(deps: MinuteRecorderDeps): void;
  /** Writes what was gathered since the last write. */
  flush(): Promise<void>;
  /** The minutes of an endpoint in [from, to), the store's rows plus what is not written yet. */
  read(endpointId: string, from: number, to: number): Promise<MinuteDelta[]>;
  /** Stops the timer and writes the rest. */
  stop(): Promise<void>;
}

/** What the recorder writes to and samples. */
export interface MinuteRecorderDeps {
  store: MinuteStore & Pick<Store, 'queueStats'>;
  endpoints: { list(): Promise<{ id: string }[]> };
  logger: Logger;
  /** Default 10 s. */
  intervalMs?: number;
  /** The flush timer's clock (default: the system's). */
  clock?: Clock;
}

/** The index of the bucket of MINUTE_BUCKETS_MS that holds `ms`. */
export function bucketOf(ms: number): number {
  let i = 0;
  while (i < MINUTE_BUCKETS_MS.length && ms > MINUTE_BUCKETS_MS[i]!) i++;
  return i;
}

/**
 * The recorder: deltas per (endpoint, minute) in memory, added to the store's rows on each
 * flush (additive, so several gateways share the rows). Costs the hot path a map lookup.
 *
 * @example const minutes = createMinuteRecorder(Date.now); createGateway({ ..., observers: { jobs: minutes.observer } });
 */
export function createMinuteRecorder(now: () => number): MinuteRecorder {
  let pending = new Map<string, MinuteDelta>();
  // The latest delta of each endpoint: the hot path's one lookup (no key string to build).
  let latest = new Map<string, MinuteDelta>();
  let deps: MinuteRecorderDeps | undefined;
  let loop: Periodic | undefined;
  const slow = (endpointId: string, minute: number): MinuteDelta => {
    const key = `${minute} ${endpointId}`;
    let d = pending.get(key);
    if (!d) pending.set(key, (d = { endpointId, minute, submitted: 0, completed: 0, failed: 0, queueDepth: 0, delay: emptyBuckets(), execution: emptyBuckets() }));
    latest.set(endpointId, d);
    return d;
  };
  const delta = (endpointId: string, at: number): MinuteDelta => {
    const minute = at - (at % MINUTE);
    const d = latest.get(endpointId);
    return d !== undefined && d.minute === minute ? d : slow(endpointId, minute);
  };
  // The queue depth between samples (queueDepths): a burst taken before the next sample still shows.
  const depths = queueDepths(delta);
  const observer = minuteObserver(delta, depths, now);
  const flush = async (): Promise<void> => {
    if (!deps) return;
    const t = now();
    const known = new Set<string>();
    for (const e of await deps.endpoints.list()) {
      known.add(e.id);
      // An empty queue makes no delta: idle minutes are not stored (the charts read a missing
      // minute as zeros); a delta exists only where a job was counted or the queue was not empty.
      const inQueue = (await deps.store.queueStats({ endpointId: e.id, now: t })).inQueue;
      depths.sampled(e.id, inQueue);
      if (inQueue > 0) delta(e.id, t).queueDepth = Math.max(delta(e.id, t).queueDepth, inQueue);
    }
    // Nor those of an endpoint deleted since: its rows went with it, and a new endpoint with the
    // same id starts empty.
    const batch = [...pending.values()].filter((d) => known.has(d.endpointId));
    pending = new Map();
    latest = new Map();
    if (batch.length > 0) await deps.store.addMinutes(batch);
  };
  return {
    observer,
    start(d) {
      deps = d;
      const pass = (): Promise<void> => flush().catch((err: unknown) => d.logger.warn({ err }, 'writing the per-minute job aggregates failed'));
      loop = periodic({ name: 'minute recorder', everyMs: d.intervalMs ?? 10_000, pass, logger: d.logger, clock: d.clock ?? systemClock });
      loop.start();
    },
    flush,
    async read(endpointId, from, to) {
      const rows = deps ? await deps.store.readMinutes({ endpointId, from, to }) : [];
      return mergePending(rows, [...pending.values()].filter((d) => d.endpointId === endpointId && d.minute >= from && d.minute < to));
    },
    async stop() {
      await loop?.stop();
      await flush();
    },
  };
}

/** An endpoint's queue depth as followed between two samples of the store. */
interface QueueDepths {
  /** The store's count at a sample: the depth starts again from it. */
  sampled(endpointId: string, inQueue: number): void;
  /** Jobs into (+) or out of (-) the queue at `at`; the minute keeps the deepest it saw. */
  moved(endpointId: string, at: number, by: number): void;
}

/**
 * The queue depth followed from the transitions between the recorder's samples (every 10 s):
 * 50 jobs submitted and taken within those 10 s were a queue of 50 that the samples alone never
 * see. Each sample starts the count again from the store's; with several gateways each follows
 * its own transitions (the minute's rows keep the deepest), so the depth is at least what one
 * gateway saw. One Map lookup per transition.
 */
function queueDepths(delta: (endpointId: string, at: number) => MinuteDelta): QueueDepths {
  const depth = new Map<string, number>();
  return {
    sampled: (endpointId, inQueue) => void depth.set(endpointId, inQueue),
    moved(endpointId, at, by) {
      const n = Math.max(0, (depth.get(endpointId) ?? 0) + by);
      depth.set(endpointId, n);
      if (by <= 0) return;
      const d = delta(endpointId, at);
      if (n > d.queueDepth) d.queueDepth = n;
    },
  };
}

function minuteObserver(delta: (endpointId: string, at: number) => MinuteDelta, depths: QueueDepths, now: () => number): JobObserver {
  return {
    submitted(job) {
      delta(job.endpointId, job.queuedAt).submitted++;
      depths.moved(job.endpointId, job.queuedAt, 1);
    },
    started(jobs) {
      for (const job of jobs) {
        depths.moved(job.endpointId, job.startedAt!, -1);
        const delay = delayTimeOf(job);
        if (delay !== null) delta(job.endpointId, job.startedAt!).delay[bucketOf(delay)]!++;
      }
    },
    ended(job: JobRecord) {
      const at = job.finishedAt ?? now();
      // Cancelled or expired before a worker took it: it leaves the queue here.
      if (job.startedAt === null) depths.moved(job.endpointId, at, -1);
      const d = delta(job.endpointId, at);
      if (job.status === 'COMPLETED') d.completed++;
      else d.failed++;
      if (job.startedAt !== null && job.finishedAt !== null) d.execution[bucketOf(job.finishedAt - job.startedAt)]!++;
    },
    purged: (endpointId, jobs) => depths.moved(endpointId, now(), -jobs.length),
    requeued: (jobs) => {
      for (const job of jobs) depths.moved(job.endpointId, job.queuedAt, 1);
    },
  };
}

/** Store rows plus unwritten deltas, by minute, oldest first. */
function mergePending(rows: MinuteDelta[], extra: MinuteDelta[]): MinuteDelta[] {
  const byMinute = new Map(rows.map((r) => [r.minute, r]));
  for (const d of extra) {
    const r = byMinute.get(d.minute);
    if (!r) {
      byMinute.set(d.minute, { ...d, delay: [...d.delay], execution: [...d.execution] });
      continue;
    }
    r.submitted += d.submitted;
    r.completed += d.completed;
    r.failed += d.failed;
    r.queueDepth = Math.max(r.queueDepth, d.queueDepth);
    d.delay.forEach((c, i) => (r.delay[i] = (r.delay[i] ?? 0) + c));
    d.execution.forEach((c, i) => (r.execution[i] = (r.execution[i] ?? 0) + c));
  }
  return [...byMinute.values()].sort((a, b) => a.minute - b.minute);
}

/**
 * The value below which `p` of a histogram's samples lie, interpolated inside its bucket; null
 * when empty. The last bucket (above the largest bound) reports that bound.
 *
 * @example percentile([0, 10, 0, ...], 0.9) // between 5 and 10 ms
 */
export function percentile(buckets: readonly number[], p: number): number | null {
  const total = buckets.reduce((a, b) => a + b, 0);
  if (total === 0) return null;
  const rank = p * total;
  let seen = 0;
  for (let i = 0; i < buckets.length; i++) {
    const count = buckets[i] ?? 0;
    if (count > 0 && seen + count >= rank) {
      const low = i === 0 ? 0 : MINUTE_BUCKETS_MS[i - 1]!;
      const high = MINUTE_BUCKETS_MS[i] ?? low;
      return Math.round(low + ((high - low) * (rank - seen)) / count);
    }
    seen += count;
  }
  return MINUTE_BUCKETS_MS[MINUTE_BUCKETS_MS.length - 1]!;
}

/** One observer telling both (the charts' recorder and, when on, the metrics). */
export function joinObservers(first: JobObserver, second: JobObserver | undefined): JobObserver {
  if (!second) return first;
  return {
    submitted: (job) => (first.submitted(job), second.submitted(job)),
    started: (jobs) => (first.started(jobs), second.started(jobs)),
    ended: (job) => (first.ended(job), second.ended(job)),
    purged: (endpointId, jobs) => (first.purged(endpointId, jobs), second.purged(endpointId, jobs)),
    requeued: (jobs, why) => (first.requeued(jobs, why), second.requeued(jobs, why)),
    preempted: (jobs) => (first.preempted?.(jobs), second.preempted?.(jobs)),
  };
}
