import type { Logger } from 'pino';
import type { GantryConfig } from '../config/config.js';
import type { StopSignals } from '../dispatch/stop-signals.js';
import type { TakeQueue } from '../dispatch/take-queue.js';
import type { WorkerLiveness } from '../dispatch/worker-liveness.js';
import { AppError } from '../model/errors.js';
import type { Notifier } from '../model/events.js';
import { isTerminal } from '../model/job-states.js';
import { isObject, jsonText } from '../model/json.js';
import type { JobRecord, JobWithInput } from '../model/records.js';
import { openIfSealed, type SecretBox } from '../security/secret-box.js';
import type { JobStore, WorkerStore } from '../store/store.js';
import { renderTakenJob, type JsonParts } from './job-view.js';
import { splitChunk } from './stream-chunks.js';
import type { JobTransitions } from './transitions.js';

/** How long a taken job may be missing from its worker's pings before it counts as never received. */
export const PING_GRACE_MS = 15_000;
/**
 * A worker's liveness row is written at most this often per worker (and at most every quarter of
 * workerLostMs), so a worker heard from within the last TOUCH_EVERY_MS always has a row younger
 * than workerLostMs when the reaper looks.
 */
const TOUCH_EVERY_MS = 1_000;
/** How often the last-contact records older than TOUCH_EVERY_MS are swept (they only throttle writes). */
const SWEEP_EVERY_MS = 10_000;

/**
 * Why a worker's post changed nothing and is refused: no job of the endpoint has this id, or the
 * job is live and held by another worker (or queued: the worker was presumed lost).
 */
export type WorkerRefusal = { kind: 'refused'; refusal: 'job-not-found'; jobId: string } | { kind: 'refused'; refusal: 'not-held'; job: JobRecord };

/** What a job-done did: ended the job, applied (or not) a progress update, was a duplicate or late result, or was refused. */
export type DoneOutcome = { kind: 'finished'; job: JobRecord } | { kind: 'progress'; applied: boolean } | { kind: 'ignored'; job: JobRecord } | WorkerRefusal;

/** What a job-stream did: appended its chunks (or not, for a job that ended), or was refused. */
export type StreamOutcome = { kind: 'appended'; accepted: boolean; chunks: number } | { kind: 'stream-full'; jobId: string; maxBytes: number } | WorkerRefusal;

/** What a ping says about the worker's health (ping?status=unhealthy&check=&reason=, runpod_version). */
export interface WorkerHealthReport {
  healthy: boolean;
  reason: string | null;
  version: string | null;
}

/**
 * The worker side of the protocol (docs/worker-protocol.md): take, stop, done, stream, ping.
 * Results are accepted only from the worker that holds the job; anything else is answered
 * without changing a stored job.
 */
export interface WorkerService {
  /** Long-poll for up to `limit` jobs; [] when none came within the take wait. */
  take(endpointId: string, workerId: string, limit: number, signal: AbortSignal): Promise<JobWithInput[]>;
  /** The JSON a worker receives for a job, with s3Config decrypted (the only place it is). */
  renderForWorker(job: JobWithInput): JsonParts;
  /** Long-poll for the ids of jobs the worker must stop. */
  stops(endpointId: string, workerId: string, signal: AbortSignal): Promise<string[]>;
  /** job-done: a result (COMPLETED / FAILED) or a progress update. */
  done(endpointId: string, workerId: string, jobId: string, body: unknown): Promise<DoneOutcome>;
  /**
   * job-stream: `{output: chunk}` or an array of such objects. Refused `stream-full` when the
   * job's undelivered chunks would pass GANTRY_STREAM_BUFFER_BYTES (the run's stream is then
   * cut: its later posts are refused too).
   */
  stream(endpointId: string, workerId: string, jobId: string, body: unknown): Promise<StreamOutcome>;
  /**
   * A result the gateway refused (too large, not JSON) would be refused every time the worker
   * tried: the job it was for ends FAILED with `reason`, if this worker holds it.
   */
  refuseResult(endpointId: string, workerId: string, jobId: string, reason: string): Promise<void>;
  /** Heartbeat listing the jobs the worker holds. */
  ping(endpointId: string, workerId: string, held: string[], health: WorkerHealthReport): Promise<void>;
  /**
   * Records that a worker is alive (throttled to one write a second per worker). Every worker
   * request starts here: a worker id belongs to the endpoint that registered it, and a request
   * for it under another endpoint is refused (409 WORKER_OF_OTHER_ENDPOINT) before it changes anything.
   */
  touch(endpointId: string, workerId: string): Promise<void>;
  /** How many workers this gateway keeps a last-contact record of (they are pruned within seconds of the worker's last request). */
  trackedWorkers(): number;
  /**
   * The pool resumes a paused worker (flashboot): its next request writes its liveness row
   * whatever the throttle, so the row tells when it first polled after the resume (its cold start).
   */
  resumed(workerId: string): void;
  /** Marks every worker with an open job-take long-poll on this gateway alive. */
  touchWaiting(): Promise<void>;
  /**
   * Shutdown: waits until the jobs held by the workers pinging this gateway have ended, for at
   * most `graceMs`; resolves with the ids of those still running then. Their results keep
   * being taken meanwhile; a worker that stops pinging (it died) is not waited for, nor is one
   * that never pings.
   */
  finishConnected(graceMs: number): Promise<string[]>;
}

