// A real OTLP/HTTP trace receiver for the tracing tests: an HTTP server speaking the protocol
// (https://opentelemetry.io/docs/specs/otlp/#otlphttp) as a collector does. POST /v1/traces
// with `application/x-protobuf` is decoded with the protocol's own .proto files (fixtures/otlp,
// from opentelemetry-proto) by protobufjs; `application/json` is OTLP/JSON (hex ids, enums as
// numbers). Either answers 200 with an empty ExportTraceServiceResponse in the same encoding.
import { createServer, type IncomingMessage, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { isAbsolute, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { gunzipSync } from 'node:zlib';
import protobuf from 'protobufjs';

const PROTO_ROOT = fileURLToPath(new URL('./fixtures/otlp/', import.meta.url));

/** One span as received, whatever the encoding: ids in lower-case hex, attributes as plain values. */
export interface ReceivedSpan {
  traceId: string;
  spanId: string;
  /** '' for a root span. */
  parentSpanId: string;
  name: string;
  /** OTLP SpanKind: 1 internal, 2 server, 3 client, 4 producer, 5 consumer. */
  kind: number;
  startMs: number;
  endMs: number;
  attributes: Record<string, string | number | boolean>;
  /** OTLP status code: 0 unset, 1 ok, 2 error. */
  statusCode: number;
  statusMessage: string;
  /** The resource's attributes (service.name, …). */
  resource: Record<string, string | number | boolean>;
}

export interface OtlpReceiver {
  url: string;
  spans: ReceivedSpan[];
  /** The content types of the requests received, in order. */
  contentTypes: string[];
  close(): Promise<void>;
}

let requestType: protobuf.Type | undefined;

/** ExportTraceServiceRequest, loaded once from the .proto files (imports resolved under fixtures/otlp). */
function exportRequestType(): protobuf.Type {
  if (requestType) return requestType;
  const root = new protobuf.Root();
  root.resolvePath = (_origin, target) => (isAbsolute(target) ? target : join(PROTO_ROOT, target));
  root.loadSync('opentelemetry/proto/collector/trace/v1/trace_service.proto');
  requestType = root.lookupType('opentelemetry.proto.collector.trace.v1.ExportTraceServiceRequest');
  return requestType;
}

/** Starts a receiver on a free local port; its `url` is what OTEL_EXPORTER_OTLP_ENDPOINT takes. */
export async function startOtlpReceiver(): Promise<OtlpReceiver> {
  const spans: ReceivedSpan[] = [];
  const contentTypes: string[] = [];
  const server: Server = createServer((req, res) => {
    void readBody(req).then(
      (body) => {
        const type = (req.headers['content-type'] ?? '').split(';')[0]!.trim();
        if (req.method !== 'POST' || req.url !== '/v1/traces') {
          res.writeHead(404).end();
          return;
        }
        contentTypes.push(type);
        try {
          if (type === 'application/x-protobuf') {
            spans.push(...fromProtobuf(body));
            res.writeHead(200, { 'content-type': 'application/x-protobuf' }).end();
          } else if (type === 'application/json') {
            spans.push(...fromJson(JSON.parse(body.toString('utf8')) as OtlpJson));
            res.writeHead(200, { 'content-type': 'application/json' }).end('{}');
          } else {
            res.writeHead(415).end();
          }
        } catch (err) {
          res.writeHead(400, { 'content-type': 'text/plain' }).end(String(err));
        }
      },
      () => res.writeHead(400).end(),
    );
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    spans,
    contentTypes,
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}

async function readBody(req: IncomingMessage): Promise<Buffer> {
  const chunks: Buffer[] = [];
  for await (const chunk of req) chunks.push(chunk as Buffer);
  const body = Buffer.concat(chunks);
  return req.headers['content-encoding'] === 'gzip' ? gunzipSync(body) : body;
}

// --- protobuf -------------------------------------------------------------------------------

interface PbAnyValue {
  stringValue?: string;
  boolValue?: boolean;
  intValue?: string;
  doubleValue?: number;
}
interface PbKeyValue {
  key: string;
  value?: PbAnyValue;
}
interface PbSpan {
  traceId: Buffer;
  spanId: Buffer;
  parentSpanId?: Buffer;
  name: string;
  kind?: number;
  startTimeUnixNano: string;
  endTimeUnixNano: string;
  attributes?: PbKeyValue[];
  status?: { code?: number; message?: string };
}
interface PbRequest {
  resourceSpans?: { resource?: { attributes?: PbKeyValue[] }; scopeSpans?: { spans?: PbSpan[] }[] }[];
}

function fromProtobuf(body: Buffer): ReceivedSpan[] {
  const type = exportRequestType();
  const request = type.toObject(type.decode(body), { longs: String, enums: Number, bytes: Buffer, defaults: false }) as PbRequest;
  const out: ReceivedSpan[] = [];
  for (const rs of request.resourceSpans ?? []) {
    const resource = attributesOf(rs.resource?.attributes);
    for (const ss of rs.scopeSpans ?? []) {
      for (const s of ss.spans ?? []) {
        out.push({
          traceId: Buffer.from(s.traceId).toString('hex'),
          spanId: Buffer.from(s.spanId).toString('hex'),
          parentSpanId: s.parentSpanId ? Buffer.from(s.parentSpanId).toString('hex') : '',
          name: s.name,
          kind: s.kind ?? 0,
          startMs: nanosToMs(s.startTimeUnixNano),
          endMs: nanosToMs(s.endTimeUnixNano),
          attributes: attributesOf(s.attributes),
          statusCode: s.status?.code ?? 0,
          statusMessage: s.status?.message ?? '',
          resource,
        });
      }
    }
  }
  return out;
}

// --- JSON -----------------------------------------------------------------------------------

interface JsonAnyValue {
  stringValue?: string;
  boolValue?: boolean;
  intValue?: string | number;
  doubleValue?: number;
}
interface JsonKeyValue {
  key: string;
  value?: JsonAnyValue;
}
interface OtlpJson {
  resourceSpans?: {
    resource?: { attributes?: JsonKeyValue[] };
    scopeSpans?: {
      spans?: {
        traceId: string;
        spanId: string;
        parentSpanId?: string;
        name: string;
        kind?: number;
        startTimeUnixNano: string | number;
        endTimeUnixNano: string | number;
        attributes?: JsonKeyValue[];
        status?: { code?: number; message?: string };
      }[];
    }[];
  }[];
}

function fromJson(request: OtlpJson): ReceivedSpan[] {
  const out: ReceivedSpan[] = [];
  for (const rs of request.resourceSpans ?? []) {
    const resource = attributesOf(rs.resource?.attributes);
    for (const ss of rs.scopeSpans ?? []) {
      for (const s of ss.spans ?? []) {
        out.push({
          traceId: s.traceId.toLowerCase(),
          spanId: s.spanId.toLowerCase(),
          parentSpanId: (s.parentSpanId ?? '').toLowerCase(),
          name: s.name,
          kind: s.kind ?? 0,
          startMs: nanosToMs(String(s.startTimeUnixNano)),
          endMs: nanosToMs(String(s.endTimeUnixNano)),
          attributes: attributesOf(s.attributes),
          statusCode: s.status?.code ?? 0,
          statusMessage: s.status?.message ?? '',
          resource,
        });
      }
    }
  }
  return out;
}

function attributesOf(list: (PbKeyValue | JsonKeyValue)[] | undefined): Record<string, string | number | boolean> {
  const out: Record<string, string | number | boolean> = {};
  for (const { key, value } of list ?? []) {
    if (!value) continue;
    if (value.stringValue !== undefined) out[key] = value.stringValue;
    else if (value.boolValue !== undefined) out[key] = value.boolValue;
    else if (value.intValue !== undefined) out[key] = Number(value.intValue);
    else if (value.doubleValue !== undefined) out[key] = value.doubleValue;
  }
  return out;
}

function nanosToMs(nanos: string): number {
  return Number(BigInt(nanos) / 1_000_000n);
}
