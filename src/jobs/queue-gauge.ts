import type { Logger } from 'pino';
import { AppError } from '../model/errors.js';
import type { EndpointRecord } from '../model/records.js';
import type { JobStore } from '../store/store.js';

/** How often the count is refreshed from the store. */
const REFRESH_MS = 1_000;

/**
 * The queue-overload check of submissions (spec, Errors): 429 when inQueue > 50 and inQueue >
 * workersMax × factor. Counting the queue in the store for every submission would cost more
 * than the submission, so each endpoint's count is refreshed at most once a second and the
 * submissions since are added to it.
 *
 * @example const gauge = new QueueGauge({ store, factor: 500, logger, now: Date.now }); gauge.admit(endpoint);
 */
export class QueueGauge {
  /** Per endpoint: the queue length last counted plus the submissions since that count began. */
  private readonly counts = new Map<string, { inQueue: number; since: number; at: number; refreshing: boolean }>();

  constructor(private readonly deps: { store: Pick<JobStore, 'queueStats'>; factor: number; logger: Logger; now(): number }) {}

  /** Counts one more queued job, or throws 429 QUEUE_FULL with Retry-After when the endpoint is overloaded. */
  admit(endpoint: EndpointRecord): void {
    const entry = this.entry(endpoint.id);
    const limit = Math.max(50, endpoint.workersMax * this.deps.factor);
    if (entry.inQueue > limit) {
      throw new AppError('QUEUE_FULL', `Queue is full: ${entry.inQueue} jobs waiting on endpoint ${endpoint.id}`, undefined, { 'retry-after': '1' });
    }
    entry.inQueue++;
    entry.since++;
  }

  private entry(endpointId: string): { inQueue: number; since: number; at: number; refreshing: boolean } {
    const t = this.deps.now();
    let entry = this.counts.get(endpointId);
    if (!entry) this.counts.set(endpointId, (entry = { inQueue: 0, since: 0, at: 0, refreshing: false }));
    if (t - entry.at >= REFRESH_MS && !entry.refreshing) {
      const e = entry;
      e.refreshing = true;
      e.since = 0;
      // queueStats walks the queued and running jobs only (partial indexes), not the retained ones.
      this.deps.store.queueStats({ endpointId, now: t }).then(
        (counts) => Object.assign(e, { inQueue: counts.inQueue + e.since, at: this.deps.now(), refreshing: false }),
        (err: unknown) => {
          e.refreshing = false;
          this.deps.logger.error({ err, endpointId }, 'queue count failed');
        },
      );
    }
    return entry;
  }
}
