// /openapi.json against the real routes: every documented /v2 operation exists, every client
// route of docs/api.md is documented, every $ref resolves, and the bounds it documents for
// endpoint settings, the submit policy and key scopes are the ones the API enforces.
import { readFileSync } from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { isClientOperation } from '../../src/http/client-routes.js';
import { isWorkerOperation } from '../../src/http/worker-routes.js';
import { startTestGantry, type TestGantry } from '../helpers/gantry.js';

type Doc = { openapi: string; paths: Record<string, Record<string, unknown>>; components: { schemas: Record<string, { properties?: Record<string, Record<string, unknown>> }> } };

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
  it('is OpenAPI 3 whose /v2 operations are the real client and worker operations', () => {
    expect(doc.openapi).toMatch(/^3\./);
    const ops = Object.keys(doc.paths).filter((p) => p.startsWith('/v2/')).map((p) => p.split('/')[3]!);
    for (const op of ops) expect(isClientOperation(op) || isWorkerOperation(op), op).toBe(true);
    const client = ops.filter(isClientOperation);
    expect(new Set(client).size).toBe(10);
    expect(new Set(ops.filter(isWorkerOperation)).size).toBe(6);
    expect(Object.keys(doc.paths).filter((p) => p.startsWith('/admin/v1/')).length).toBeGreaterThanOrEqual(7);
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
    expect(integers.map(([f]) => f).sort()).toEqual(['executionTimeoutMs', 'idleTimeout', 'maxAttempts', 'scalerValue', 'workersMax', 'workersMin']);
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
