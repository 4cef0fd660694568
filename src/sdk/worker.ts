/**
 * Gantry worker SDK (`gantry/worker`): runs a handler against a Gantry (or RunPod) endpoint
 * using the worker protocol of runpod-python 1.12 (docs/worker-protocol.md).
 *
 * Three loops share one worker: taking jobs (long-poll job-take, or job-take-batch when
 * concurrency > 1), watching stop signals (one job-stop long-poll, always open) and the
 * heartbeat (ping every RUNPOD_PING_INTERVAL listing the jobs held).
 */
import { readFileSync } from 'node:fs';
import pino from 'pino';
import { resolveWorkerConfig, withQuery, type WorkerConfig } from './worker-config.js';
import { createBackoff, createWorkerHttp, describeError, sleep, type WorkerHttp } from './worker-http.js';
import { runJob, type JobRunDeps } from './worker-job.js';
import { isPermanentRefusal, refusalError, START_REFUSAL_CONFIRM_MS, type WorkerRefusedError } from './worker-refusal.js';
import type { WorkerHandle, WorkerJob, WorkerLogger, WorkerOptions } from './worker-types.js';

export type { Handler, JobContext, JobPolicy, S3Config, WorkerHandle, WorkerJob, WorkerLogger, WorkerOptions } from './worker-types.js';
export { resolveWorkerConfig, WorkerConfigError, type WorkerConfig } from './worker-config.js';
export { WorkerRefusedError } from './worker-refusal.js';

/** runpod-python's client gives up on a job-take or job-stop long-poll after 90 s. */
const LONG_POLL_TIMEOUT_MS = 90_000;
const TOO_MANY_REQUESTS_WAIT_MS = 5_000;
/** Least time between two job-stop polls, so a server that answers 204 at once is not hammered. */
const STOP_POLL_FLOOR_MS = 1_000;
/**
 * How long stop() leaves a job-take in flight before ending it: the server may have handed it
 * jobs just before (a Gantry gateway answers a stopping pool worker's take at once), and a
 * job whose answer is cut off runs nowhere until the server sees this worker gone.
 */
const TAKE_STOP_GRACE_MS = 2_000;

/**
 * The SDK's version (the gantry package's), sent as `runpod_version` in pings.
 *
 * @example
 * ```ts
 * import { SDK_VERSION } from 'gantry/worker';
 * console.log(`worker SDK ${SDK_VERSION}`);
 * ```
 */
export const SDK_VERSION = readPackageVersion();

/**
 * Starts a worker: takes jobs, runs `handler` on each, posts results, until `stop()`.
 * Throws at once on bad settings (no server URL, bad concurrency).
 *
 * @example
 * ```ts
 * // RUNPOD_WEBHOOK_GET_JOB etc. set by Gantry, or pass url/endpointId/apiKey:
 * import { startWorker } from 'gantry/worker';
 *
 * const worker = startWorker({
 *   handler: async (job, ctx) => {
 *     await ctx.progress('halfway');
 *     return { echo: job.input };
 *   },
 *   concurrency: 2,
 * });
 * process.once('SIGTERM', () => void worker.stop());
 * await worker.done;
 * ```
 */
export function startWorker(options: WorkerOptions): WorkerHandle {
  if (typeof options.handler !== 'function') throw new TypeError('handler must be a function');
  const concurrency = options.concurrency ?? 1;
  if (!Number.isInteger(concurrency) || concurrency < 1) {
    throw new TypeError(`concurrency must be a positive integer, got ${String(options.concurrency)}`);
  }
  const env = options.env ?? process.env;
  const config = resolveWorkerConfig(options, env);
  const log = options.logger ?? pino({ name: 'gantry-worker', level: env.LOG_LEVEL ?? 'info' });
  const http = createWorkerHttp(config.apiKey, SDK_VERSION);
  const deps: JobRunDeps = {
    config,
    http,
    log,
    handler: options.handler,
    returnAggregateStream: options.returnAggregateStream ?? false,
  };
  return new WorkerRuntime(deps, concurrency).start();
}