/** How often a shutdown re-reads the jobs it waits for. */
const FINISH_POLL_MS = 200;

/** What the worker side of the protocol uses. */
export interface WorkerServiceDeps {
  store: Pick<JobStore, 'getJob' | 'jobStates'> & Pick<WorkerStore, 'touchWorker' | 'jobsHeldBy'>;
  transitions: JobTransitions;
  takeQueue: TakeQueue;
  stopSignals: StopSignals;
  /** Pings are recorded there; a worker the pool is stopping gets its job-stop answered at once. */
  liveness: Pick<WorkerLiveness, 'pinged' | 'isStopping' | 'pinging'>;
  notifier: Pick<Notifier, 'publish'>;
  /** Opens a job's sealed s3Config for its worker. */
  secrets: Pick<SecretBox, 'open'>;
  config: Pick<GantryConfig, 'jobTakeWaitMs' | 'workerLostMs' | 'streamBufferBytes'>;
  logger: Logger;
  now(): number;
}

/** @example const workers = createWorkerService({ store, transitions, takeQueue, stopSignals, liveness, notifier, secrets, config, logger, now: Date.now }); */
export function createWorkerService(deps: WorkerServiceDeps): WorkerService {
  return new Workers(deps);
}

class Workers implements WorkerService {
  /** Last write of each worker's liveness row, to throttle it; swept so it holds only recent workers. */
  private readonly lastTouch = new Map<string, { endpointId: string; at: number }>();
  private lastSweep = 0;
  /** When this gateway started: a job is "unlisted" only for the time since (the reconnect grace). */
  private readonly startedAt: number;

  constructor(private readonly deps: WorkerServiceDeps) {
    this.startedAt = deps.now();
  }

  async touch(endpointId: string, workerId: string, health?: WorkerHealthReport): Promise<void> {
    // `t` is when the request arrived; lastTouch is set only when a row write is issued, so the
    // throttle never hides a live worker (issue 15: a claim used to reset it without a write).
    const t = this.deps.now();
    this.sweep(t);
    const every = Math.min(TOUCH_EVERY_MS, this.deps.config.workerLostMs / 4);
    const last = this.lastTouch.get(workerId);
    if (!health && last?.endpointId === endpointId && t - last.at < every) return;
    this.lastTouch.set(workerId, { endpointId, at: t });
    if (!(await this.deps.store.touchWorker({ id: workerId, endpointId, now: t, ...health }))) {
      this.lastTouch.delete(workerId);
      throw otherEndpoint(workerId, endpointId);
    }
  }

  trackedWorkers(): number {
    return this.lastTouch.size;
  }

  resumed(workerId: string): void {
    this.lastTouch.delete(workerId);
  }

  async touchWaiting(): Promise<void> {
    for (const { endpointId, workerId } of this.deps.takeQueue.waitingWorkers()) {
      await this.touch(endpointId, workerId).catch((err: unknown) => {
        if (!(err instanceof AppError)) throw err; // a 409: the id went to another endpoint since it parked; its requests are refused
      });
    }
  }

