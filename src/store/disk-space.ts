import { statfsSync } from 'node:fs';
import { statfs } from 'node:fs/promises';
import type { Logger } from 'pino';
import { AppError } from '../model/errors.js';
import type { Clock } from '../util/clock.js';
import { periodic, type Periodic } from '../util/periodic.js';

/** Seconds a client is asked to wait after DISK_SPACE_LOW: space comes back by retention or an operator, not in a moment. */
export const DISK_RETRY_AFTER_S = 10;

/** How often the free space is read while nothing is admitted. */
const READ_EVERY_MS = 1_000;

/**
 * Bytes the disk is assumed to lose per byte of input admitted until the next read: SQLite
 * writes a row to its WAL, then again to the database file at the checkpoint.
 */
const WRITE_FACTOR = 2;

/** The free space of the data directory, as last read. */
export type DiskState = { low: false; freeBytes: number | null } | { low: true; freeBytes: number; since: number };

/**
 * The disk of the data directory as a shared resource: new jobs are refused (503
 * DISK_SPACE_LOW, Retry-After) while its free space is under `minFreeBytes`, before SQLite or
 * the image store meet a full disk, so what is already acknowledged (running jobs' results,
 * their stream chunks, the state changes of claims, cancels, purges) still has room to be
 * written. The space is read with statfs once a second, and at once when the bytes admitted
 * since the last read could have used a quarter of the reserve; between reads those bytes are
 * counted against it, so a burst of submissions cannot overshoot the reserve before the next
 * read. Each episode is logged once when it begins and once when it ends.
 */
export interface DiskSpace {
  /** Throws 503 DISK_SPACE_LOW when the free space, less what was admitted since it was read, is under the reserve; else counts `bytes` as admitted. */
  admit(bytes: number): void;
  state(): DiskState;
  /** The setting, for messages: bytes kept free. */
  readonly minFreeBytes: number;
  /** Reads the free space now (tests and tools; the loop reads it by itself). */
  readNow(): Promise<void>;
  start(): void;
  stop(): Promise<void>;
}

/** What DiskSpace reads and tells. */
export interface DiskSpaceOptions {
  /** The data directory (GANTRY_DATA_DIR). */
  dir: string;
  /** Bytes to keep free (GANTRY_DISK_MIN_FREE_BYTES); 0 turns the check off. */
  minFreeBytes: number;
  logger: Pick<Logger, 'warn' | 'info' | 'error'>;
  clock: Clock;
  /** Reads the bytes available in `dir` (default: statfs, blocks available to unprivileged users). */
  readFree?: (dir: string) => Promise<number>;
}

/** @example const disk = createDiskSpace({ dir: config.dataDir, minFreeBytes: 1e9, logger, clock }); disk.start(); disk.admit(1200); */
export function createDiskSpace(options: DiskSpaceOptions): DiskSpace {
  return new DiskWatch(options);
}

async function statfsFree(dir: string): Promise<number> {
  const s = await statfs(dir);
  return s.bavail * s.bsize;
}

function mb(bytes: number): string {
  return `${(bytes / 1_000_000).toFixed(1)} MB`;
}

class DiskWatch implements DiskSpace {
  readonly minFreeBytes: number;
  private freeBytes: number | null = null;
  private admittedSince = 0;
  private lowSince: number | null = null;
  private readFailed = false;
  private readonly loop: Periodic;
  private readonly readFree: (dir: string) => Promise<number>;

  constructor(private readonly options: DiskSpaceOptions) {
    this.minFreeBytes = options.minFreeBytes;
    this.readFree = options.readFree ?? statfsFree;
    this.loop = periodic({ name: 'disk space', everyMs: READ_EVERY_MS, pass: () => this.read(), logger: options.logger, clock: options.clock });
    if (this.minFreeBytes > 0 && !options.readFree) {
      // The first answer is right from the start: a gateway started on a full disk is not ready.
      try {
        const s = statfsSync(options.dir);
        this.observe(s.bavail * s.bsize);
      } catch {
        // The folder may not exist yet; the loop reads it once it does.
      }
    }
  }

  admit(bytes: number): void {
    if (this.minFreeBytes === 0 || this.freeBytes === null) return;
    // What was admitted since the last read counts against the reserve; this job may take a
    // little of it (at most a body), as the results of running jobs may.
    const left = this.freeBytes - this.admittedSince * WRITE_FACTOR;
    if (this.lowSince !== null || left < this.minFreeBytes) {
      // A refusal by the estimate alone asks for a read now: the disk may have more room than counted.
      if (this.lowSince === null) this.loop.kick();
      throw new AppError(
        'DISK_SPACE_LOW',
        `The gateway's disk is nearly full (${mb(Math.max(0, this.freeBytes))} free, ${mb(this.minFreeBytes)} kept for running jobs); new jobs are refused until space is freed`,
        undefined,
        { 'retry-after': String(DISK_RETRY_AFTER_S) },
      );
    }
    this.admittedSince += bytes;
    if (this.admittedSince * WRITE_FACTOR * 4 >= this.minFreeBytes) this.loop.kick();
  }

  state(): DiskState {
    if (this.lowSince !== null && this.freeBytes !== null) return { low: true, freeBytes: this.freeBytes, since: this.lowSince };
    return { low: false, freeBytes: this.freeBytes };
  }

  readNow(): Promise<void> {
    return this.read();
  }

  start(): void {
    if (this.minFreeBytes > 0) this.loop.start();
  }

  stop(): Promise<void> {
    return this.loop.stop();
  }

  private async read(): Promise<void> {
    const admitted = this.admittedSince;
    let free: number;
    try {
      free = await this.readFree(this.options.dir);
    } catch (err) {
      if (!this.readFailed) this.options.logger.error({ err, dir: this.options.dir }, 'cannot read the free space of the data directory; new jobs are not checked against GANTRY_DISK_MIN_FREE_BYTES');
      this.readFailed = true;
      return;
    }
    this.readFailed = false;
    // What was admitted during the read is counted against the next one.
    this.admittedSince = Math.max(0, this.admittedSince - admitted);
    this.observe(free);
  }

  private observe(free: number): void {
    this.freeBytes = free;
    const { logger, dir } = this.options;
    if (this.lowSince === null && free < this.minFreeBytes) {
      this.lowSince = this.options.clock.now();
      logger.warn({ dir, freeBytes: free, minFreeBytes: this.minFreeBytes }, 'disk space low: refusing new jobs (503 DISK_SPACE_LOW) until more is free; running jobs still report');
    } else if (this.lowSince !== null && free >= this.minFreeBytes + this.minFreeBytes / 10) {
      // A tenth more than the reserve before resuming, so the episode does not flap at its edge.
      logger.info({ dir, freeBytes: free, minFreeBytes: this.minFreeBytes, ms: this.options.clock.now() - this.lowSince }, 'disk space available again: taking new jobs');
      this.lowSince = null;
    }
  }
}
