/**
 * Turns worker options and RUNPOD_* environment variables into the URLs of the worker
 * protocol (docs/worker-protocol.md). The templates end in `?` because requests append `&key=value`,
 * exactly as runpod-python does (`job-take/W?&job_in_progress=0`).
 */
import { randomUUID } from 'node:crypto';

/** The worker's resolved connection settings. */
export interface WorkerConfig {
  workerId: string;
  apiKey: string;
  /** `.../job-take/{worker}?` */
  jobTakeUrl: string;
  /** `.../job-take-batch/{worker}?`, or null when the take URL has no `/job-take/` segment. */
  jobTakeBatchUrl: string | null;
  /** `.../job-stop/{worker}?`, or null when the take URL has no `/job-take/` segment. */
  jobStopUrl: string | null;
  /** `.../job-done/{worker}/$ID?` — `$ID` is the job id. */
  jobDoneTemplate: string;
  /** `.../job-stream/{worker}/$ID?` — `$ID` is the job id. */
  jobStreamTemplate: string;
  /** `.../ping/{worker}`, or null when pings are off (no URL, key or worker id, as runpod-python). */
  pingUrl: string | null;
  pingIntervalMs: number;
}

/** Connection-related subset of the worker options. */
export interface ConnectionOptions {
  url?: string;
  endpointId?: string;
  apiKey?: string;
  workerId?: string;
  pingIntervalMs?: number;
}

/**
 * A missing or malformed setting; the worker refuses to start rather than guess.
 *
 * @example
 * ```ts
 * import { startWorker, WorkerConfigError } from 'gantry/worker';
 * try { startWorker({ handler: (job) => job.input }); }
 * catch (err) { if (err instanceof WorkerConfigError) console.error(err.message); }
 * ```
 */
export class WorkerConfigError extends Error {
  override readonly name = 'WorkerConfigError';
}

const DEFAULT_PING_INTERVAL_MS = 10_000;

/**
 * Resolves connection settings: explicit options first, then the RUNPOD_* variables of `env`.
 *
 * @example
 * ```ts
 * import { resolveWorkerConfig } from 'gantry/worker';
 * const config = resolveWorkerConfig({ url: 'http://127.0.0.1:8080', endpointId: 'ep', workerId: 'w1' }, {});
 * config.jobTakeUrl; // 'http://127.0.0.1:8080/v2/ep/job-take/w1?'
 * ```
 */
