import type { Logger } from 'pino';
import { AppError } from '../model/errors.js';
import type { EndpointRecord } from '../model/records.js';
import type { JobStore } from '../store/store.js';

/** How often the count is refreshed from the store. */
const REFRESH_MS = 1_000;

/** What the gauge keeps per endpoint: the queue last counted plus the submissions since that count began. */
interface Entry {
  inQueue: number;
  bytes: number;
  since: number;
  sinceBytes: number;
  at: number;
  refreshing: boolean;
}

/** The disk the queue is written to: throws its 503 when it has no room for `bytes` more (store/disk-space.ts). */
export interface SpaceCheck {
  admit(bytes: number): void;
}

/** What the gauge reads and how far it lets a queue grow. */
export interface QueueGaugeDeps {
  store: Pick<JobStore, 'queueStats'>;
  /** The count bound: inQueue > 50 and inQueue > workersMax × factor (GANTRY_QUEUE_LIMIT_FACTOR). */
  factor: number;
  /** The bytes bound: input bytes queued on one endpoint (GANTRY_QUEUE_MAX_INPUT_BYTES). */
  maxInputBytes: number;
  /** The data directory's free space, checked before the endpoint's own bounds. */
  space?: SpaceCheck;
  logger: Logger;
  now(): number;
}

/**
 * The queue-overload check of submissions (spec, Errors): 429 when inQueue > 50 and inQueue >
 * workersMax × factor, or when the endpoint's queued inputs would pass `maxInputBytes` (one job
 * is always admitted into an empty queue, so no job is refused for its size alone; the route's
 * body limit bounds that). Counting the queue in the store for every submission would cost more
 * than the submission, so each endpoint's count and bytes are refreshed at most once a second
 * (the store sums input_bytes of the queued jobs) and the submissions since are added to them.
 *
 * @example const gauge = new QueueGauge({ store, factor: 500, maxInputBytes: 1e9, logger, now: Date.now }); gauge.admit(endpoint, 120);
 */
export class QueueGauge {
  private readonly counts = new Map<string, Entry>();

  constructor(private readonly deps: QueueGaugeDeps) {}

  /** Counts one more queued job of `inputBytes`, or throws 429 QUEUE_FULL with Retry-After when the endpoint is overloaded (503 from `space` when the disk is). */
  admit(endpoint: EndpointRecord, inputBytes: number): void {
    this.deps.space?.admit(inputBytes);
    const entry = this.entry(endpoint.id);
    const limit = Math.max(50, endpoint.workersMax * this.deps.factor);
    if (entry.inQueue > limit) {
      throw new AppError('QUEUE_FULL', `Queue is full: ${entry.inQueue} jobs waiting on endpoint ${endpoint.id}`, undefined, { 'retry-after': '1' });
    }
    if (entry.bytes > 0 && entry.bytes + inputBytes > this.deps.maxInputBytes) {
      throw new AppError(
        'QUEUE_FULL',
        `Queue is full: ${entry.bytes} bytes of input waiting on endpoint ${endpoint.id} (at most ${this.deps.maxInputBytes})`,
        undefined,
        { 'retry-after': '1' },
      );
    }
    entry.inQueue++;
    entry.since++;
    entry.bytes += inputBytes;
    entry.sinceBytes += inputBytes;
  }

  private entry(endpointId: string): Entry {
    const t = this.deps.now();
    let entry = this.counts.get(endpointId);
    if (!entry) this.counts.set(endpointId, (entry = { inQueue: 0, bytes: 0, since: 0, sinceBytes: 0, at: 0, refreshing: false }));
    if (t - entry.at >= REFRESH_MS && !entry.refreshing) {
      const e = entry;
      e.refreshing = true;
      e.since = 0;
      e.sinceBytes = 0;
      // queueStats walks the queued and running jobs only (partial indexes), not the retained ones.
      this.deps.store.queueStats({ endpointId, now: t }).then(
        (counts) =>
          Object.assign(e, { inQueue: counts.inQueue + e.since, bytes: counts.inQueueBytes + e.sinceBytes, at: this.deps.now(), refreshing: false }),
        (err: unknown) => {
          e.refreshing = false;
          this.deps.logger.error({ err, endpointId }, 'queue count failed');
        },
      );
    }
    return entry;
  }
}
