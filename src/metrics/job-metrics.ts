import { Counter, type Registry } from 'prom-client';
import type { JobObserver } from '../jobs/job-observer.js';
import type { JobStatus } from '../model/job-states.js';
import { delayTimeOf, executionTimeOf } from '../model/job-times.js';
import type { JobRecord, PurgedJob } from '../model/records.js';
import { histogramMetric, newBuckets, observe, type Buckets } from './histogram.js';

/** Queue delay bounds in seconds: from a direct hand-off (sub-millisecond) to an hour in the queue. */
export const DELAY_BOUNDS = [0.001, 0.005, 0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300, 900, 3600];
/** Execution time bounds in seconds: an echo handler to a two-hour job. */
export const EXECUTION_BOUNDS = [0.005, 0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600, 1800, 3600, 7200];

const FINAL: readonly JobStatus[] = ['COMPLETED', 'FAILED', 'CANCELLED', 'TIMED_OUT'];

/** One endpoint's counts since this gateway started: plain numbers, written on the hot path. */
class EndpointCounts {
  submitted = 0;
  /** By FINAL's order. */
  readonly finished = [0, 0, 0, 0];
  requeuedRetry = 0;
  requeuedLost = 0;
  preempted = 0;
  readonly delay: Buckets = newBuckets(DELAY_BOUNDS);
  readonly execution: Buckets = newBuckets(EXECUTION_BOUNDS);
}

/**
 * Counts what happens to jobs on this gateway, by endpoint (the JobObserver the gateway wires
 * into its transitions). Each observation is a map lookup and a few writes; the prom-client
 * metrics are filled from these numbers at scrape time only. Endpoints that no longer exist
 * are dropped at the next scrape, so the series stay as many as the endpoints.
 */
export class JobMetrics implements JobObserver {
  private readonly byEndpoint = new Map<string, EndpointCounts>();

  submitted(job: JobRecord): void {
    this.of(job.endpointId).submitted++;
  }

  started(jobs: readonly JobRecord[]): void {
    const counts = this.of(jobs[0]!.endpointId);
    for (const job of jobs) {
      const delay = delayTimeOf(job);
      if (delay !== null) observe(counts.delay, DELAY_BOUNDS, delay / 1000);
    }
  }

  ended(job: JobRecord): void {
    const counts = this.of(job.endpointId);
    const i = FINAL.indexOf(job.status);
    if (i >= 0) counts.finished[i]! += 1;
    const execution = executionTimeOf(job);
    if (execution !== null) observe(counts.execution, EXECUTION_BOUNDS, execution / 1000);
  }

  purged(endpointId: string, jobs: readonly PurgedJob[]): void {
    this.of(endpointId).finished[FINAL.indexOf('CANCELLED')]! += jobs.length;
  }

  requeued(jobs: readonly JobRecord[], why: 'retry' | 'worker-lost'): void {
    for (const job of jobs) {
      const counts = this.of(job.endpointId);
      if (why === 'retry') counts.requeuedRetry++;
      else counts.requeuedLost++;
    }
  }

  preempted(jobs: readonly JobRecord[]): void {
    for (const job of jobs) this.of(job.endpointId).preempted++;
  }

  /** Forgets endpoints not in `existing` (deleted ones). */
  keepOnly(existing: ReadonlySet<string>): void {
    for (const id of this.byEndpoint.keys()) if (!existing.has(id)) this.byEndpoint.delete(id);
  }

  /** Registers the job counters and histograms; their values are read from this object at scrape time. */
  register(registry: Registry): void {
    const entries = () => this.byEndpoint.entries();
    counter(registry, 'gantry_jobs_submitted_total', 'Jobs submitted on this gateway.', ['endpoint'], (set) => {
      for (const [endpoint, c] of entries()) set({ endpoint }, c.submitted);
    });
    counter(registry, 'gantry_jobs_finished_total', 'Jobs that reached a final state on this gateway, by state.', ['endpoint', 'status'], (set) => {
      for (const [endpoint, c] of entries()) for (const [i, status] of FINAL.entries()) set({ endpoint, status: status.toLowerCase() }, c.finished[i]!);
    });
    counter(registry, 'gantry_jobs_requeued_total', 'Jobs queued again: retried by a client, or their worker was lost.', ['endpoint', 'reason'], (set) => {
      for (const [endpoint, c] of entries()) {
        set({ endpoint, reason: 'retry' }, c.requeuedRetry);
        set({ endpoint, reason: 'worker_lost' }, c.requeuedLost);
      }
    });
    counter(registry, 'gantry_preemptions_total', 'Jobs taken back from a running worker the allocator stopped for a higher priority (requeued, no attempt counted).', ['endpoint'], (set) => {
      for (const [endpoint, c] of entries()) set({ endpoint }, c.preempted);
    });
    const series = (pick: (c: EndpointCounts) => Buckets) => () => [...entries()].map(([endpoint, c]) => ({ labels: { endpoint }, buckets: pick(c) }));
    registry.registerMetric(histogramMetric({ name: 'gantry_job_delay_seconds', help: 'Time jobs waited in the queue before a worker took them.', bounds: DELAY_BOUNDS, series: series((c) => c.delay) }));
    registry.registerMetric(
      histogramMetric({ name: 'gantry_job_execution_seconds', help: 'Time from a worker taking a job to its final state.', bounds: EXECUTION_BOUNDS, series: series((c) => c.execution) }),
    );
  }

  private of(endpointId: string): EndpointCounts {
    let counts = this.byEndpoint.get(endpointId);
    if (counts === undefined) this.byEndpoint.set(endpointId, (counts = new EndpointCounts()));
    return counts;
  }
}

/** Sets one labelled value of a metric at scrape time. */
export type SetValue = (labels: Record<string, string>, value: number) => void;

/**
 * A prom-client Counter whose values are copied from plain numbers at scrape time (`fill`),
 * so nothing on the hot path touches prom-client.
 *
 * @example counter(registry, 'x_total', 'Things.', ['kind'], (set) => set({ kind: 'a' }, n));
 */
export function counter(registry: Registry, name: string, help: string, labelNames: string[], fill: (set: SetValue) => void): Counter {
  return new Counter({
    name,
    help,
    labelNames,
    registers: [registry],
    collect(this: Counter) {
      this.reset();
      fill((labels, value) => this.inc(labels, value));
    },
  });
}
