// /openapi.json against the real routes: every documented /v2 operation exists (the OpenAI
// routes among them), every client route of docs/api.md is documented, every $ref resolves, the
// endpoint settings it lists are the ones the validator accepts and the admin API answers, and
// the bounds and defaults it documents for endpoint settings, rate limits, the submit policy,
// key scopes and the waits are the ones the API enforces.
import { readFileSync } from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DEFAULT_STREAM_WAIT_MS, DEFAULT_SYNC_WAIT_MS } from '../../src/http/client-routes.js';
import { MAX_RATE, RATE_LIMITED_OPERATIONS, SETTING_FIELDS } from '../../src/jobs/endpoint-settings.js';
import { openAiRoute } from '../../src/openai/openai-request.js';
import { startTestGantry, type TestGantry } from '../helpers/gantry.js';

type Param = { name: string; in: string; schema: { default?: number } };
type Doc = {
  openapi: string;
  paths: Record<string, Record<string, { parameters?: Param[] }>>;
  components: { schemas: Record<string, { properties?: Record<string, Record<string, unknown>>; oneOf?: { properties?: Record<string, unknown> }[] }> };
};

let t: TestGantry;
let doc: Doc;

const admin = (method: string, path: string, body?: unknown) =>
  fetch(`${t.url}${path}`, { method, headers: { authorization: `Bearer ${t.adminKey}`, 'content-type': 'application/json' }, ...(body === undefined ? {} : { body: JSON.stringify(body) }) });

beforeAll(async () => {
  t = await startTestGantry();
  const res = await fetch(`${t.url}/openapi.json`);
  expect(res.status).toBe(200);
  expect(res.headers.get('content-type')).toMatch(/^application\/json/);
  doc = (await res.json()) as Doc;
});
afterAll(async () => {
  await t.close();
});

