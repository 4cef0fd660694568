import { randomUUID } from 'node:crypto';
import type { Tracer } from '@opentelemetry/api';
import { setGlobalErrorHandler } from '@opentelemetry/core';
import { OTLPTraceExporter as JsonExporter } from '@opentelemetry/exporter-trace-otlp-http';
import { OTLPTraceExporter as ProtobufExporter } from '@opentelemetry/exporter-trace-otlp-proto';
import { resourceFromAttributes } from '@opentelemetry/resources';
import {
  AlwaysOffSampler,
  AlwaysOnSampler,
  BasicTracerProvider,
  BatchSpanProcessor,
  ParentBasedSampler,
  TraceIdRatioBasedSampler,
  type Sampler,
  type SpanExporter,
} from '@opentelemetry/sdk-trace-base';
import { ATTR_SERVICE_NAME, ATTR_SERVICE_VERSION } from '@opentelemetry/semantic-conventions';
import type { Logger } from 'pino';
import type { JobObserver, SubmitTracer } from '../jobs/job-observer.js';
import { packageVersion } from '../util/package-version.js';
import { JobSpans } from './job-spans.js';
import { PresetSpanIds } from './span-ids.js';
import type { TracingConfig } from './tracing-config.js';

/** The tracing feature of one gateway: what the core reports to, and the exporter to flush at shutdown. */
export interface Tracing {
  /** Told of every committed job transition: the queued, run and result spans. */
  readonly jobs: JobObserver;
  /** Makes each new job's submit span and trace context before the job is written. */
  readonly submits: SubmitTracer;
  /** The webhook sender's fetch, a span a delivery. */
  wrapFetch(inner: typeof fetch): typeof fetch;
  /** Exports the spans still waiting (within `timeoutMs`) and stops the exporter. */
  shutdown(timeoutMs?: number): Promise<void>;
}

/** A failed export is logged at most this often: a collector that is down must not fill the log. */
const EXPORT_ERROR_LOG_EVERY_MS = 60_000;

/**
 * The tracing feature (docs/observability.md): OpenTelemetry's SDK with the OTLP/HTTP exporter,
 * configured from the OTEL_* variables (tracing-config.ts). Spans go through a batch
 * processor, bounded by OTEL_BSP_MAX_QUEUE_SIZE (more are dropped): nothing on the request
 * path waits for the collector. Only called when the variables turn tracing on; otherwise
 * nothing of it is made and the core runs unwrapped.
 *
 * @example const tracing = createTracing(loadTracingConfig(process.env)!, { now: Date.now, logger });
 */
export function createTracing(config: TracingConfig, deps: { now(): number; logger: Logger }): Tracing {
  const ids = new PresetSpanIds();
  const processor = new BatchSpanProcessor(exporterOf(config), config.batch);
  const provider = new BasicTracerProvider({
    // service.instance.id tells the gateways apart: a job's spans come from whichever gateway saw each event.
    resource: resourceFromAttributes({ 'service.instance.id': randomUUID(), ...config.resourceAttributes, [ATTR_SERVICE_NAME]: config.serviceName, [ATTR_SERVICE_VERSION]: packageVersion() }),
    sampler: samplerOf(config),
    idGenerator: ids,
    spanProcessors: [processor],
  });
  reportExportErrors(deps.logger, deps.now);
  const tracer: Tracer = provider.getTracer('gantry', packageVersion());
  const spans = new JobSpans(tracer, ids, deps.now);
  deps.logger.info({ url: config.url, protocol: config.protocol, sampler: config.sampler, serviceName: config.serviceName }, 'tracing on: job spans exported over OTLP/HTTP');
  return {
    jobs: spans,
    submits: spans,
    wrapFetch: (inner) => spans.wrapFetch(inner),
    async shutdown(timeoutMs = 5_000) {
      let timer: NodeJS.Timeout | undefined;
      const late = new Promise<void>((resolve) => {
        timer = setTimeout(resolve, timeoutMs);
        timer.unref();
      });
      await Promise.race([provider.shutdown().catch((err: unknown) => deps.logger.warn({ err }, 'exporting the last spans failed')), late]);
      clearTimeout(timer);
    },
  };
}

/** The OTLP/HTTP exporter of the configured protocol. Headers are passed on, never logged. */
function exporterOf(config: TracingConfig): SpanExporter {
  const options = { url: config.url, headers: config.headers, timeoutMillis: config.timeoutMs, compression: config.compression };
  return config.protocol === 'http/json'
    ? new JsonExporter(options as ConstructorParameters<typeof JsonExporter>[0])
    : new ProtobufExporter(options as ConstructorParameters<typeof ProtobufExporter>[0]);
}

/** OTEL_TRACES_SAMPLER and its argument, as the specification defines them. */
function samplerOf(config: TracingConfig): Sampler {
  const ratio = new TraceIdRatioBasedSampler(config.samplerRatio);
  switch (config.sampler) {
    case 'always_on':
      return new AlwaysOnSampler();
    case 'always_off':
      return new AlwaysOffSampler();
    case 'traceidratio':
      return ratio;
    case 'parentbased_always_off':
      return new ParentBasedSampler({ root: new AlwaysOffSampler() });
    case 'parentbased_traceidratio':
      return new ParentBasedSampler({ root: ratio });
    default:
      return new ParentBasedSampler({ root: new AlwaysOnSampler() });
  }
}

/** The SDK's errors (a failed export, mostly) to the gateway's log, one line a minute at most. */
function reportExportErrors(logger: Logger, now: () => number): void {
  let lastAt = -Infinity;
  let dropped = 0;
  setGlobalErrorHandler((err) => {
    const t = now();
    if (t - lastAt < EXPORT_ERROR_LOG_EVERY_MS) {
      dropped++;
      return;
    }
    lastAt = t;
    const detail = err instanceof Error ? err.message : String(err);
    logger.warn({ detail: detail.slice(0, 300), similarSinceLast: dropped }, 'tracing: exporting spans failed (OTEL_EXPORTER_OTLP_*); spans are dropped while the collector is unreachable');
    dropped = 0;
  });
}
