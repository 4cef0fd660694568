import type { Logger } from 'pino';
import { AppError } from '../model/errors.js';
import type { EndpointRecord, QueueByKey } from '../model/records.js';
import type { JobStore } from '../store/store.js';
import { admitsKey, admitsKeyAmount, keyShare } from '../util/key-share.js';

/** How often the count is refreshed from the store. */
const REFRESH_MS = 1_000;
/** Keys counted apart on one endpoint; past it a key is counted in the totals only (no share of its own), as in the rate limits. */
const MAX_KEYS = 1_000;

/** One key's part of an endpoint's queue: as last counted plus its submissions since that count began. */
interface KeyEntry {
  inQueue: number;
  bytes: number;
  since: number;
  sinceBytes: number;
}

/** What the gauge keeps per endpoint: the queue last counted plus the submissions since that count began, in all and per key. */
interface Entry {
  inQueue: number;
  bytes: number;
  since: number;
  sinceBytes: number;
  at: number;
  refreshing: boolean;
  /** The keys with jobs queued (at most MAX_KEYS): the queue's shares (util/key-share.ts). */
  keys: Map<string, KeyEntry>;
}

/** The disk the queue is written to: throws its 503 when it has no room for `bytes` more (store/disk-space.ts). */
export interface SpaceCheck {
  admit(bytes: number): void;
}

/** What the gauge reads and how far it lets a queue grow. */
export interface QueueGaugeDeps {
  store: Pick<JobStore, 'queueByKey'>;
  /** The count bound: inQueue > 50 and inQueue > workersMax × factor (GANTRY_QUEUE_LIMIT_FACTOR). */
  factor: number;
  /** The bytes bound: input bytes queued on one endpoint (GANTRY_QUEUE_MAX_INPUT_BYTES). */
  maxInputBytes: number;
  /** The data directory's free space, checked before the endpoint's own bounds. */
  space?: SpaceCheck;
  logger: Logger;
  now(): number;
}

const refused = (message: string): AppError => new AppError('QUEUE_FULL', message, undefined, { 'retry-after': '1' });

/**
 * The queue-overload check of submissions (spec, Errors): 429 when inQueue > 50 and inQueue >
 * workersMax × factor, or when the endpoint's queued inputs would pass `maxInputBytes` (one job
 * is always admitted into an empty queue, so no job is refused for its size alone; the route's
 * body limit bounds that). Counting the queue in the store for every submission would cost more
 * than the submission, so each endpoint's count and bytes are refreshed at most once a second
 * (the store sums input_bytes of the queued jobs, per key) and the submissions since are added to them.
 *
 * Both bounds are shared between keys as the rate limits are (util/key-share.ts, docs/security.md
 * "Shared limits"): a key alone on an endpoint may fill it (RunPod's behaviour); once another key
 * has jobs queued there, each key may hold half of each bound, and a key under its half is let
 * in even past the bound, by at most a half, so one key's full queue never locks another out.
 *
 * @example const gauge = new QueueGauge({ store, factor: 500, maxInputBytes: 1e9, logger, now: Date.now }); gauge.admit(endpoint, 120, 'key_1');
 */
export class QueueGauge {
  private readonly counts = new Map<string, Entry>();

  constructor(private readonly deps: QueueGaugeDeps) {}

