// The one route table (src/http/route-table.ts) and its dispatcher: how paths are matched, what
// a route's declaration makes the dispatcher check, and that no request text can name a member
// of a plain object's prototype (issue 22.4: /v2/<x>/constructor answered 500 with a stack).
import { Writable } from 'node:stream';
import { pino } from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { sendJson } from '../../src/http/respond.js';
import { createRouteTable, type Route } from '../../src/http/route-table.js';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Logger } from 'pino';
import { IMAGE_DEFAULTS } from '../../src/config/image-config.js';
import { startGantry, type Gantry } from '../../src/server.js';

interface TestGantry {
  url: string;
  adminKey: string;
  gantry: Gantry;
  createEndpoint(id: string): Promise<void>;
  createKey(scopes: string[]): Promise<string>;
  close(): Promise<void>;
}

/** A gateway on SQLite whose log goes to `logger` (the test kit's gateways log nothing). */
async function startLoggedGantry(logger: Logger): Promise<TestGantry> {
  const dataDir = mkdtempSync(join(tmpdir(), 'gantry-routes-'));
  const adminKey = 'route-table-test-admin-key';
  const gantry = await startGantry({ env: {}, logger, config: { port: 0, host: '127.0.0.1', dataDir, adminKey, rateLimits: false, images: { ...IMAGE_DEFAULTS, workers: false } } });
  const admin = async (path: string, body: unknown): Promise<Record<string, unknown>> =>
    (await (await fetch(`${gantry.url}/admin/v1/${path}`, { method: 'POST', headers: { authorization: `Bearer ${adminKey}` }, body: JSON.stringify(body) })).json()) as Record<string, unknown>;
  return {
    url: gantry.url,
    adminKey,
    gantry,
    createEndpoint: async (id) => void (await admin('endpoints', { id })),
    createKey: async (scopes) => (await admin('keys', { name: 'test', scopes })).key as string,
    async close() {
      await gantry.close();
      rmSync(dataDir, { recursive: true, force: true });
    },
  };
}

const noop = async (): Promise<void> => {};
const plain = (method: Route['method'], path: string): Route => ({ family: 'test', method, path, auth: 'public', handle: noop });

describe('matching', () => {
  const table = createRouteTable();
  table.add(plain('GET', '/v2/{endpoint}/status/{job}'), plain('POST', '/v2/{endpoint}/openai/v1/{*rest}'), plain('GET', '/v2/{endpoint}/openai/v1/models'), plain(['GET', 'POST'], '/v2/{endpoint}/openai/{*rest}'), plain('GET', '/'));

  it('reads parameters, prefers literal segments, and falls back to {*rest} when a literal branch has no route', () => {
    expect(table.match(['v2', 'e1', 'status', 'j1'])?.params).toEqual({ endpoint: 'e1', job: 'j1' });
    expect([...table.match(['v2', 'e1', 'openai', 'v1', 'models'])!.methods.keys()]).toEqual(['GET']);
    expect(table.match(['v2', 'e1', 'openai', 'v1', 'chat', 'completions'])?.params).toEqual({ endpoint: 'e1', rest: ['chat', 'completions'] });
    expect(table.match(['v2', 'e1', 'openai', 'v1'])?.params).toEqual({ endpoint: 'e1', rest: ['v1'] });
    expect(table.match([])?.methods.has('GET')).toBe(true);
    expect(table.match(['v2', 'e1', 'status'])).toBeUndefined();
    expect(table.match(['v2', 'e1', 'status', 'j1', 'x'])).toBeUndefined();
  });

  it('matches no prototype member of any object', () => {
    for (const name of ['constructor', 'toString', 'valueOf', 'hasOwnProperty', '__proto__', 'isPrototypeOf', '__defineGetter__']) {
      expect(table.match([name]), name).toBeUndefined();
      expect(table.match(['v2', 'e1', name]), name).toBeUndefined();
      expect(table.match(['v2', name, 'status', name])?.params, name).toEqual({ endpoint: name, job: name });
    }
  });

  it('refuses a taken method, a malformed pattern, and needsEndpoint without {endpoint}', () => {
    expect(() => table.add(plain('GET', '/v2/{endpoint}/status/{job}'))).toThrow(/taken/);
    expect(() => table.add(plain('GET', '/v2/{worker}/x'))).toThrow(/another route has \{endpoint\}/);
    expect(() => table.add(plain('GET', '/a/{*rest}/b'))).toThrow(/must be last/);
    expect(() => table.add(plain('GET', '/a/{nope}'))).toThrow(/unknown parameter/);
    expect(() => table.add({ family: 'test', method: 'GET', path: '/a', auth: 'read', needsEndpoint: true, handle: noop })).toThrow(/needsEndpoint/);
  });
});

