import { ROOT_CONTEXT, SpanKind, SpanStatusCode, trace, type Attributes, type Context, type Span, type Tracer } from '@opentelemetry/api';
import { ATTR_ERROR_TYPE, ATTR_HTTP_REQUEST_METHOD, ATTR_HTTP_RESPONSE_STATUS_CODE } from '@opentelemetry/semantic-conventions';
import type { JobObserver, SubmitSpan, SubmitTracer } from '../jobs/job-observer.js';
import type { JobRecord, PurgedJob } from '../model/records.js';
import { formatTraceparent, parseTraceparent, runNumber, runSpanId, type TraceContext } from '../model/trace-context.js';
import type { PresetSpanIds } from './span-ids.js';

/** Runs begun on this gateway whose end is not reported yet, remembered for a requeue's run span; beyond this the oldest are forgotten. */
const MAX_OPEN_RUNS = 50_000;
/** A job's error as a span's status message: its start, at most this many characters. */
const MAX_STATUS_MESSAGE = 256;

/** What this gateway remembers of a job between its events: when its current wait began, and the run it is in. */
interface OpenJob {
  /** When the job's current wait in the queue began (its submit, a retry or a requeue). */
  waitingSince: number;
  run?: { number: number; workerId: string; startedAt: number };
}

/**
 * A job's trace (docs/observability.md): its spans, made from the job's committed
 * transitions. Every span after the submit is a child of the job's stored `traceparent` and
 * takes its times from the job record, so any gateway can write it: `job.queued` (the wait
 * before each run), `job.run` (one per hand-out, with the worker and attempt; its span id is
 * derived from the job as model/trace-context.ts says, so it is the parent the worker was
 * handed), `job.result` (the job's end) and `job.webhook` (each delivery attempt).
 */
export class JobSpans implements JobObserver, SubmitTracer {
  private readonly open = new Map<string, OpenJob>();

  constructor(
    private readonly tracer: Tracer,
    private readonly ids: PresetSpanIds,
    private readonly now: () => number,
  ) {}

  begin(job: JobRecord, parent: string | undefined): SubmitSpan {
    const client = parseTraceparent(parent);
    const context = client ? contextOf(client) : ROOT_CONTEXT;
    const span = this.tracer.startSpan('job.submit', { kind: SpanKind.PRODUCER, startTime: job.createdAt, attributes: { ...jobAttributes(job), 'gantry.job.sync': job.sync } }, context);
    const own = span.spanContext();
    job.traceparent = formatTraceparent({ traceId: own.traceId, spanId: own.spanId, flags: own.traceFlags });
    return {
      end: (outcome) => {
        if (outcome === 'replayed') span.setAttribute('gantry.job.replayed', true);
        else if (outcome !== 'stored') failed(span, outcome.error);
        span.end(this.now());
      },
    };
  }

  submitted(): void {
    // The submit span ended with the write (begin); the first wait counts from the record's queuedAt.
  }

  started(jobs: readonly JobRecord[]): void {
    for (const job of jobs) {
      const context = traced(job);
      if (!context || job.startedAt === null || job.workerId === null) continue;
      const waitingSince = this.open.get(job.id)?.waitingSince ?? job.queuedAt;
      const run = runNumber(job);
      this.tracer.startSpan('job.queued', { startTime: waitingSince, attributes: { ...jobAttributes(job), 'gantry.job.run': run } }, context).end(job.startedAt);
      this.remember(job.id, { waitingSince, run: { number: run, workerId: job.workerId, startedAt: job.startedAt } });
    }
  }