/** The state of one running worker; `startWorker` hands out only its WorkerHandle. */
class WorkerRuntime {
  /** Jobs taken and not yet finished or stopped, by id. */
  private readonly held = new Map<string, AbortController>();
  private readonly running = new Set<Promise<void>>();
  /** Aborted by stop(): ends the take loop (and its backoff waits). */
  private readonly stopTaking = new AbortController();
  /** Aborted TAKE_STOP_GRACE_MS after stop(): ends a job-take still in flight. */
  private readonly takeCalls = new AbortController();
  /** Settles when the take loop has ended (a take in flight at stop() answered or cut off). */
  private takeEnded: Promise<void> = Promise.resolve();
  /** Aborted after the drain: ends the job-stop poll and the heartbeat. */
  private readonly shutdown = new AbortController();
  private slotWaiters: (() => void)[] = [];
  private stopped: Promise<void> | null = null;
  private readonly config: WorkerConfig;
  private readonly http: WorkerHttp;
  private readonly log: WorkerLogger;
  private readonly fields: { workerId: string };
  private loops: Promise<void>[] = [];
  /** The server has answered a take or a ping with success once: refusals from here on are retried. */
  private accepted = false;
  /** When the first permanent refusal came while not yet accepted (null: none). */
  private refusedSince: number | null = null;
  /** The refusal that ended the worker at its start: `done` rejects with it. */
  private refusal: WorkerRefusedError | null = null;

  constructor(private readonly deps: JobRunDeps, private readonly concurrency: number) {
    this.config = deps.config;
    this.http = deps.http;
    this.log = deps.log;
    this.fields = { workerId: deps.config.workerId };
  }

  start(): WorkerHandle {
    const { config } = this;
    this.log.info({ ...this.fields, concurrency: this.concurrency, server: new URL(config.jobTakeUrl).origin }, 'worker started');
    if (!config.jobStopUrl) this.log.warn(this.fields, 'take URL has no /job-take/ segment: stop signals are off');
    if (!config.pingUrl) this.log.warn(this.fields, 'no ping URL or no API key: heartbeat is off');
    const take = this.guard('take', this.takeLoop());
    this.takeEnded = take;
    this.loops = [this.guard('stop-signals', this.stopSignalLoop()), this.guard('heartbeat', this.pingLoop())];
    const done = take.then(() => this.stop()).then(() => {
      if (this.refusal) throw this.refusal;
    });
    const stop = (): Promise<void> => this.stop();
    return { workerId: config.workerId, stop, done };
  }

  /** Stops taking, waits for in-flight jobs, then closes the long-polls. Idempotent. */
  stop(): Promise<void> {
    if (!this.stopped) {
      // A worker refused at its start ran nothing: the refusal is its one word (done rejects).
      if (!this.refusal) this.log.info({ ...this.fields, inFlight: this.held.size }, 'worker stopping: finishing in-flight jobs');
      this.stopTaking.abort();
      this.wakeSlotWaiters();
      const cutOff = setTimeout(() => this.takeCalls.abort(), TAKE_STOP_GRACE_MS);
      this.stopped = this.drain(cutOff);
    }
    return this.stopped;
  }

  private async drain(cutOff: NodeJS.Timeout): Promise<void> {
    // Jobs a take in flight brings are run like the others.
    await this.takeEnded;
    clearTimeout(cutOff);
    while (this.running.size > 0) await Promise.all(this.running);
    this.shutdown.abort();
    await Promise.all(this.loops);
    if (!this.refusal) this.log.info(this.fields, 'worker stopped');
  }