  /**
   * Counts one more queued job of `inputBytes` submitted by `keyId` ('' without a key), or
   * throws 429 QUEUE_FULL with Retry-After when the endpoint's queue, or the key's share of it,
   * is full (503 from `space` when the disk is).
   */
  admit(endpoint: EndpointRecord, inputBytes: number, keyId = ''): void {
    this.deps.space?.admit(inputBytes);
    const entry = this.entry(endpoint.id);
    let own = entry.keys.get(keyId);
    const shared = entry.keys.size > (own === undefined ? 0 : 1);
    // The spec refuses once more than `limit` jobs wait: `limit + 1` is the number that fits.
    const limit = Math.max(50, endpoint.workersMax * this.deps.factor);
    const max = this.deps.maxInputBytes;
    // A key not counted apart (past MAX_KEYS) has no share: the totals alone decide.
    const tracked = own !== undefined || entry.keys.size < MAX_KEYS;
    const ownJobs = own?.inQueue ?? 0;
    const ownBytes = own?.bytes ?? 0;
    if (tracked ? !admitsKey(ownJobs, entry.inQueue, limit + 1, shared) : entry.inQueue > limit) {
      throw refused(
        shared && tracked && entry.inQueue <= limit
          ? `Queue share used: this key has ${ownJobs} of the ${entry.inQueue} jobs waiting on endpoint ${endpoint.id}; while other keys have jobs queued, one key may hold ${keyShare(limit + 1)} (half of the queue's ${limit + 1})`
          : `Queue is full: ${entry.inQueue} jobs waiting on endpoint ${endpoint.id} (at most ${limit + 1}${shared ? `, ${keyShare(limit + 1)} more for a key under its half while other keys have jobs queued` : ''})`,
      );
    }
    if (tracked ? !admitsKeyAmount(ownBytes, entry.bytes, inputBytes, max, shared) : entry.bytes > 0 && entry.bytes + inputBytes > max) {
      throw refused(
        shared && tracked && entry.bytes + inputBytes <= max
          ? `Queue share used: this key has ${ownBytes} of the ${entry.bytes} bytes of input waiting on endpoint ${endpoint.id}; while other keys have jobs queued, one key may hold ${keyShare(max)} (half of GANTRY_QUEUE_MAX_INPUT_BYTES, ${max})`
          : `Queue is full: ${entry.bytes} bytes of input waiting on endpoint ${endpoint.id} (at most ${max}${shared ? `, ${keyShare(max)} more for a key under its half while other keys have jobs queued` : ''})`,
      );
    }
    entry.inQueue++;
    entry.since++;
    entry.bytes += inputBytes;
    entry.sinceBytes += inputBytes;
    if (own === undefined && tracked) entry.keys.set(keyId, (own = { inQueue: 0, bytes: 0, since: 0, sinceBytes: 0 }));
    if (own) {
      own.inQueue++;
      own.since++;
      own.bytes += inputBytes;
      own.sinceBytes += inputBytes;
    }
  }

  private entry(endpointId: string): Entry {
    const t = this.deps.now();
    let entry = this.counts.get(endpointId);
    if (!entry) this.counts.set(endpointId, (entry = { inQueue: 0, bytes: 0, since: 0, sinceBytes: 0, at: 0, refreshing: false, keys: new Map() }));
    if (t - entry.at >= REFRESH_MS && !entry.refreshing) this.refresh(endpointId, entry, t);
    return entry;
  }

  /** Re-reads the endpoint's queue from the store; the submissions counted meanwhile are added to what it reads. */
  private refresh(endpointId: string, e: Entry, t: number): void {
    e.refreshing = true;
    e.since = 0;
    e.sinceBytes = 0;
    for (const k of e.keys.values()) {
      k.since = 0;
      k.sinceBytes = 0;
    }
    // Walks the queued jobs only (partial indexes), not the retained ones.
    this.deps.store.queueByKey({ endpointId, now: t, limit: MAX_KEYS }).then(
      (counted) => this.counted(e, counted),
      (err: unknown) => {
        e.refreshing = false;
        this.deps.logger.error({ err, endpointId }, 'queue count failed');
      },
    );
  }

  private counted(e: Entry, counted: QueueByKey): void {
    const keys = new Map<string, KeyEntry>();
    for (const row of counted.keys) {
      const since = e.keys.get(row.keyId);
      keys.set(row.keyId, { inQueue: row.jobs + (since?.since ?? 0), bytes: row.bytes + (since?.sinceBytes ?? 0), since: since?.since ?? 0, sinceBytes: since?.sinceBytes ?? 0 });
    }
    // Keys whose jobs the count did not see yet (submitted since it began).
    for (const [keyId, k] of e.keys) {
      if (k.since > 0 && !keys.has(keyId) && keys.size < MAX_KEYS) keys.set(keyId, { inQueue: k.since, bytes: k.sinceBytes, since: k.since, sinceBytes: k.sinceBytes });
    }
    Object.assign(e, { inQueue: counted.jobs + e.since, bytes: counted.bytes + e.sinceBytes, at: this.deps.now(), refreshing: false, keys });
  }
}