  ended(job: JobRecord): void {
    const context = traced(job);
    const open = this.open.get(job.id);
    this.open.delete(job.id);
    if (!context) return;
    const end = job.finishedAt ?? this.now();
    if (job.startedAt !== null && job.workerId !== null) {
      this.runSpan(job, context, { number: runNumber(job), workerId: job.workerId, startedAt: job.startedAt }, end, job.status.toLowerCase());
    } else {
      // Ended while waiting (cancelled, purged, its queue ttl passed): the wait is its last span.
      const since = open?.waitingSince ?? job.queuedAt;
      this.tracer.startSpan('job.queued', { startTime: since, attributes: { ...jobAttributes(job), 'gantry.job.run': runNumber(job) + 1, 'gantry.job.outcome': job.status.toLowerCase() } }, context).end(Math.max(end, since));
    }
    const result = this.tracer.startSpan('job.result', { startTime: end, attributes: { ...jobAttributes(job), 'gantry.job.status': job.status, 'gantry.job.attempts': job.attempts, 'gantry.job.retries': job.retries } }, context);
    if (job.status === 'FAILED' || job.status === 'TIMED_OUT') result.setStatus({ code: SpanStatusCode.ERROR, message: (job.error ?? job.status).slice(0, MAX_STATUS_MESSAGE) });
    result.end(Math.max(end, this.now()));
  }

  purged(endpointId: string, jobs: readonly PurgedJob[]): void {
    const end = this.now();
    for (const job of jobs) {
      const context = traced(job);
      const open = this.open.get(job.id);
      this.open.delete(job.id);
      if (!context) continue;
      // Purged while waiting: like a cancel in the queue, its last wait, then its result.
      const attributes = { 'gantry.job.id': job.id, 'gantry.endpoint.id': endpointId };
      const since = open?.waitingSince ?? job.queuedAt;
      this.tracer.startSpan('job.queued', { startTime: since, attributes: { ...attributes, 'gantry.job.run': runNumber(job) + 1, 'gantry.job.outcome': 'cancelled', 'gantry.job.purged': true } }, context).end(Math.max(end, since));
      this.tracer.startSpan('job.result', { startTime: end, attributes: { ...attributes, 'gantry.job.status': 'CANCELLED', 'gantry.job.attempts': job.attempts, 'gantry.job.retries': job.retries, 'gantry.job.purged': true } }, context).end(end);
    }
  }

  preempted(jobs: readonly JobRecord[]): void {
    const t = this.now();
    for (const job of jobs) {
      const context = traced(job);
      if (!context) continue;
      const open = this.open.get(job.id);
      // A preemption takes its hand-out back from `attempts` and adds one to `preemptions`: the run
      // number is unchanged (the preempted run's), and the run was attempt `attempts + 1`, which
      // the next run repeats. Not an error: the job did nothing wrong and runs again.
      const run = open?.run ?? { number: runNumber(job), workerId: '', startedAt: t };
      this.runSpan(job, context, run, t, 'preempted', { attempt: job.attempts + 1, startUnknown: open?.run === undefined });
      this.remember(job.id, { waitingSince: t });
    }
  }

  requeued(jobs: readonly JobRecord[], why: 'retry' | 'worker-lost'): void {
    const t = this.now();
    for (const job of jobs) {
      const context = traced(job);
      if (!context) continue;
      const open = this.open.get(job.id);
      if (why === 'worker-lost') {
        // The record no longer names the lost run's worker or start: this gateway remembers them when it handed the job out.
        const run = open?.run ?? { number: runNumber(job), workerId: '', startedAt: t };
        this.runSpan(job, context, run, t, 'worker-lost', { startUnknown: open?.run === undefined });
      }
      this.remember(job.id, { waitingSince: why === 'retry' ? job.queuedAt : t });
    }
  }

