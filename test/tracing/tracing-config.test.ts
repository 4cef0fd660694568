// The OTEL_* variables (docs/observability.md): tracing off unless they ask for it, the
// specification's endpoint rules, and bad values refused naming the variable but never a
// header's value (it may be a backend's API key).
import { describe, expect, it } from 'vitest';
import { loadTracingConfig } from '../../src/tracing/tracing-config.js';

describe('loadTracingConfig', () => {
  it('is off with none of the variables, with OTEL_SDK_DISABLED=true, and with OTEL_TRACES_EXPORTER=none', () => {
    expect(loadTracingConfig({})).toBeUndefined();
    expect(loadTracingConfig({ OTEL_SERVICE_NAME: 'x', OTEL_TRACES_SAMPLER: 'always_on' })).toBeUndefined();
    expect(loadTracingConfig({ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://c:4318', OTEL_SDK_DISABLED: 'TRUE' })).toBeUndefined();
    expect(loadTracingConfig({ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://c:4318', OTEL_TRACES_EXPORTER: 'none' })).toBeUndefined();
  });

  it('sends to the traces endpoint as given, else the shared one + /v1/traces, else the default with OTEL_TRACES_EXPORTER=otlp', () => {
    expect(loadTracingConfig({ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://c:4318' })?.url).toBe('http://c:4318/v1/traces');
    expect(loadTracingConfig({ OTEL_EXPORTER_OTLP_ENDPOINT: 'https://c/otlp/' })?.url).toBe('https://c/otlp/v1/traces');
    expect(loadTracingConfig({ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://c:4318', OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: 'http://t:9/x' })?.url).toBe('http://t:9/x');
    expect(loadTracingConfig({ OTEL_TRACES_EXPORTER: 'otlp' })?.url).toBe('http://localhost:4318/v1/traces');
  });

  it('reads the protocol, headers, sampler and service as the specification says', () => {
    const config = loadTracingConfig({
      OTEL_EXPORTER_OTLP_ENDPOINT: 'http://c:4318',
      OTEL_EXPORTER_OTLP_PROTOCOL: 'http/json',
      OTEL_EXPORTER_OTLP_HEADERS: 'x-a=1,x-b=two%20words',
      OTEL_EXPORTER_OTLP_TRACES_HEADERS: 'x-b=3',
      OTEL_RESOURCE_ATTRIBUTES: 'service.name=from-resource,deployment.environment.name=prod',
      OTEL_TRACES_SAMPLER: 'parentbased_traceidratio',
      OTEL_TRACES_SAMPLER_ARG: '0.25',
    });
    expect(config).toMatchObject({ protocol: 'http/json', headers: { 'x-a': '1', 'x-b': '3' }, serviceName: 'from-resource', sampler: 'parentbased_traceidratio', samplerRatio: 0.25 });
    expect(config?.resourceAttributes['deployment.environment.name']).toBe('prod');
    expect(loadTracingConfig({ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://c:4318', OTEL_SERVICE_NAME: 'gw', OTEL_RESOURCE_ATTRIBUTES: 'service.name=r' })?.serviceName).toBe('gw');
    expect(loadTracingConfig({ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://c:4318' })).toMatchObject({ protocol: 'http/protobuf', serviceName: 'gantry', sampler: 'parentbased_always_on', samplerRatio: 1, compression: 'none' });
  });

  it('refuses bad values naming the variable, and never repeats a header value', () => {
    const on = { OTEL_EXPORTER_OTLP_ENDPOINT: 'http://c:4318' };
    expect(() => loadTracingConfig({ ...on, OTEL_EXPORTER_OTLP_PROTOCOL: 'grpc' })).toThrow(/OTEL_EXPORTER_OTLP_PROTOCOL.*grpc is not supported/);
    expect(() => loadTracingConfig({ OTEL_EXPORTER_OTLP_ENDPOINT: 'grpc://c:4317' })).toThrow(/OTEL_EXPORTER_OTLP_ENDPOINT/);
    expect(() => loadTracingConfig({ OTEL_TRACES_EXPORTER: 'zipkin' })).toThrow(/OTEL_TRACES_EXPORTER/);
    expect(() => loadTracingConfig({ ...on, OTEL_TRACES_SAMPLER: 'sometimes' })).toThrow(/OTEL_TRACES_SAMPLER/);
    expect(() => loadTracingConfig({ ...on, OTEL_TRACES_SAMPLER_ARG: '2' })).toThrow(/OTEL_TRACES_SAMPLER_ARG/);
    expect(() => loadTracingConfig({ ...on, OTEL_BSP_MAX_QUEUE_SIZE: '-1' })).toThrow(/OTEL_BSP_MAX_QUEUE_SIZE/);
    expect(() => loadTracingConfig({ ...on, OTEL_EXPORTER_OTLP_HEADERS: 'authorization=Bearer%ZZsecret-token' })).toThrow(/^Invalid OTEL_EXPORTER_OTLP_HEADERS: [^=]*$/);
    expect(() => loadTracingConfig({ ...on, OTEL_EXPORTER_OTLP_TRACES_HEADERS: 'secret-token-without-key' })).toThrow(/OTEL_EXPORTER_OTLP_TRACES_HEADERS/);
    try {
      loadTracingConfig({ ...on, OTEL_EXPORTER_OTLP_TRACES_HEADERS: 'secret-token-without-key' });
    } catch (err) {
      expect(String(err)).not.toContain('secret-token');
    }
  });
});
