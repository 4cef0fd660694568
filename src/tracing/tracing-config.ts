/**
 * The tracing settings (docs/observability.md): the standard OpenTelemetry variables, read
 * from the gateway's environment. Tracing is off unless they ask for it: an OTLP endpoint
 * (`OTEL_EXPORTER_OTLP_TRACES_ENDPOINT` or `OTEL_EXPORTER_OTLP_ENDPOINT`) or
 * `OTEL_TRACES_EXPORTER=otlp`; `OTEL_SDK_DISABLED=true` or `OTEL_TRACES_EXPORTER=none` turn it
 * off whatever else is set. A bad value fails the start, naming the variable (never echoing
 * a header, which may hold a token).
 */

/** OTLP over HTTP, as protobuf (the default of the specification) or as JSON. */
export type OtlpProtocol = 'http/protobuf' | 'http/json';

/** The samplers of OTEL_TRACES_SAMPLER. */
export type SamplerName = 'always_on' | 'always_off' | 'traceidratio' | 'parentbased_always_on' | 'parentbased_always_off' | 'parentbased_traceidratio';

const SAMPLERS: readonly SamplerName[] = ['always_on', 'always_off', 'traceidratio', 'parentbased_always_on', 'parentbased_always_off', 'parentbased_traceidratio'];

/** What the tracing feature is made from, once it is on. */
export interface TracingConfig {
  /** Where spans are POSTed: the traces endpoint as given, or the OTLP endpoint + `/v1/traces`. */
  url: string;
  protocol: OtlpProtocol;
  /** Sent with every export (an API key of a hosted backend, say); never logged. */
  headers: Record<string, string>;
  timeoutMs: number;
  compression: 'gzip' | 'none';
  /** OTEL_SERVICE_NAME, else `service.name` of OTEL_RESOURCE_ATTRIBUTES, else `gantry`. */
  serviceName: string;
  /** OTEL_RESOURCE_ATTRIBUTES. */
  resourceAttributes: Record<string, string>;
  sampler: SamplerName;
  /** OTEL_TRACES_SAMPLER_ARG for the ratio samplers, 0 to 1 (default 1). */
  samplerRatio: number;
  /** The batch span processor (OTEL_BSP_*): the spans waiting are bounded by maxQueueSize, more are dropped. */
  batch: { scheduledDelayMillis: number; maxQueueSize: number; maxExportBatchSize: number; exportTimeoutMillis: number };
}

/** The OTLP/HTTP port and path of the specification: where `OTEL_TRACES_EXPORTER=otlp` alone sends. */
const DEFAULT_URL = 'http://localhost:4318/v1/traces';

/**
 * Reads the OTEL_* variables; undefined when tracing is off. Throws naming the variable on a
 * bad value.
 *
 * @example loadTracingConfig({ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://collector:4318' })?.url // 'http://collector:4318/v1/traces'
 */
export function loadTracingConfig(env: NodeJS.ProcessEnv): TracingConfig | undefined {
  const get = (name: string): string | undefined => {
    const value = env[name]?.trim();
    return value === undefined || value === '' ? undefined : value;
  };
  if (get('OTEL_SDK_DISABLED')?.toLowerCase() === 'true') return undefined;
  const exporter = get('OTEL_TRACES_EXPORTER')?.toLowerCase();
  if (exporter !== undefined && exporter !== 'otlp' && exporter !== 'none') {
    throw new Error(`Invalid OTEL_TRACES_EXPORTER=${JSON.stringify(exporter)}: Gantry exports traces with otlp (over HTTP) or none`);
  }
  if (exporter === 'none') return undefined;
  const url = tracesUrl(get('OTEL_EXPORTER_OTLP_TRACES_ENDPOINT'), get('OTEL_EXPORTER_OTLP_ENDPOINT'));
  if (url === undefined && exporter !== 'otlp') return undefined;
  const resourceAttributes = keyValues('OTEL_RESOURCE_ATTRIBUTES', get('OTEL_RESOURCE_ATTRIBUTES'));
  return {
    url: url ?? DEFAULT_URL,
    protocol: protocolOf(get('OTEL_EXPORTER_OTLP_TRACES_PROTOCOL') ? 'OTEL_EXPORTER_OTLP_TRACES_PROTOCOL' : 'OTEL_EXPORTER_OTLP_PROTOCOL', get('OTEL_EXPORTER_OTLP_TRACES_PROTOCOL') ?? get('OTEL_EXPORTER_OTLP_PROTOCOL')),
    // The traces' own headers add to (and override) the shared ones, as the specification says.
    headers: { ...keyValues('OTEL_EXPORTER_OTLP_HEADERS', get('OTEL_EXPORTER_OTLP_HEADERS')), ...keyValues('OTEL_EXPORTER_OTLP_TRACES_HEADERS', get('OTEL_EXPORTER_OTLP_TRACES_HEADERS')) },
    timeoutMs: positive(env, get('OTEL_EXPORTER_OTLP_TRACES_TIMEOUT') ? 'OTEL_EXPORTER_OTLP_TRACES_TIMEOUT' : 'OTEL_EXPORTER_OTLP_TIMEOUT', 10_000),
    compression: compressionOf(get('OTEL_EXPORTER_OTLP_TRACES_COMPRESSION') ? 'OTEL_EXPORTER_OTLP_TRACES_COMPRESSION' : 'OTEL_EXPORTER_OTLP_COMPRESSION', get('OTEL_EXPORTER_OTLP_TRACES_COMPRESSION') ?? get('OTEL_EXPORTER_OTLP_COMPRESSION')),
    serviceName: get('OTEL_SERVICE_NAME') ?? resourceAttributes['service.name'] ?? 'gantry',
    resourceAttributes,
    sampler: samplerOf(get('OTEL_TRACES_SAMPLER')),
    samplerRatio: ratioOf(get('OTEL_TRACES_SAMPLER_ARG')),
    batch: {
      scheduledDelayMillis: positive(env, 'OTEL_BSP_SCHEDULE_DELAY', 5_000),
      maxQueueSize: positive(env, 'OTEL_BSP_MAX_QUEUE_SIZE', 2_048),
      maxExportBatchSize: positive(env, 'OTEL_BSP_MAX_EXPORT_BATCH_SIZE', 512),
      exportTimeoutMillis: positive(env, 'OTEL_BSP_EXPORT_TIMEOUT', 30_000),
    },
  };
}

