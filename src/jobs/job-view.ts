import { delayTimeOf, executionTimeOf } from '../model/job-times.js';
import type { JobRecord, JobWithInput } from '../model/records.js';
import { runTraceparent } from '../model/trace-context.js';

/**
 * The job object of status/runsync/webhooks (docs/api.md), as JSON text. Built by
 * concatenation because input and output are already JSON text in the store: the hot path
 * never parses and re-serialises a payload.
 *
 * Fields: id, status, delayTime (ms from entering the queue, by submit or /retry, to the
 * start of the current or last run: model/job-times.ts), executionTime (ms that run took, once
 * ended), workerId once taken, retries (/retry calls), attempts (hand-outs to workers since the
 * submit or the last /retry), preemptions (once a job was taken back from a worker stopped for
 * a higher-priority endpoint: not counted in attempts), input while queued or running, output when completed (or the
 * latest progress update while running), error when failed or timed out.
 *
 * The input is the caller's to read (store.getJobInput; JobService.status does for a live job):
 * job reads leave it out, so a finished job, the only kind runsync, SSE and webhooks render,
 * never carries its input through them.
 */
export function renderJob(job: ShownJob): string {
  let text = `{"id":${JSON.stringify(job.id)},"status":"${job.status}"`;
  const delay = delayTimeOf(job);
  if (delay !== null) {
    text += `,"delayTime":${delay}`;
    const execution = executionTimeOf(job);
    if (execution !== null) text += `,"executionTime":${execution}`;
  }
  if (job.workerId !== null) text += `,"workerId":${JSON.stringify(job.workerId)}`;
  text += `,"retries":${job.retries},"attempts":${job.attempts}`;
  if (job.preemptions > 0) text += `,"preemptions":${job.preemptions}`;
  const live = job.status === 'IN_QUEUE' || job.status === 'IN_PROGRESS';
  if (live && job.inputJson !== undefined) text += `,"input":${job.inputJson}`;
  if (job.outputJson !== null && (live || job.status === 'COMPLETED')) text += `,"output":${job.outputJson}`;
  if (job.error !== null) text += `,"error":${JSON.stringify(job.error)}`;
  return text + '}';
}

/** A job as renderJob shows it: with its input while live, where the caller read it. */
export type ShownJob = JobRecord & { inputJson?: string | undefined };

/** `{id, status}`: the answer of /run, and of runsync when the job is not finished in time. */
export function renderJobRef(job: Pick<JobRecord, 'id' | 'status'>): string {
  return `{"id":${JSON.stringify(job.id)},"status":"${job.status}"}`;
}

/**
 * What job-take hands a worker: `{id, input, webhook?, policy?, s3Config?, traceparent?}`
 * (s3Config and the webhook URL decrypted by the caller). `traceparent` only for a job with a
 * trace context: the W3C context of this run's span, for the worker's own spans
 * (model/trace-context.ts, docs/worker-protocol.md).
 */
export function renderTakenJob(job: JobWithInput, s3ConfigJson: string | null, webhook: string | null): JsonParts {
  if (job.inputUtf8 !== undefined) return [`{"id":${JSON.stringify(job.id)},"input":`, job.inputUtf8, renderTakenRest(job, s3ConfigJson, webhook)];
  return `{"id":${JSON.stringify(job.id)},"input":${job.inputJson}${renderTakenRest(job, s3ConfigJson, webhook)}`;
}

/**
 * JSON text, whole or in parts to be written one after the other: a large input the store
 * holds as UTF-8 bytes goes out as those bytes, never made a string and encoded again.
 */
export type JsonParts = string | readonly (string | Buffer)[];

/** What follows the input in a job-take answer, to its closing brace. */
function renderTakenRest(job: JobWithInput, s3ConfigJson: string | null, webhook: string | null): string {
  let text = '';
  if (webhook !== null) text += `,"webhook":${JSON.stringify(webhook)}`;
  text += `,"policy":{"executionTimeout":${job.executionTimeoutMs},"lowPriority":${job.lowPriority},"ttl":${job.ttlMs}}`;
  if (s3ConfigJson !== null) text += `,"s3Config":${s3ConfigJson}`;
  if (job.traceparent !== null) {
    const traceparent = runTraceparent(job);
    if (traceparent !== undefined) text += `,"traceparent":"${traceparent}"`;
  }
  return text + '}';
}
