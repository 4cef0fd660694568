import type { JobWaiters } from '../dispatch/job-waiters.js';
import type { JobRecord } from '../model/records.js';
import type { JobStore } from '../store/store.js';
import { STREAM_PAGE_BYTES, STREAM_PAGE_CHUNKS } from './stream-chunks.js';

/** The reason a stream read's own wait is called off: a constant, so no DOMException is built each time. */
const CALLED_OFF = new Error('stream read ended');

/**
 * One page of a job's stream, with the job as read just before it (docs/api.md, "/stream").
 * Nothing is deleted by reading it: the reader calls `delivered(through)` once the page is
 * written out, and a reader that fails first leaves the chunks for the next one.
 */
export interface StreamRead {
  job: JobRecord;
  /** The chunks (JSON text), oldest first: at most STREAM_PAGE_CHUNKS and about STREAM_PAGE_BYTES. */
  chunks: string[];
  /** The byte cap cut the run's stream after these chunks: none of its later output will come. */
  truncated: boolean;
  /**
   * The run the page's chunks belong to (a page never holds two runs); for a page without
   * chunks, the job's run as read (runOf).
   */
  attempt: number;
  /** More chunks are buffered after this page: read again without waiting. */
  more: boolean;
  /** The seq of the page's last entry (0: an empty page): what `delivered` deletes up to. */
  through: number;
}

/**
 * The number of the job's current (or last) run, what its stream chunks are tagged with: the
 * runs it has begun, `attempts + preemptions` (a preemption takes its hand-out back from
 * `attempts`, but that run did begin). Equal to `attempts` for a job never preempted.
 *
 * @example runOf({ attempts: 1, preemptions: 1 }) // 2: preempted once, running again
 */
export function runOf(job: Pick<JobRecord, 'attempts' | 'preemptions'>): number {
  return job.attempts + job.preemptions;
}

/** What reading streams uses. */
export interface StreamReadsDeps {
  store: Pick<JobStore, 'getJob' | 'readStream' | 'deleteStream'>;
  waiters: JobWaiters;
  now(): number;
}

/**
 * Reads jobs' streams a page at a time and deletes a page only once its reader says it was
 * delivered. On one gateway, the reads of a job wait for the deletes its earlier pages asked for,
 * so a client that polls again as soon as it has an answer never gets that answer twice.
 */
export class StreamReads {
  /** Deletes in flight, by job: bounded by the readers reading at once, each entry gone when done. */
  private readonly deleting = new Map<string, Promise<unknown>>();

  constructor(private readonly deps: StreamReadsDeps) {}

  /**
   * The job's next page after seq `after` (0: from the first buffered chunk); when it is empty
   * and `settled(job)` is false, waits up to `waitMs` for the next update of the job and reads
   * again. Undefined when the job is not one of this endpoint.
   */
  async read(endpointId: string, id: string, after: number, waitMs: number, signal: AbortSignal | undefined, settled: (job: JobRecord) => boolean): Promise<StreamRead | undefined> {
    const deadline = this.deps.now() + waitMs;
    // One controller per call ends a wait still pending on return (or when the client leaves).
    const listening = new AbortController();
    const stop = (): void => listening.abort(CALLED_OFF);
    signal?.addEventListener('abort', stop, { once: true });
    let pending = false;
    try {
      await this.deleting.get(id);
      for (;;) {
        const left = deadline - this.deps.now();
        // Listen before reading: a chunk posted while this reads wakes the wait at once
        // instead of at the next re-read. Re-read at least every second all the same.
        const woken = left > 0 && !signal?.aborted ? this.deps.waiters.wait(id, Math.min(left, 1_000), listening.signal) : undefined;
        pending = woken !== undefined;
        // Status first, then the page: chunks are only appended while IN_PROGRESS, so once a
        // terminal status is read, the pages from here hold the last of them.
        const job = await this.deps.store.getJob(id);
        if (!job || job.endpointId !== endpointId) return undefined;
        const page = await this.page(job, after);
        if (page.through > 0 || settled(job) || !woken) return page;
        await woken;
        pending = false;
      }
    } finally {
      signal?.removeEventListener('abort', stop);
      if (pending) stop();
    }
  }

  /** The reader wrote the page out: its chunks (up to seq `through`) are deleted. */
  async delivered(id: string, through: number): Promise<void> {
    if (through <= 0) return;
    const before = this.deleting.get(id);
    const done = (before ?? Promise.resolve()).then(() => this.deps.store.deleteStream({ id, through }));
    // The map only orders reads after deletes; the caller hears of a failure.
    const settled = done.catch(() => undefined);
    this.deleting.set(id, settled);
    try {
      await done;
    } finally {
      if (this.deleting.get(id) === settled) this.deleting.delete(id);
    }
  }

  private async page(job: JobRecord, after: number): Promise<StreamRead> {
    const { chunks: rows, more } = await this.deps.store.readStream({ id: job.id, after, limit: STREAM_PAGE_CHUNKS, maxBytes: STREAM_PAGE_BYTES });
    const chunks: string[] = [];
    const attempt = rows[0]?.attempt ?? runOf(job);
    let through = 0;
    for (const row of rows) {
      // A page holds one run: a later run's chunks begin the next page, so readers see the change.
      if (row.attempt !== attempt) return { job, chunks, truncated: false, more: true, through, attempt };
      through = row.seq;
      // The marker of a cut stream ends the page: what follows it belongs to another run.
      if (row.chunk === '') return { job, chunks, truncated: true, more: more || row !== rows[rows.length - 1], through, attempt };
      chunks.push(row.chunk);
    }
    return { job, chunks, truncated: false, more, through, attempt };
  }
}