/** The traces URL: the signal's endpoint as given, else `/v1/traces` appended to the shared one. */
function tracesUrl(traces: string | undefined, shared: string | undefined): string | undefined {
  if (traces !== undefined) return httpUrl('OTEL_EXPORTER_OTLP_TRACES_ENDPOINT', traces);
  if (shared === undefined) return undefined;
  const base = httpUrl('OTEL_EXPORTER_OTLP_ENDPOINT', shared);
  return `${base.endsWith('/') ? base : `${base}/`}v1/traces`;
}

function httpUrl(name: string, value: string): string {
  let url: URL;
  try {
    url = new URL(value);
  } catch {
    throw new Error(`Invalid ${name}: expected an http:// or https:// URL`);
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') throw new Error(`Invalid ${name}: expected an http:// or https:// URL (Gantry exports OTLP over HTTP, not gRPC)`);
  return value;
}

function protocolOf(name: string, value: string | undefined): OtlpProtocol {
  if (value === undefined || value === 'http/protobuf') return 'http/protobuf';
  if (value === 'http/json') return 'http/json';
  throw new Error(`Invalid ${name}=${JSON.stringify(value)}: expected http/protobuf or http/json (grpc is not supported)`);
}

function compressionOf(name: string, value: string | undefined): 'gzip' | 'none' {
  if (value === undefined || value === 'none') return 'none';
  if (value === 'gzip') return 'gzip';
  throw new Error(`Invalid ${name}=${JSON.stringify(value)}: expected gzip or none`);
}

function samplerOf(value: string | undefined): SamplerName {
  if (value === undefined) return 'parentbased_always_on';
  if ((SAMPLERS as readonly string[]).includes(value)) return value as SamplerName;
  throw new Error(`Invalid OTEL_TRACES_SAMPLER=${JSON.stringify(value)}: expected one of ${SAMPLERS.join(', ')}`);
}

function ratioOf(value: string | undefined): number {
  if (value === undefined) return 1;
  const ratio = Number(value);
  if (!Number.isFinite(ratio) || ratio < 0 || ratio > 1) throw new Error(`Invalid OTEL_TRACES_SAMPLER_ARG=${JSON.stringify(value)}: expected a number from 0 to 1`);
  return ratio;
}

function positive(env: NodeJS.ProcessEnv, name: string, fallback: number): number {
  const value = env[name]?.trim();
  if (value === undefined || value === '') return fallback;
  const n = Number(value);
  if (!Number.isInteger(n) || n <= 0) throw new Error(`Invalid ${name}=${JSON.stringify(value)}: expected a positive whole number`);
  return n;
}

/**
 * `key1=value1,key2=value2` with percent-encoded values (the W3C Baggage form the OTEL_*
 * lists use). The error names the variable only: header values may be secrets.
 */
function keyValues(name: string, value: string | undefined): Record<string, string> {
  const out: Record<string, string> = {};
  if (value === undefined) return out;
  for (const pair of value.split(',')) {
    if (pair.trim() === '') continue;
    const eq = pair.indexOf('=');
    const key = eq < 0 ? '' : pair.slice(0, eq).trim();
    if (key === '') throw new Error(`Invalid ${name}: expected key=value pairs separated by commas`);
    try {
      out[decodeURIComponent(key)] = decodeURIComponent(pair.slice(eq + 1).trim());
    } catch {
      throw new Error(`Invalid ${name}: a key or value is not valid percent-encoding`);
    }
  }
  return out;
}