  private async takeLoop(): Promise<void> {
    const { config, http, log } = this;
    const signal = this.stopTaking.signal;
    const backoff = createBackoff();
    let quickEmpties = 0;
    while (!signal.aborted) {
      const free = this.concurrency - this.held.size;
      if (free <= 0) {
        await this.slotFreed();
        continue;
      }
      const jobInProgress = this.held.size > 0 ? '1' : '0';
      const batch = this.concurrency > 1 && config.jobTakeBatchUrl !== null;
      const url = batch && config.jobTakeBatchUrl
        ? withQuery(config.jobTakeBatchUrl, { batch_size: String(free), job_in_progress: jobInProgress })
        : withQuery(config.jobTakeUrl, { job_in_progress: jobInProgress });
      const startedAt = Date.now();
      let res;
      try {
        res = await http.get(url, LONG_POLL_TIMEOUT_MS, this.takeCalls.signal);
      } catch (err) {
        if (signal.aborted) break;
        log.warn({ ...this.fields, err: describeError(err) }, 'job-take failed; retrying');
        await sleep(backoff.next(), signal);
        continue;
      }
      if (res.status === 200 || res.status === 204) {
        backoff.reset();
        this.accepted = true;
        // 204 ends a long-poll: poll again at once, unless the server is not holding polls.
        quickEmpties = res.status === 204 && Date.now() - startedAt < 200 ? quickEmpties + 1 : 0;
        if (res.status === 200) {
          const jobs = parseJobs(res.body, log);
          log.debug({ ...this.fields, count: jobs.length, batch, asked: batch ? free : 1 }, 'jobs taken');
          this.startJobs(jobs);
        }
        else if (quickEmpties > 1) await sleep(STOP_POLL_FLOOR_MS, signal);
      } else if (res.status === 429) {
        await sleep(res.retryAfterMs ?? TOO_MANY_REQUESTS_WAIT_MS, signal);
      } else if (this.refusedAtStart(res)) {
        // Nothing will change that answer (docs/worker-protocol.md, "Refusals at start").
        this.refusal = refusalError(res, new URL(config.jobTakeUrl).origin);
        this.stopTaking.abort();
      } else {
        const quiet = !this.accepted && isPermanentRefusal(res.status);
        const level = quiet ? 'debug' : res.status === 401 || res.status === 403 || res.status === 404 ? 'error' : 'warn';
        log[level]({ ...this.fields, status: res.status, body: res.body.slice(0, 200) }, 'job-take refused; retrying');
        await sleep(quiet ? 1_000 : backoff.next(), signal);
      }
    }
  }

  /**
   * True once a refusal no retry can change (a 4xx but 408 and 429) has lasted
   * START_REFUSAL_CONFIRM_MS without the server ever accepting this worker.
   */
  private refusedAtStart(res: { status: number }): boolean {
    if (this.accepted || !isPermanentRefusal(res.status)) return false;
    const now = Date.now();
    this.refusedSince ??= now;
    return now - this.refusedSince >= START_REFUSAL_CONFIRM_MS;
  }

  /** A refusal by a loop other than the take loop: logged unless it is the start refusal the take loop reports. */
  private quietRefusal(status: number): boolean {
    return !this.accepted && isPermanentRefusal(status);
  }

  private startJobs(jobs: WorkerJob[]): void {
    for (const job of jobs) {
      if (this.held.has(job.id)) {
        this.log.warn({ ...this.fields, jobId: job.id }, 'job handed out again while running here; ignored');
        continue;
      }
      const controller = new AbortController();
      this.held.set(job.id, controller);
      const run = runJob(job, controller.signal, this.deps).then(
        ({ refresh }) => {
          if (refresh) {
            this.log.info({ ...this.fields, jobId: job.id }, 'refresh requested: worker stops after its in-flight jobs');
            void this.stop();
          }
        },
        (err: unknown) => this.log.error({ ...this.fields, jobId: job.id, err: describeError(err) }, 'job runner failed'),
      ).finally(() => {
        if (this.held.get(job.id) === controller) this.release(job.id);
        this.running.delete(run);
      });
      this.running.add(run);
    }
  }

  private release(jobId: string): void {
    this.held.delete(jobId);
    this.wakeSlotWaiters();
  }

  private slotFreed(): Promise<void> {
    if (this.stopTaking.signal.aborted) return Promise.resolve();
    return new Promise((resolve) => this.slotWaiters.push(resolve));
  }

  private wakeSlotWaiters(): void {
    const waiters = this.slotWaiters;
    this.slotWaiters = [];
    for (const wake of waiters) wake();
  }

  /** Holds one job-stop long-poll open and aborts the jobs it names (no result is posted). */
  private async stopSignalLoop(): Promise<void> {
    const { config, http, log } = this;
    if (!config.jobStopUrl) return;
    const signal = this.shutdown.signal;
    const backoff = createBackoff();
    while (!signal.aborted) {
      const startedAt = Date.now();
      let res;
      try {
        res = await http.get(config.jobStopUrl, LONG_POLL_TIMEOUT_MS, signal);
      } catch (err) {
        if (signal.aborted) break;
        log.warn({ ...this.fields, err: describeError(err) }, 'job-stop poll failed; retrying');
        await sleep(backoff.next(), signal);
        continue;
      }
      if (res.status === 200 || res.status === 204) {
        backoff.reset();
        const ids = res.status === 200 ? parseStopIds(res.body, log) : [];
        for (const id of ids) this.stopJob(id);
        if (ids.length === 0) await sleep(STOP_POLL_FLOOR_MS - (Date.now() - startedAt), signal);
      } else if (res.status === 429) {
        await sleep(res.retryAfterMs ?? TOO_MANY_REQUESTS_WAIT_MS, signal);
      } else {
        if (!this.quietRefusal(res.status)) log.warn({ ...this.fields, status: res.status, body: res.body.slice(0, 200) }, 'job-stop poll refused; retrying');
        await sleep(backoff.next(), signal);
      }
    }
  }

