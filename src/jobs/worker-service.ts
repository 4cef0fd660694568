import { AppError } from '../errors.js';
import { imageUsage } from '../images/image-endpoints.js';
import type { StopSignals } from '../dispatch/stop-signals.js';
import type { TakeQueue } from '../dispatch/take-queue.js';
import type { JobRecord } from '../store/store.js';
import type { JobService, JobServiceDeps } from './job-service.js';
import { renderTakenJob } from './job-view.js';
import { isTerminal } from './states.js';

/** A stream chunk is at most 1 MB (spec, Limits); larger output is split. */
export const MAX_CHUNK_BYTES = 1_000_000;
/** Characters per piece when splitting text: even at 6 bytes a character (\u escapes) it fits. */
const SPLIT_CHARS = Math.floor(MAX_CHUNK_BYTES / 6) - 2;
/** How long a taken job may be missing from its worker's pings before it counts as never received. */
export const PING_GRACE_MS = 15_000;
/** A worker's liveness row is written at most this often per worker. */
const TOUCH_EVERY_MS = 1_000;

export type DoneOutcome =
  | { kind: 'finished'; job: JobRecord }
  | { kind: 'progress'; applied: boolean }
  | { kind: 'ignored'; job: JobRecord };

function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/**
 * Splits one streamed value into JSON chunks of at most 1 MB. Text (a string value, or the JSON
 * of a larger value) is cut into string pieces; surrogate pairs are never cut.
 */
export function splitChunk(value: unknown): string[] {
  const json = JSON.stringify(value ?? null);
  if (json.length <= SPLIT_CHARS || Buffer.byteLength(json) <= MAX_CHUNK_BYTES) return [json];
  const text = typeof value === 'string' ? value : json;
  const pieces: string[] = [];
  for (let at = 0; at < text.length; ) {
    let end = Math.min(text.length, at + SPLIT_CHARS);
    const last = text.charCodeAt(end - 1);
    if (end < text.length && last >= 0xd800 && last <= 0xdbff) end--;
    pieces.push(JSON.stringify(text.slice(at, end)));
    at = end;
  }
  return pieces;
}

/**
 * The worker side of the protocol (DESIGN.md §1): take, stop, done, stream, ping. Results are
 * accepted only from the worker that holds the job; anything else is answered without
 * changing a stored job.
 */