  async finishConnected(graceMs: number): Promise<string[]> {
    const deadline = Date.now() + graceMs;
    const { liveness, store } = this.deps;
    const held = new Map<string, string>();
    for (const workerId of liveness.pinging()) for (const jobId of await store.jobsHeldBy(workerId)) held.set(jobId, workerId);
    for (;;) {
      // A worker that stops pinging meanwhile (it died) is not waited for.
      const alive = new Set(liveness.pinging());
      const states = held.size === 0 ? [] : await store.jobStates([...held.keys()]);
      const running = states.filter((s) => s.status === 'IN_PROGRESS' && s.workerId === held.get(s.id) && alive.has(s.workerId)).map((s) => s.id);
      if (running.length === 0 || Date.now() >= deadline) return running;
      await new Promise((resolve) => setTimeout(resolve, Math.min(FINISH_POLL_MS, deadline - Date.now())));
    }
  }

  /** Drops the last-contact records too old to throttle anything (a worker gone is forgotten within SWEEP_EVERY_MS). */
  private sweep(t: number): void {
    if (t - this.lastSweep < SWEEP_EVERY_MS) return;
    this.lastSweep = t;
    for (const [id, last] of this.lastTouch) if (t - last.at >= TOUCH_EVERY_MS) this.lastTouch.delete(id);
  }

  async take(endpointId: string, workerId: string, limit: number, signal: AbortSignal): Promise<JobWithInput[]> {
    await this.touch(endpointId, workerId);
    return this.deps.takeQueue.take(endpointId, workerId, limit, this.deps.config.jobTakeWaitMs, signal);
  }

  renderForWorker(job: JobWithInput): JsonParts {
    const webhook = job.webhook === null ? null : openIfSealed(this.deps.secrets, job.webhook);
    return renderTakenJob(job, job.s3Config === null ? null : this.deps.secrets.open(job.s3Config), webhook);
  }

  async stops(endpointId: string, workerId: string, signal: AbortSignal): Promise<string[]> {
    await this.touch(endpointId, workerId);
    // A stopping worker is answered at once (what is pending, if anything): holding its poll would hold its exit.
    const waitMs = this.deps.liveness.isStopping(workerId) ? 0 : this.deps.config.jobTakeWaitMs;
    return this.deps.stopSignals.take(workerId, waitMs, signal);
  }

  async done(endpointId: string, workerId: string, jobId: string, body: unknown): Promise<DoneOutcome> {
    await this.touch(endpointId, workerId);
    if (!isObject(body)) throw new AppError('INVALID_BODY', 'Invalid job result: expected a JSON object with "output" or "error"');
    if (body.stopPod === true) this.deps.notifier.publish({ type: 'worker-recycle', workerId, endpointId });
    if (body.status === 'IN_PROGRESS') {
      // A progress update; it may arrive after the final result and must never reopen a job.
      const applied = await this.deps.transitions.progress({ id: jobId, workerId, endpointId, outputJson: jsonText(body.output ?? null) });
      if (!applied && !(await this.findJob(endpointId, jobId))) return { kind: 'refused', refusal: 'job-not-found', jobId };
      return { kind: 'progress', applied };
    }
    const error = body.error;
    const failed = error !== undefined && error !== null && error !== false && error !== '';
    // Listed fields, no spread: this runs once per job.
    const finished = await this.deps.transitions.finish({
      id: jobId,
      workerId,
      endpointId,
      status: failed ? 'FAILED' : 'COMPLETED',
      outputJson: failed ? null : jsonText(body.output ?? null),
      error: failed ? (typeof error === 'string' ? error : JSON.stringify(error)) : null,
    });
    if (finished) return { kind: 'finished', job: finished };
    const job = await this.findJob(endpointId, jobId);
    if (!job) return { kind: 'refused', refusal: 'job-not-found', jobId };
    // A duplicate of an accepted result, or a late one for a cancelled / timed-out job: 2xx so
    // the worker does not retry, and nothing changes.
    if (isTerminal(job.status)) return { kind: 'ignored', job };
    return { kind: 'refused', refusal: 'not-held', job };
  }

  async refuseResult(endpointId: string, workerId: string, jobId: string, reason: string): Promise<void> {
    const failed = await this.deps.transitions.finish({ id: jobId, workerId, endpointId, status: 'FAILED', outputJson: null, error: reason });
    if (failed) this.deps.logger.warn({ workerId, endpointId, jobId, reason }, 'result refused; job failed');
  }

