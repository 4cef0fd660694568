import type { IncomingMessage, ServerResponse } from 'node:http';
import { authorize } from '../http/auth.js';
import { queryInteger } from '../http/query.js';
import { sendJsonText } from '../http/respond.js';
import type { EndpointService } from '../jobs/endpoint-service.js';
import type { JobService } from '../jobs/job-service.js';
import { AppError } from '../model/errors.js';
import { isTerminal } from '../model/job-states.js';
import type { JobRecord } from '../model/records.js';
import type { KeyService } from '../security/keys.js';
import type { UsageStore, WebhookAttempt } from '../store/store.js';
import { formatUsd } from '../model/money.js';
import { parseTraceparent } from '../model/trace-context.js';

/** What the job page route uses: the job service's read-only inspection, endpoints, the session's key check. */
export interface JobPageDeps {
  jobs: Pick<JobService, 'inspect'>;
  endpoints: Pick<EndpointService, 'get'>;
  keys: Pick<KeyService, 'authorize'>;
  /** The job's meters: what each run of it cost (docs/api.md, "Usage"). */
  usage: Pick<UsageStore, 'listJobMeters'>;
}

/**
 * Chunks shown by default, the most a call may ask for (`?chunks=`), and the characters after
 * which no further chunk is read (a chunk may be 1 MB: the answer stays a few MB at most).
 */
export const JOB_PAGE_CHUNKS = { fallback: 100, max: 500, maxChars: 1_000_000 };

/**
 * The longest input (JSON text, in characters) the job page answers; a longer one (a /run body
 * may be 10 MB, a /runsync one 20 MB) is left out, and only its length is given.
 */
export const JOB_PAGE_INPUT_MAX_CHARS = 1_000_000;

/**
 * Where a job's webhook delivery stands: `waiting` (the job has not ended), `pending` (an
 * attempt is due at nextAt, or being made), `delivered`, `failed` (every attempt failed, or
 * the outbound policy blocked it), `unrecorded` (ended before attempts were recorded).
 */
export type WebhookOutcome = 'waiting' | 'pending' | 'delivered' | 'failed' | 'unrecorded';

/** One webhook attempt as the job page shows it. */
export interface WebhookAttemptSummary {
  retries: number;
  attempt: number;
  /** When the attempt ended (ISO text). */
  at: string;
  httpStatus: number | null;
  error: string | null;
  /** The receiver answered 2xx. */
  delivered: boolean;
}

/** A job's webhook delivery as the job page shows it (webhookSummary). */
export interface WebhookSummary {
  /** The receiver's origin only. */
  target: string;
  outcome: WebhookOutcome;
  attemptsMade: number;
  /** When the next attempt is due (ISO text); null when none is. */
  nextAt: string | null;
  attempts: WebhookAttemptSummary[];
}

/** The webhook part of the answer: the receiver's origin only (a path or query may hold a token); null without a webhook. */
export function webhookSummary(job: JobRecord, attempts: WebhookAttempt[]): WebhookSummary | null {
  if (job.webhook === null) return null;
  const current = attempts.filter((a) => a.retries === job.retries);
  const last = current[current.length - 1];
  let outcome: WebhookOutcome;
  if (!isTerminal(job.status)) outcome = 'waiting';
  else if (job.webhookNextAt !== null) outcome = 'pending';
  else if (last === undefined) outcome = 'unrecorded';
  else outcome = isDelivered(last) ? 'delivered' : 'failed';
  return {
    target: originOf(job.webhook),
    outcome,
    attemptsMade: job.webhookAttempts,
    nextAt: job.webhookNextAt === null ? null : new Date(job.webhookNextAt).toISOString(),
    attempts: attempts.map((a) => ({
      retries: a.retries,
      attempt: a.attempt,
      at: new Date(a.at).toISOString(),
      httpStatus: a.httpStatus,
      error: a.error,
      delivered: isDelivered(a),
    })),
  };
}

const isDelivered = (a: WebhookAttempt): boolean => a.httpStatus !== null && a.httpStatus >= 200 && a.httpStatus < 300;

function originOf(url: string): string {
  try {
    return new URL(url).origin;
  } catch {
    return '(not a URL)';
  }
}

const isoOrNull = (ms: number | null): string | null => (ms === null ? null : new Date(ms).toISOString());