describe('/openapi.json', () => {
  it('is OpenAPI 3 whose every path and method is a route of the route table, and documents every client, worker, admin and probe route', () => {
    expect(doc.openapi).toMatch(/^3\./);
    const routes = t.gantry.gateway.routes;
    const segments = (path: string) => path.split('/').filter((s) => s !== '');
    for (const [path, methods] of Object.entries(doc.paths)) {
      const match = routes.match(segments(path));
      expect(match, path).toBeDefined();
      for (const method of Object.keys(methods)) expect(match!.methods.get(method.toUpperCase()), `${method} ${path}`).toBeDefined();
    }
    const documented = routes.list().filter((r) => ['client', 'worker', 'admin', 'probe'].includes(r.family) && r.auth !== 'public');
    expect(documented.length).toBe(10 + 6 + 18);
    for (const route of documented) {
      for (const method of typeof route.method === 'string' ? [route.method] : route.method) {
        expect(doc.paths[route.path]?.[method.toLowerCase()], `${method} ${route.path}`).toBeDefined();
      }
    }
    expect(Object.keys(doc.paths['/healthz']!)).toContain('get');
  });

  it('documents the OpenAI routes, each one the OpenAI route accepts with its method, and the file route', () => {
    const openai = Object.entries(doc.paths).filter(([p]) => p.includes('/openai/'));
    expect(openai.map(([p]) => p).sort()).toEqual(['/v2/{endpoint}/openai/v1/chat/completions', '/v2/{endpoint}/openai/v1/completions', '/v2/{endpoint}/openai/v1/models']);
    for (const [path, methods] of openai) {
      const rest = path.split('/openai/')[1]!.split('/');
      for (const method of Object.keys(methods)) expect(() => openAiRoute(method.toUpperCase(), rest), `${method} ${path}`).not.toThrow();
    }
    expect(Object.keys(doc.paths['/files/{key}']!).sort()).toEqual(['get', 'head']);
  });

  it('lists exactly the endpoint settings the validator accepts, and the fields the admin API answers', async () => {
    // A setting added to the validator (or the answer) without its schema fails here.
    expect(Object.keys(doc.components.schemas.EndpointSettings!.properties!).sort()).toEqual([...SETTING_FIELDS].sort());
    const res = await admin('POST', '/admin/v1/endpoints', { id: 'oa-fields', worker: { command: 'true' }, rateLimits: { run: { per10s: 10 } } });
    expect(res.status).toBe(200);
    expect(Object.keys(doc.components.schemas.Endpoint!.properties!).sort()).toEqual(Object.keys((await res.json()) as object).sort());
  });

  it('documents the rate limits the admin API enforces', async () => {
    const limits = doc.components.schemas.RateLimits!.oneOf![1]!.properties!;
    expect(Object.keys(limits).sort()).toEqual([...RATE_LIMITED_OPERATIONS].sort());
    const count = ((limits.run as { oneOf: { properties: { per10s: { maximum: number } } }[] }).oneOf[1]!.properties.per10s).maximum;
    expect(count).toBe(MAX_RATE);
    const set = (rateLimits: unknown) => admin('PATCH', '/admin/v1/endpoints/oa-rates', { rateLimits });
    expect((await admin('POST', '/admin/v1/endpoints', { id: 'oa-rates' })).status).toBe(200);
    for (const op of Object.keys(limits)) expect((await set({ [op]: { per10s: count, concurrent: 1 } })).status, op).toBe(200);
    for (const ok of ['off', null, { status: 'off' }]) expect((await set(ok)).status, JSON.stringify(ok)).toBe(200);
    const refused = await set({ run: { per10s: count + 1 } });
    expect(refused.status).toBe(400);
    expect(((await refused.json()) as { field?: string }).field).toBe('rateLimits.run.per10s');
  });

  it('documents the default waits the client routes use', () => {
    const waitOf = (path: string, method: string) => doc.paths[path]![method]!.parameters!.find((p) => p.name === 'wait')!.schema.default;
    expect(waitOf('/v2/{endpoint}/stream/{job}', 'get')).toBe(DEFAULT_STREAM_WAIT_MS);
    expect(waitOf('/v2/{endpoint}/runsync', 'post')).toBe(DEFAULT_SYNC_WAIT_MS);
    expect(waitOf('/v2/{endpoint}/status-sync/{job}', 'get')).toBe(DEFAULT_SYNC_WAIT_MS);
  });

  it('documents every client route docs/api.md describes', () => {
    const api = readFileSync(new URL('../../docs/api.md', import.meta.url), 'utf8');
    const described = [...api.matchAll(/^### (?:GET\|POST|GET|POST) `\/([a-z-]+)/gm)].map((m) => m[1]!);
    expect(described.length).toBeGreaterThanOrEqual(9);
    const documented = Object.keys(doc.paths).map((p) => p.split('/')[3]);
    for (const op of described) expect(documented, op).toContain(op);
  });

  it('has no dangling $ref', () => {
    const refs = [...JSON.stringify(doc).matchAll(/"\$ref":"#\/components\/schemas\/([A-Za-z]+)"/g)].map((m) => m[1]!);
    expect(refs.length).toBeGreaterThan(5);
    for (const name of refs) expect(doc.components.schemas[name], name).toBeDefined();
  });

  it('documents the endpoint settings bounds the admin API enforces', async () => {
    const settings = doc.components.schemas.EndpointSettings!.properties!;
    const integers = Object.entries(settings).filter(([, s]) => s.type === 'integer');
    expect(integers.map(([f]) => f).sort()).toEqual(['executionTimeoutMs', 'idleTimeout', 'maxAttempts', 'priority', 'scalerValue', 'shareWeight', 'workersMax', 'workersMin']);
    let n = 0;
    for (const [field, schema] of integers) {
      const min = schema.minimum as number;
      const max = schema.maximum as number;
      // workersMin must not exceed workersMax: set both where one is probed at its top.
      const pair = (f: string, v: number) => (f === 'workersMin' ? { workersMin: v, workersMax: v } : f === 'workersMax' ? { workersMax: v } : { [f]: v });
      for (const [value, ok] of [[min, true], [max, true], [min - 1, false], [max + 1, false]] as const) {
        const res = await admin('POST', '/admin/v1/endpoints', { id: `oa-${++n}`, ...pair(field, value) });
        const body = (await res.json()) as { field?: string };
        expect(res.status, `${field}=${value}`).toBe(ok ? 200 : 400);
        if (!ok) expect(body.field).toBe(field);
      }
    }
  });

  it('documents the policy and scope rules the client and admin APIs enforce', async () => {
    const policy = doc.components.schemas.Policy!.properties!;
    await t.createEndpoint('oa-policy');
    const submit = (p: Record<string, unknown>) => admin('POST', '/v2/oa-policy/run', { input: {}, policy: p });
    const ttl = policy.ttl!;
    expect((await submit({ ttl: ttl.minimum })).status).toBe(200);
    expect((await submit({ ttl: ttl.maximum })).status).toBe(200);
    expect((await submit({ ttl: (ttl.minimum as number) - 1 })).status).toBe(400);
    expect((await submit({ ttl: (ttl.maximum as number) + 1 })).status).toBe(400);
    const timeout = policy.executionTimeout!;
    expect((await submit({ executionTimeout: timeout.exclusiveMinimum })).status).toBe(400);
    expect((await submit({ executionTimeout: (timeout.exclusiveMinimum as number) + 1 })).status).toBe(200);
    const scopes = (doc.components.schemas.KeySpec!.properties!.scopes!.items as { enum: string[] }).enum;
    for (const scope of scopes) expect((await admin('POST', '/admin/v1/keys', { name: scope, scopes: [scope] })).status, scope).toBe(200);
    expect((await admin('POST', '/admin/v1/keys', { name: 'x', scopes: ['superuser'] })).status).toBe(400);
  });
});