  async stream(endpointId: string, workerId: string, jobId: string, body: unknown): Promise<StreamOutcome> {
    await this.touch(endpointId, workerId);
    const items = Array.isArray(body) ? body : [body];
    const chunks: string[] = [];
    for (const item of items) {
      if (!isObject(item) || !('output' in item)) throw new AppError('INVALID_BODY', 'Invalid stream chunk: expected {"output": ...}');
      chunks.push(...splitChunk(item.output));
    }
    let bytes = 0;
    for (const chunk of chunks) bytes += Buffer.byteLength(chunk);
    const maxBytes = this.deps.config.streamBufferBytes;
    const outcome = await this.deps.transitions.appendStream({ id: jobId, workerId, endpointId, chunks, bytes, maxBytes });
    if (outcome === 'full') return { kind: 'stream-full', jobId, maxBytes };
    if (outcome === 'not-held') {
      const job = await this.findJob(endpointId, jobId);
      if (!job) return { kind: 'refused', refusal: 'job-not-found', jobId };
      if (!isTerminal(job.status)) return { kind: 'refused', refusal: 'not-held', job };
    }
    const accepted = outcome === 'appended';
    return { kind: 'appended', accepted, chunks: accepted ? chunks.length : 0 };
  }

  /**
   * The worker lists the jobs it holds; any of them that it should no longer run (cancelled,
   * timed out, or given to another worker after it was presumed lost) is added to its stop
   * list, so a stop signal lost in transit is repaired by the next ping.
   *
   * The other way round: a job the store says this worker holds but that the worker has not
   * listed for PING_GRACE_MS (counted from the later of the job's start and this gateway's)
   * never reached it (its job-take answer was lost) and goes back to the queue. Only workers that send `runpod_version` (runpod-python, our SDK) list their
   * jobs reliably, so only their pings are read that way.
   */
  async ping(endpointId: string, workerId: string, held: string[], health: WorkerHealthReport): Promise<void> {
    await this.touch(endpointId, workerId, health);
    this.deps.liveness.pinged(workerId);
    if (health.version !== null) await this.returnUnlisted(endpointId, workerId, held);
    if (held.length === 0) return;
    const states = await this.deps.store.jobStates(held);
    const known = new Map(states.map((s) => [s.id, s]));
    const stop = held.filter((id) => {
      const s = known.get(id);
      return !s || s.status !== 'IN_PROGRESS' || s.workerId !== workerId;
    });
    this.deps.stopSignals.add(workerId, stop);
  }

  private async returnUnlisted(endpointId: string, workerId: string, listed: string[]): Promise<void> {
    const cutoff = this.deps.now() - PING_GRACE_MS;
    // Reconnect grace: in the first PING_GRACE_MS after a gateway starts, workers are still
    // finding it again and re-sending what they hold; lists are not enforced yet.
    if (this.startedAt > cutoff) return;
    const missing = (await this.deps.store.jobsHeldBy(workerId)).filter((id) => !listed.includes(id));
    if (missing.length === 0) return;
    const lost: string[] = [];
    for (const id of missing) {
      const job = await this.deps.store.getJob(id);
      if (job?.startedAt != null && job.startedAt < cutoff) lost.push(id);
    }
    if (lost.length === 0) return;
    const { requeued, failed } = await this.deps.transitions.returnLost(endpointId, workerId, lost);
    if (requeued.length > 0) this.deps.logger.warn({ workerId, endpointId, jobs: requeued.map((j) => j.id) }, 'worker does not hold jobs given to it; returned to the queue');
    if (failed.length > 0) this.deps.logger.warn({ workerId, endpointId, jobs: failed.map((j) => j.id) }, 'worker does not hold jobs given to it; failed after maxAttempts hand-outs');
  }

  /** The job, if it is one of the endpoint's: a job of another endpoint is not found. */
  private async findJob(endpointId: string, jobId: string): Promise<JobRecord | undefined> {
    const job = await this.deps.store.getJob(jobId);
    return job && job.endpointId === endpointId ? job : undefined;
  }
}

function otherEndpoint(workerId: string, endpointId: string): AppError {
  return new AppError('WORKER_OF_OTHER_ENDPOINT', `Worker id ${workerId} belongs to another endpoint than ${endpointId}; give each worker an id of its own`, {
    workerId,
  });
}