export function resolveWorkerConfig(
  options: ConnectionOptions,
  env: Record<string, string | undefined>,
): WorkerConfig {
  const workerId = nonEmpty(options.workerId) ?? nonEmpty(env.RUNPOD_POD_ID) ?? randomUUID();
  const apiKey = options.apiKey ?? env.RUNPOD_AI_API_KEY ?? '';
  const pingIntervalMs = options.pingIntervalMs ?? parsePingInterval(env.RUNPOD_PING_INTERVAL);
  if (!Number.isFinite(pingIntervalMs) || pingIntervalMs < 100) {
    throw new WorkerConfigError(`ping interval must be at least 100 ms, got ${pingIntervalMs}`);
  }

  let take: string;
  let done: string;
  let stream: string;
  let ping: string | null;
  if (options.url !== undefined || options.endpointId !== undefined) {
    const url = nonEmpty(options.url);
    const endpointId = nonEmpty(options.endpointId);
    if (!url || !endpointId) throw new WorkerConfigError('url and endpointId must be given together');
    const base = `${stripBase(url)}/v2/${encodeURIComponent(endpointId)}`;
    const w = encodeURIComponent(workerId);
    take = `${base}/job-take/${w}?`;
    done = `${base}/job-done/${w}/$ID?`;
    stream = `${base}/job-stream/${w}/$ID?`;
    ping = `${base}/ping/${w}`;
  } else {
    const getJob = nonEmpty(env.RUNPOD_WEBHOOK_GET_JOB);
    const postOutput = nonEmpty(env.RUNPOD_WEBHOOK_POST_OUTPUT);
    if (!getJob || !postOutput) {
      throw new WorkerConfigError(
        'no server to work for: set RUNPOD_WEBHOOK_GET_JOB and RUNPOD_WEBHOOK_POST_OUTPUT, or pass url and endpointId',
      );
    }
    take = getJob.replaceAll('$ID', workerId);
    done = postOutput.replaceAll('$RUNPOD_POD_ID', workerId);
    // runpod-python has no fallback for a missing stream URL; derive it from job-done.
    stream = nonEmpty(env.RUNPOD_WEBHOOK_POST_STREAM)?.replaceAll('$RUNPOD_POD_ID', workerId)
      ?? done.replace('/job-done/', '/job-stream/');
    ping = nonEmpty(env.RUNPOD_WEBHOOK_PING)?.replaceAll('$RUNPOD_POD_ID', workerId) ?? null;
  }
  for (const url of [take, done, stream, ping]) {
    if (url !== null) assertHttpUrl(url.replaceAll('$ID', 'x'));
  }
  const hasTake = take.includes('/job-take/');
  return {
    workerId,
    apiKey,
    jobTakeUrl: take,
    jobTakeBatchUrl: hasTake ? take.replace('/job-take/', '/job-take-batch/') : null,
    jobStopUrl: hasTake ? take.replace('/job-take/', '/job-stop/') : null,
    jobDoneTemplate: done,
    jobStreamTemplate: stream,
    // runpod-python pings only when it has a key and a pod id; without a key every ping is a 401.
    pingUrl: ping && apiKey ? ping : null,
    pingIntervalMs,
  };
}

/**
 * Appends query parameters the way runpod-python does: `template + "&k=v"` when the template
 * already has a `?` (so `job-take/W?` becomes `job-take/W?&k=v`), else starts a query.
 * Parameters whose value is undefined are left out.
 *
 * @example
 * ```ts
 * import { withQuery } from './worker-config.js';
 * withQuery('http://h/v2/ep/job-take/w?', { job_in_progress: '0' }); // 'http://h/v2/ep/job-take/w?&job_in_progress=0'
 * ```
 */
export function withQuery(template: string, params: Record<string, string | undefined>): string {
  let url = template;
  for (const [key, value] of Object.entries(params)) {
    if (value === undefined) continue;
    url += `${url.includes('?') ? '&' : '?'}${encodeURIComponent(key)}=${encodeURIComponent(value)}`;
  }
  return url;
}

/**
 * Fills a job-done / job-stream template with a job id.
 *
 * @example
 * ```ts
 * import { jobUrl } from './worker-config.js';
 * jobUrl('http://h/v2/ep/job-done/w/$ID?', 'j1'); // 'http://h/v2/ep/job-done/w/j1?'
 * ```
 */
export function jobUrl(template: string, jobId: string): string {
  return template.replaceAll('$ID', encodeURIComponent(jobId));
}

function parsePingInterval(raw: string | undefined): number {
  if (raw === undefined || raw.trim() === '') return DEFAULT_PING_INTERVAL_MS;
  const ms = Number(raw);
  if (!Number.isInteger(ms)) throw new WorkerConfigError(`RUNPOD_PING_INTERVAL must be milliseconds, got '${raw}'`);
  return ms;
}

function stripBase(url: string): string {
  return url.replace(/\/+$/, '').replace(/\/v2$/, '');
}

function nonEmpty(value: string | undefined): string | undefined {
  return value === undefined || value.trim() === '' ? undefined : value;
}

function assertHttpUrl(url: string): void {
  let parsed: URL;
  try {
    parsed = new URL(url);
  } catch {
    throw new WorkerConfigError(`not a URL: ${url}`);
  }
  if (parsed.protocol !== 'http:' && parsed.protocol !== 'https:') {
    throw new WorkerConfigError(`not an http(s) URL: ${url}`);
  }
}