  /**
   * A fetch for the webhook sender that puts each delivery in its job's trace: a `job.webhook`
   * span, child of the job's context the sender passes in the `traceparent` header, whose own
   * context then replaces that header, so the receiver's spans join the trace under it.
   */
  wrapFetch(inner: typeof fetch): typeof fetch {
    return async (input, init) => {
      const headers = init?.headers as Record<string, string> | undefined;
      const parent = parseTraceparent(headers?.traceparent);
      if (!parent || !init || !headers) return inner(input, init);
      const webhookId = headers['webhook-id'] ?? '';
      const attributes: Attributes = { [ATTR_HTTP_REQUEST_METHOD]: init.method ?? 'POST', 'gantry.job.id': webhookId.slice(0, webhookId.lastIndexOf('.')), 'gantry.webhook.id': webhookId };
      const span = this.tracer.startSpan('job.webhook', { kind: SpanKind.CLIENT, startTime: this.now(), attributes }, contextOf(parent));
      const own = span.spanContext();
      const traced: RequestInit = { ...init, headers: { ...headers, traceparent: formatTraceparent({ traceId: own.traceId, spanId: own.spanId, flags: own.traceFlags }) } };
      try {
        const response = await inner(input, traced);
        span.setAttribute(ATTR_HTTP_RESPONSE_STATUS_CODE, response.status);
        if (!response.ok) span.setStatus({ code: SpanStatusCode.ERROR, message: `HTTP ${response.status}` });
        return response;
      } catch (err) {
        failed(span, err);
        throw err;
      } finally {
        span.end(this.now());
      }
    };
  }

  /** One run's span, with the id derived from the job and run number (the parent its worker was handed). */
  private runSpan(job: JobRecord, context: Context, run: NonNullable<OpenJob['run']>, end: number, outcome: string, options: { attempt?: number; startUnknown?: boolean } = {}): void {
    const attributes: Attributes = { ...jobAttributes(job), 'gantry.worker.id': run.workerId, 'gantry.job.run': run.number, 'gantry.job.attempt': options.attempt ?? job.attempts, 'gantry.job.outcome': outcome };
    if (options.startUnknown === true) attributes['gantry.job.run_start_unknown'] = true;
    this.ids.next = runSpanId(job.id, job.retries, run.number);
    const span = this.tracer.startSpan('job.run', { kind: SpanKind.CONSUMER, startTime: run.startedAt, attributes }, context);
    this.ids.next = undefined;
    if (outcome === 'failed' || outcome === 'timed_out' || outcome === 'worker-lost') span.setStatus({ code: SpanStatusCode.ERROR, message: outcome === 'worker-lost' ? 'worker lost: the job went back to the queue' : (job.error ?? outcome).slice(0, MAX_STATUS_MESSAGE) });
    span.end(Math.max(end, run.startedAt));
  }

  /** Remembers a job's wait and run, bounded: past MAX_OPEN_RUNS the oldest entry is dropped (its next span then starts from the record's times). */
  private remember(jobId: string, open: OpenJob): void {
    this.open.delete(jobId);
    if (this.open.size >= MAX_OPEN_RUNS) {
      const oldest = this.open.keys().next().value;
      if (oldest !== undefined) this.open.delete(oldest);
    }
    this.open.set(jobId, open);
  }
}

/** The job's stored context as the parent of its later spans; undefined for a job without one. */
function traced(job: Pick<JobRecord, 'traceparent'>): Context | undefined {
  if (job.traceparent === null) return undefined;
  const context = parseTraceparent(job.traceparent);
  return context ? contextOf(context) : undefined;
}

function contextOf(parent: TraceContext): Context {
  return trace.setSpanContext(ROOT_CONTEXT, { traceId: parent.traceId, spanId: parent.spanId, traceFlags: parent.flags, isRemote: true });
}

function jobAttributes(job: JobRecord): Attributes {
  return { 'gantry.job.id': job.id, 'gantry.endpoint.id': job.endpointId };
}

/** Marks a span failed with the error's class (never its message, which may quote a URL). */
function failed(span: Span, err: unknown): void {
  const name = err instanceof Error ? err.name : 'Error';
  span.setAttribute(ATTR_ERROR_TYPE, (err as { code?: unknown } | null)?.code !== undefined ? String((err as { code: unknown }).code) : name);
  span.setStatus({ code: SpanStatusCode.ERROR });
}