export function createWorkerService(deps: JobServiceDeps & { jobs: JobService; takeQueue: TakeQueue; stopSignals: StopSignals }) {
  const { store, notifier, config, now, jobs, takeQueue, stopSignals } = deps;
  const lastTouch = new Map<string, number>();

  /** Records that a worker is alive (throttled to one write a second per worker). */
  async function touch(endpointId: string, workerId: string, extra?: { healthy: boolean; reason: string | null; version: string | null }): Promise<void> {
    const t = now();
    if (!extra && t - (lastTouch.get(workerId) ?? 0) < TOUCH_EVERY_MS) return;
    lastTouch.set(workerId, t);
    await store.touchWorker({ id: workerId, endpointId, now: t, ...extra });
  }

  function claim(endpointId: string, workerId: string, limit: number): Promise<JobRecord[]> {
    return store.claimJobs({ endpointId, workerId, limit, now: now() });
  }

  /** Long-poll for up to `limit` jobs; [] when none came within the take wait. */
  async function take(endpointId: string, workerId: string, limit: number, signal: AbortSignal): Promise<JobRecord[]> {
    await touch(endpointId, workerId);
    const taken = await takeQueue.take(endpointId, workerId, limit, config.jobTakeWaitMs, signal);
    if (taken.length > 0) lastTouch.set(workerId, now()); // claimJobs proves liveness too
    return taken;
  }

  /** The JSON a worker receives for a job, with s3Config decrypted (the only place it is). */
  function renderForWorker(job: JobRecord): string {
    return renderTakenJob(job, job.s3Config === null ? null : deps.secrets.open(job.s3Config));
  }

  async function done(endpointId: string, workerId: string, jobId: string, body: unknown): Promise<DoneOutcome> {
    if (!isObject(body)) throw new AppError(400, 'INVALID_BODY', 'Invalid job result: expected a JSON object with "output" or "error"');
    await touch(endpointId, workerId);
    if (body.stopPod === true) notifier.publish({ type: 'worker-recycle', workerId, endpointId });

    if (body.status === 'IN_PROGRESS') {
      // A progress update; it may arrive after the final result and must never reopen a job.
      const applied = await store.setProgress({ id: jobId, workerId, endpointId, outputJson: JSON.stringify(body.output ?? null) });
      if (applied) notifier.publish({ type: 'job-updated', jobId });
      else await requireJob(endpointId, jobId);
      return { kind: 'progress', applied };
    }

    const error = body.error;
    const failed = error !== undefined && error !== null && error !== false && error !== '';
    const finished = await store.finishJob({
      id: jobId,
      workerId,
      endpointId,
      status: failed ? 'FAILED' : 'COMPLETED',
      outputJson: failed ? null : JSON.stringify(body.output ?? null),
      error: failed ? (typeof error === 'string' ? error : JSON.stringify(error)) : null,
      now: now(),
    });
    if (finished) {
      await recordUsage(finished);
      jobs.jobEnded(finished);
      return { kind: 'finished', job: finished };
    }
    const job = await requireJob(endpointId, jobId);
    // A duplicate of an accepted result, or a late one for a cancelled / timed-out job: 2xx so
    // the worker does not retry, and nothing changes.
    if (isTerminal(job.status)) return { kind: 'ignored', job };
    throw new AppError(409, 'JOB_NOT_HELD', `Job ${jobId} is ${job.status} and not held by worker ${workerId}`, { id: jobId, status: job.status });
  }

  /** Bills a completed job of a public endpoint; a failed write is logged, never fails the result. */
  async function recordUsage(job: JobRecord): Promise<void> {
    try {
      const usage = imageUsage(config.images, job);
      if (usage) await store.recordUsage(usage);
    } catch (err) {
      deps.logger.error({ err, jobId: job.id, endpointId: job.endpointId }, 'usage record failed');
    }
  }

  async function requireJob(endpointId: string, jobId: string): Promise<JobRecord> {
    const job = await jobs.getJob(endpointId, jobId);
    if (!job) throw new AppError(404, 'JOB_NOT_FOUND', `Job ${jobId} not found`, { id: jobId });
    return job;
  }

  /** Appends streamed output; `{output: chunk}` or an array of such objects. */
  async function stream(endpointId: string, workerId: string, jobId: string, body: unknown): Promise<{ accepted: boolean; chunks: number }> {
    const items = Array.isArray(body) ? body : [body];
    const chunks: string[] = [];
    for (const item of items) {
      if (!isObject(item) || !('output' in item)) throw new AppError(400, 'INVALID_BODY', 'Invalid stream chunk: expected {"output": ...}');
      chunks.push(...splitChunk(item.output));
    }
    await touch(endpointId, workerId);
    const accepted = await store.appendStream({ id: jobId, workerId, endpointId, chunks });
    if (accepted) notifier.publish({ type: 'job-updated', jobId });
    else {
      const job = await requireJob(endpointId, jobId);
      if (!isTerminal(job.status)) {
        throw new AppError(409, 'JOB_NOT_HELD', `Job ${jobId} is ${job.status} and not held by worker ${workerId}`, { id: jobId, status: job.status });
      }
    }
    return { accepted, chunks: accepted ? chunks.length : 0 };
  }

  /**
   * Heartbeat. The worker lists the jobs it holds; any of them that it should no longer run
   * (cancelled, timed out, or given to another worker after it was presumed lost) is added to
   * its stop list, so a stop signal lost in transit is repaired by the next ping.
   *
   * The other way round: a job the store says this worker holds but that the worker has not
   * listed for PING_GRACE_MS never reached it (its job-take answer was lost) and goes back to
   * the queue. Only workers that send `runpod_version` (runpod-python, our SDK) list their
   * jobs reliably, so only their pings are read that way.
   */
  async function ping(endpointId: string, workerId: string, held: string[], health: { healthy: boolean; reason: string | null; version: string | null }): Promise<void> {
    await touch(endpointId, workerId, health);
    if (health.version !== null) await returnUnlisted(endpointId, workerId, held);
    if (held.length === 0) return;
    const states = await store.jobStates(held);
    const known = new Map(states.map((s) => [s.id, s]));
    const stop = held.filter((id) => {
      const s = known.get(id);
      return !s || s.status !== 'IN_PROGRESS' || s.workerId !== workerId;
    });
    stopSignals.add(workerId, stop);
  }

  async function returnUnlisted(endpointId: string, workerId: string, listed: string[]): Promise<void> {
    const missing = (await store.jobsHeldBy(workerId)).filter((id) => !listed.includes(id));
    if (missing.length === 0) return;
    const cutoff = now() - PING_GRACE_MS;
    const lost: string[] = [];
    for (const id of missing) {
      const job = await store.getJob(id);
      if (job?.startedAt != null && job.startedAt < cutoff) lost.push(id);
    }
    if (lost.length === 0) return;
    const returned = await store.returnJobs({ ids: lost, workerId });
    if (returned.length > 0) {
      deps.logger.warn({ workerId, endpointId, jobs: returned }, 'worker does not hold jobs given to it; returned to the queue');
      notifier.publish({ type: 'jobs-available', endpointId });
    }
  }

  return {
    take,
    claim,
    renderForWorker,
    stops: (workerId: string, signal: AbortSignal) => stopSignals.take(workerId, config.jobTakeWaitMs, signal),
    done,
    stream,
    ping,
    touch,
    waitingWorkers: () => takeQueue.waitingWorkers(),
  };
}

export type WorkerService = ReturnType<typeof createWorkerService>;