/** When the job was created, last queued (a retry queues it again), started on its worker and finished (ISO text; null: not yet). */
function timesOf(job: JobRecord): { createdAt: string; queuedAt: string; startedAt: string | null; finishedAt: string | null } {
  return { createdAt: new Date(job.createdAt).toISOString(), queuedAt: new Date(job.queuedAt).toISOString(), startedAt: isoOrNull(job.startedAt), finishedAt: isoOrNull(job.finishedAt) };
}

/**
 * The job's trace (docs/observability.md), when it has one: its trace id, to look it up in the
 * tracing backend, and whether it was sampled (exported); `""` when it has none, left out.
 */
function traceOf(job: JobRecord): string {
  const context = parseTraceparent(job.traceparent ?? undefined);
  return context ? `"trace":{"traceId":"${context.traceId}","sampled":${(context.flags & 1) === 1}},` : '';
}

/** What the job's runs cost: each metered run (status, execution seconds, USD) and the sum; no run: costUsd "0". */
async function costOf(deps: JobPageDeps, jobId: string): Promise<{ costUsd: string; runs: { run: number; status: string; executionSeconds: number; costUsd: string }[] }> {
  const meters = await deps.usage.listJobMeters(jobId);
  const runs = meters.map((m) => ({ run: m.run, status: m.status, executionSeconds: m.executionMs / 1000, costUsd: formatUsd(m.costUnits) }));
  return { costUsd: formatUsd(meters.reduce((sum, m) => sum + m.costUnits, 0n)), runs };
}

/**
 * `GET /console/api/jobs/{endpoint}/{job}?chunks=N` (docs/console.md, "Job page"): what the
 * job page shows beside `/status`: the job's input, also once it ended (`/status` shows it only
 * while the job is live, as RunPod's does; the store keeps it for retry), as `input` when at most
 * JOB_PAGE_INPUT_MAX_CHARS long, with `inputChars`, its length; the job's buffered stream chunks, read without draining them
 * (a client reading the stream still gets every one), at most N (1-500, default 100) and
 * about 1 MB, with `total`, how many are buffered; `times` (createdAt, queuedAt, startedAt,
 * finishedAt) and `workerId`, the worker that holds or last held it; and its webhook delivery: the receiver's origin, the outcome,
 * the next attempt's time and the recorded attempts (status or error class, never a body);
 * `cost`: what each metered run of the job cost and the sum (`costUsd`); and `trace`
 * (`traceId`, `sampled`) for a job submitted while tracing was on.
 */
export async function sendJobPage(deps: JobPageDeps, req: IncomingMessage, res: ServerResponse, endpointId: string, jobId: string, query: URLSearchParams): Promise<void> {
  const limit = queryInteger('chunks', query.get('chunks'), JOB_PAGE_CHUNKS.fallback, 1, JOB_PAGE_CHUNKS.max);
  await authorize(deps.keys, req, 'read', endpointId);
  if (!(await deps.endpoints.get(endpointId))) throw new AppError('ENDPOINT_NOT_FOUND', `Endpoint ${endpointId} not found`);
  const found = await deps.jobs.inspect(endpointId, jobId, { limit, maxChars: JOB_PAGE_CHUNKS.maxChars });
  if (!found) throw new AppError('JOB_NOT_FOUND', `Job ${jobId} not found`, { id: jobId });
  const { job, chunks, totalChunks, webhookAttempts } = found;
  // Chunks are JSON text as the worker sent them: concatenated, never parsed here.
  // The input too is JSON text in the store (written at submit): concatenated, never parsed here.
  const input = job.inputJson.length <= JOB_PAGE_INPUT_MAX_CHARS ? `"input":${job.inputJson},` : '';
  const text =
    `{"id":${JSON.stringify(job.id)},"status":"${job.status}",${input}"inputChars":${job.inputJson.length},"times":${JSON.stringify(timesOf(job))},"workerId":${JSON.stringify(job.workerId)},${traceOf(job)}` +
    `"stream":{"chunks":[${chunks.join(',')}],"total":${totalChunks}},` +
    `"webhook":${JSON.stringify(webhookSummary(job, webhookAttempts))},"cost":${JSON.stringify(await costOf(deps, job.id))}}`;
  sendJsonText(res, 200, text);
}
