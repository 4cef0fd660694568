import type { App } from '../app.js';
import type { JobRecord } from '../store/store.js';

/** Rows handled per store call; a pass repeats a call while it comes back full. */
const BATCH = 500;
/** At most this many batches of one kind per pass, so a huge backlog never blocks the loop. */
const MAX_BATCHES = 20;

/**
 * The reaper (DESIGN.md §2): execution timeouts → TIMED_OUT (the worker is told through
 * job-stop); queue ttl → TIMED_OUT; workers not heard from for `workerLostMs` lose their jobs
 * (requeued up to maxAttempts, then FAILED); expired jobs are deleted with input, output and
 * stream. `start` runs a pass every `reaperIntervalMs`; `stop` may be called twice.
 */
export function createReaper(app: App) {
  let timer: NodeJS.Timeout | undefined;
  let running: Promise<void> | undefined;

  function ended(jobs: JobRecord[]): void {
    for (const job of jobs) app.jobs.jobEnded(job);
  }

  async function repeat(call: () => Promise<number>): Promise<number> {
    let total = 0;
    for (let i = 0; i < MAX_BATCHES; i++) {
      const n = await call();
      total += n;
      if (n < BATCH) break;
    }
    return total;
  }

  /** One pass; returns what it did (for tests and logs). */
  async function runOnce(): Promise<{ timedOut: number; expired: number; requeued: number; failed: number; deleted: number }> {
    const { store, now, notifier } = app;
    const timedOut = await repeat(async () => {
      const jobs = await store.timeOutRunning({ now: now(), limit: BATCH });
      for (const job of jobs) {
        if (job.workerId) notifier.publish({ type: 'stop-jobs', workerId: job.workerId, jobIds: [job.id] });
      }
      ended(jobs);
      return jobs.length;
    });
    const expired = await repeat(async () => {
      const jobs = await store.expireQueued({ now: now(), limit: BATCH });
      ended(jobs);
      return jobs.length;
    });

    // Workers with an open long-poll on this gateway are alive even if they have not pinged.
    for (const { endpointId, workerId } of app.workers.waitingWorkers()) await app.workers.touch(endpointId, workerId);
    const stale = await store.findStaleWorkers(now() - app.config.workerLostMs);
    let requeued = 0;
    let failed = 0;
    if (stale.length > 0) {
      const ids = stale.map((w) => w.id);
      const released = await store.releaseWorkerJobs({ workerIds: ids, now: now() });
      await store.deleteWorkers(ids);
      requeued = released.requeued.length;
      failed = released.failed.length;
      ended(released.failed);
      for (const endpointId of new Set(released.requeued.map((j) => j.endpointId))) notifier.publish({ type: 'jobs-available', endpointId });
      for (const job of released.requeued) notifier.publish({ type: 'job-updated', jobId: job.id });
      if (requeued + failed > 0) app.logger.warn({ workers: ids, requeued, failed }, 'workers lost');
    }
    const deleted = await repeat(() => store.deleteExpired({ now: now(), limit: BATCH }));
    return { timedOut, expired, requeued, failed, deleted };
  }

  function schedule(): void {
    timer = setTimeout(() => {
      running = runOnce()
        .then(
          () => undefined,
          (err: unknown) => app.logger.error({ err }, 'reaper pass failed'),
        )
        .finally(() => {
          running = undefined;
          if (timer) schedule();
        });
    }, app.config.reaperIntervalMs);
    timer.unref();
  }

  return {
    runOnce,
    start(): void {
      if (!timer) schedule();
    },
    async stop(): Promise<void> {
      if (timer) clearTimeout(timer);
      timer = undefined;
      await running;
    },
  };
}

export type Reaper = ReturnType<typeof createReaper>;