  private stopJob(jobId: string): void {
    const controller = this.held.get(jobId);
    if (!controller) return;
    this.log.info({ ...this.fields, jobId }, 'server stopped the job (cancelled or timed out)');
    // The slot frees now, as when runpod-python cancels the job's task; a handler that
    // ignores its signal keeps running, but nothing it produces is posted.
    this.release(jobId);
    controller.abort(new Error('job stopped by the server'));
  }

  /** Heartbeat: every interval, the jobs held, until the drain is over. */
  private async pingLoop(): Promise<void> {
    const { config, http, log } = this;
    if (!config.pingUrl) return;
    const signal = this.shutdown.signal;
    let failing = false;
    while (!signal.aborted) {
      const jobIds = [...this.held.keys()].join(',');
      const url = withQuery(config.pingUrl, { job_id: jobIds || undefined, runpod_version: SDK_VERSION });
      try {
        const res = await http.get(url, config.pingIntervalMs * 2, signal);
        if (res.status < 300) this.accepted = true;
        if (res.status >= 300 && !this.quietRefusal(res.status)) log.warn({ ...this.fields, status: res.status }, 'ping refused');
        else if (res.status < 300 && failing) log.info(this.fields, 'ping delivered again');
        failing = res.status >= 300;
      } catch (err) {
        if (signal.aborted) break;
        if (!failing) log.warn({ ...this.fields, err: describeError(err) }, 'ping failed');
        failing = true;
      }
      await sleep(config.pingIntervalMs, signal);
    }
  }

  /** The loops catch their own errors; this keeps a bug in one from going unseen. */
  private guard(name: string, loop: Promise<void>): Promise<void> {
    return loop.catch((err: unknown) => {
      this.log.error({ ...this.fields, loop: name, err: describeError(err) }, 'worker loop crashed');
    });
  }
}

/** job-take answers one job object; job-take-batch an array of them. */
function parseJobs(body: string, log: WorkerLogger): WorkerJob[] {
  if (body.trim() === '') return [];
  let parsed: unknown;
  try {
    parsed = JSON.parse(body);
  } catch {
    log.error({ body: body.slice(0, 200) }, 'job-take answer is not JSON; ignored');
    return [];
  }
  const list = Array.isArray(parsed) ? parsed : [parsed];
  const jobs: WorkerJob[] = [];
  for (const item of list) {
    if (item !== null && typeof item === 'object' && typeof (item as { id?: unknown }).id === 'string') {
      jobs.push(item as WorkerJob);
    } else {
      log.error({ item: JSON.stringify(item)?.slice(0, 200) }, 'job without an id; ignored');
    }
  }
  return jobs;
}

function parseStopIds(body: string, log: WorkerLogger): string[] {
  try {
    const parsed = JSON.parse(body) as { jobsToStop?: unknown };
    if (Array.isArray(parsed.jobsToStop)) {
      return parsed.jobsToStop.filter((id): id is string => typeof id === 'string');
    }
  } catch {
    // fall through to the log line
  }
  log.warn({ body: body.slice(0, 200) }, 'job-stop answer without a jobsToStop list; ignored');
  return [];
}

function readPackageVersion(): string {
  // dist/src/sdk/worker.js and src/sdk/worker.ts sit at different depths below package.json.
  for (const relative of ['../../../package.json', '../../package.json']) {
    try {
      const pkg = JSON.parse(readFileSync(new URL(relative, import.meta.url), 'utf8')) as { name?: string; version?: string };
      if (pkg.name === 'gantry' && pkg.version) return pkg.version;
    } catch {
      // not at this depth
    }
  }
  return '0.0.0';
}