describe('the gateway route table over HTTP', () => {
  let t: TestGantry;
  const errors: string[] = [];
  beforeAll(async () => {
    // Every line the gateway logs at error level or above, to see that no request logs a stack.
    const sink = new Writable({
      write(chunk: Buffer, _enc, done) {
        for (const line of chunk.toString().split('\n').filter(Boolean)) if ((JSON.parse(line) as { level: number }).level >= 50) errors.push(line);
        done();
      },
    });
    t = await startLoggedGantry(pino({ level: 'info' }, sink));
    t.gantry.gateway.routes.add(
      { family: 'test', method: 'GET', path: '/hello/{*rest}', auth: 'public', handle: async ({ res, params, query }) => sendJson(res, 200, { rest: params.rest, q: query.get('q') }) },
      { family: 'test', method: ['PUT', 'DELETE'], path: '/v2/{endpoint}/echo-op/{job}', auth: 'read', needsEndpoint: true, handle: async ({ res, endpointId, params }) => sendJson(res, 200, { endpointId, job: params.job }) },
    );
    await t.createEndpoint('rt');
  });
  afterAll(async () => {
    await t?.close();
  });

  it('serves a feature route; its declaration checks the key and the endpoint before it runs; a wrong method is a 405 naming the others', async () => {
    expect(await (await fetch(`${t.url}/hello/a/b?q=1`)).json()).toEqual({ rest: ['a', 'b'], q: '1' });
    const key = { authorization: `Bearer ${await t.createKey(['read'])}` };
    expect(await (await fetch(`${t.url}/v2/rt/echo-op/j9`, { method: 'PUT', headers: key })).json()).toEqual({ endpointId: 'rt', job: 'j9' });
    expect((await fetch(`${t.url}/v2/rt/echo-op/j9`, { method: 'PUT' })).status).toBe(401);
    expect(((await (await fetch(`${t.url}/v2/none/echo-op/j9`, { method: 'PUT', headers: key })).json()) as { code: string }).code).toBe('ENDPOINT_NOT_FOUND');
    const wrong = await fetch(`${t.url}/v2/rt/echo-op/j9`, { method: 'GET', headers: key });
    expect(wrong.status).toBe(405);
    expect(wrong.headers.get('allow')).toBe('PUT, DELETE');
  });

  it('refuses to replace a route of any family', () => {
    const routes = t.gantry.gateway.routes;
    for (const [method, path] of [['POST', '/v2/{endpoint}/run'], ['GET', '/v2/{endpoint}/job-take/{worker}'], ['GET', '/admin/v1/keys'], ['GET', '/healthz'], ['GET', '/files/{*rest}'], ['GET', '/metrics'], ['POST', '/v2/{endpoint}/openai/v1/{*rest}'], ['GET', '/console']] as const) {
      expect(() => routes.add(plain(method, path)), `${method} ${path}`).toThrow(/taken/);
    }
  });

  it('answers prototype names in every route family with a 4xx, never a 500, and logs no stack', async () => {
    const names = ['constructor', 'toString', 'valueOf', 'hasOwnProperty', '__proto__', 'isPrototypeOf', 'propertyIsEnumerable', '__lookupGetter__'];
    const key = { authorization: `Bearer ${t.adminKey}` };
    for (const name of names) {
      // A path that names nothing: 404 NOT_FOUND without a key.
      for (const path of [`/${name}`, `/v2/${name}`, `/v2/x/${name}`, `/v2/rt/${name}/w1`, `/v2/rt/status/j/${name}`, `/admin/${name}`, `/admin/v1/${name}`, `/admin/v1/endpoints/rt/${name}`, `/hello`, `/metrics/${name}`, `/readyz/${name}`, `/v2/rt/openai/${name}`]) {
        for (const method of ['GET', 'POST']) {
          const res = await fetch(`${t.url}${path}`, { method });
          expect(res.status, `${method} ${path}`).toBe(404);
          const body = (await res.json()) as { code?: string; error?: { code: string } };
          expect(body.code ?? body.error?.code, `${method} ${path}`).toMatch(/^not_found$/i);
        }
      }
      // An id that names nothing: the 404 of that kind, with the key that may read it.
      for (const [path, code] of [[`/v2/${name}/health`, 'ENDPOINT_NOT_FOUND'], [`/v2/rt/status/${name}`, 'JOB_NOT_FOUND'], [`/admin/v1/endpoints/${name}`, 'ENDPOINT_NOT_FOUND']] as const) {
        const res = await fetch(`${t.url}${path}`, { headers: key });
        expect([res.status, ((await res.json()) as { code: string }).code], path).toEqual([404, code]);
      }
      const file = await fetch(`${t.url}/files/${name}`);
      expect(file.status).toBe(403); // a key of the right shape without its signature
      const consoleFile = await fetch(`${t.url}/console/${name}`);
      expect(consoleFile.status).toBe(404);
      expect(consoleFile.headers.get('x-content-type-options')).toBe('nosniff');
    }
    expect(errors).toEqual([]);
  });
});
