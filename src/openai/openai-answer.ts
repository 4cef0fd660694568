import type { ServerResponse } from 'node:http';
import { sendJsonText } from '../http/respond.js';
import type { JobService } from '../jobs/job-service.js';
import { AppError } from '../model/errors.js';
import { isTerminal } from '../model/job-states.js';
import type { JobRecord } from '../model/records.js';
import { GATEWAY_CLOSING, jobFailure, NO_RETRY, workerError } from './openai-errors.js';

/** Past the job's own limits (ttl in the queue, then its execution timeout) the reaper has ended it; this is the margin. */
const REAPER_MARGIN_MS = 60_000;

/**
 * The answer without `stream`: waits like /runsync, but for as long as the client stays and
 * the job may live, then sends the worker's output as the body (its one element when the
 * output is a one-element list, as a streaming worker with return_aggregate_stream gives it).
 * `signal` aborted with GATEWAY_CLOSING (shutdown) before the job ended: throws it. Resolves
 * with the job as last read (still live when the client left).
 *
 * @example const job = await sendOpenAiJson(jobs, res, 'llm', submitted, signal);
 */
export async function sendOpenAiJson(
  jobs: Pick<JobService, 'waitTerminal'>,
  res: ServerResponse,
  endpointId: string,
  job: JobRecord,
  signal: AbortSignal,
): Promise<JobRecord> {
  const limit = job.ttlMs + job.executionTimeoutMs + REAPER_MARGIN_MS;
  const latest = (await jobs.waitTerminal(endpointId, job.id, limit, signal)) ?? job;
  if (signal.aborted && !isTerminal(latest.status)) {
    if (signal.reason === GATEWAY_CLOSING) throw GATEWAY_CLOSING;
    return latest;
  }
  if (!isTerminal(latest.status)) throw new AppError('JOB_NOT_FINISHED', `Job ${job.id} did not finish within its time limits`, undefined, NO_RETRY);
  if (latest.status !== 'COMPLETED') throw jobFailure(latest);
  sendJsonText(res, 200, answerText(latest.outputJson));
  return latest;
}

/**
 * The body for a completed job's output; throws the worker's error when the output is one,
 * and 502 when there is no output to send.
 *
 * @example answerText('[{"object":"chat.completion"}]') === '{"object":"chat.completion"}'
 */
export function answerText(outputJson: string | null): string {
  const output: unknown = outputJson === null ? null : JSON.parse(outputJson);
  const value = Array.isArray(output) && output.length === 1 ? (output[0] as unknown) : output;
  const error = workerError(value);
  if (error) throw error;
  if (value === null || (Array.isArray(value) && value.length === 0)) {
    throw new AppError('EMPTY_OUTPUT', 'The worker finished without output (a streaming worker needs return_aggregate_stream to answer requests without "stream": true)', undefined, NO_RETRY);
  }
  return value === output && outputJson !== null ? outputJson : JSON.stringify(value);
}
