import { createHash } from 'node:crypto';
import type { JobRecord } from './records.js';

/**
 * W3C trace context (https://www.w3.org/TR/trace-context/) as far as jobs need it: a job's
 * stored `traceparent` names its submit span; each run of the job has a span of its own whose
 * id is derived from the job, its retry count and its run number, so that every gateway (the
 * one that hands the job out, the one that takes the result) names the same run span without
 * storing it, and a worker's own spans nest under the run they belong to (docs/observability.md).
 */

/** A parsed `traceparent`: 32 and 16 lower-case hex digits and the flags byte (bit 0: sampled). */
export interface TraceContext {
  traceId: string;
  spanId: string;
  flags: number;
}

const TRACEPARENT = /^([0-9a-f]{2})-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})(-.*)?$/;
const ZERO_TRACE = '0'.repeat(32);
const ZERO_SPAN = '0'.repeat(16);

/**
 * The context of a `traceparent` header, or undefined for an invalid one (which a receiver
 * ignores, starting a new trace): version ff, all-zero ids, or extra fields on version 00.
 *
 * @example parseTraceparent('00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01') // { traceId: '4bf9…', spanId: '00f0…', flags: 1 }
 */
export function parseTraceparent(header: string | undefined): TraceContext | undefined {
  if (header === undefined || header.length < 55 || header.length > 512) return undefined;
  const m = TRACEPARENT.exec(header.trim());
  if (!m) return undefined;
  const [, version, traceId, spanId, flags, rest] = m as unknown as [string, string, string, string, string, string | undefined];
  if (version === 'ff' || (version === '00' && rest !== undefined)) return undefined;
  if (traceId === ZERO_TRACE || spanId === ZERO_SPAN) return undefined;
  return { traceId, spanId, flags: parseInt(flags, 16) };
}

/**
 * A request's `traceparent` header as sent (one value; a repeated header is none), for the
 * submit to continue while tracing is on: parsed there (parseTraceparent), not here.
 *
 * @example traceparentHeader(req.headers) // '00-…-…-01' or undefined
 */
export function traceparentHeader(headers: Readonly<Record<string, string | string[] | undefined>>): string | undefined {
  const header = headers.traceparent;
  return typeof header === 'string' ? header : undefined;
}

/** @example formatTraceparent({ traceId, spanId, flags: 1 }) // '00-…-…-01' */
export function formatTraceparent(context: TraceContext): string {
  return `00-${context.traceId}-${context.spanId}-${(context.flags & 0xff).toString(16).padStart(2, '0')}`;
}

/**
 * The span id of one run of a job: the first 8 bytes of SHA-256 over the job id, its retry
 * count and its run number (hand-outs plus preemptions since the submit or last retry).
 *
 * @example runSpanId('0190…', 0, 2) // 16 hex digits, the same on every gateway
 */
export function runSpanId(jobId: string, retries: number, run: number): string {
  const id = createHash('sha256').update(`${jobId}/${retries}/${run}`).digest('hex').slice(0, 16);
  return id === ZERO_SPAN ? '0000000000000001' : id;
}

/** A job's current run number: hand-outs plus preemptions since its submit or last /retry (stream-reads' runOf). */
export function runNumber(job: Pick<JobRecord, 'attempts' | 'preemptions'>): number {
  return job.attempts + job.preemptions;
}

/**
 * The `traceparent` handed to the worker with a taken job: its trace, the current run's span,
 * the job's sampling flags. undefined when the job has no trace context.
 *
 * @example runTraceparent(job) // '00-<job's trace id>-<run span id>-01'
 */
export function runTraceparent(job: Pick<JobRecord, 'id' | 'traceparent' | 'retries' | 'attempts' | 'preemptions'>): string | undefined {
  const context = parseTraceparent(job.traceparent ?? undefined);
  if (!context) return undefined;
  return formatTraceparent({ traceId: context.traceId, spanId: runSpanId(job.id, job.retries, runNumber(job)), flags: context.flags });
}
