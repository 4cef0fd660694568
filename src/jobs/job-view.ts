import type { JobRecord } from '../model/records.js';

/**
 * The job object of status/runsync/webhooks (docs/api.md), as JSON text. Built by
 * concatenation because input and output are already JSON text in the store: the hot path
 * never parses and re-serialises a payload.
 *
 * Fields: id, status, delayTime (ms from queued to taken), executionTime (ms from taken to
 * end), workerId once taken, retries, input while queued or running, output when completed
 * (or the latest progress update while running), error when failed or timed out.
 */
export function renderJob(job: JobRecord): string {
  let text = `{"id":${JSON.stringify(job.id)},"status":"${job.status}"`;
  if (job.startedAt !== null) {
    text += `,"delayTime":${Math.max(0, job.startedAt - job.queuedAt)}`;
    if (job.finishedAt !== null) text += `,"executionTime":${Math.max(0, job.finishedAt - job.startedAt)}`;
  }
  if (job.workerId !== null) text += `,"workerId":${JSON.stringify(job.workerId)}`;
  text += `,"retries":${job.retries}`;
  const live = job.status === 'IN_QUEUE' || job.status === 'IN_PROGRESS';
  if (live) text += `,"input":${job.inputJson}`;
  if (job.outputJson !== null && (live || job.status === 'COMPLETED')) text += `,"output":${job.outputJson}`;
  if (job.error !== null) text += `,"error":${JSON.stringify(job.error)}`;
  return text + '}';
}

/** `{id, status}`: the answer of /run, and of runsync when the job is not finished in time. */
export function renderJobRef(job: Pick<JobRecord, 'id' | 'status'>): string {
  return `{"id":${JSON.stringify(job.id)},"status":"${job.status}"}`;
}

/** What job-take hands a worker: `{id, input, webhook?, policy?, s3Config?}` (s3Config decrypted by the caller). */
export function renderTakenJob(job: JobRecord, s3ConfigJson: string | null): string {
  let text = `{"id":${JSON.stringify(job.id)},"input":${job.inputJson}`;
  if (job.webhook !== null) text += `,"webhook":${JSON.stringify(job.webhook)}`;
  text += `,"policy":{"executionTimeout":${job.executionTimeoutMs},"lowPriority":${job.lowPriority},"ttl":${job.ttlMs}}`;
  if (s3ConfigJson !== null) text += `,"s3Config":${s3ConfigJson}`;
  return text + '}';
}
