// Small HTTP helpers shared by the route tests in test/http: a client speaking the v2 job API
// and a simulated worker speaking runpod-python's worker protocol, both over global fetch.
import { createServer, type IncomingMessage } from 'node:http';
import type { AddressInfo } from 'node:net';
import { uniqueId } from '../helpers/jobs.js';

export type Json = Record<string, unknown>;

export interface Reply {
  status: number;
  /** Parsed JSON body, or undefined when the body is empty or not JSON. */
  json: Json;
  text: string;
  headers: Headers;
  /** Milliseconds from sending to the end of the body. */
  ms: number;
}

export interface CallOptions {
  /** API key; sent as `Bearer KEY` unless `rawAuth`. null: no Authorization header. */
  key?: string | null;
  rawAuth?: boolean;
  /** A value to JSON-encode, or a string / Buffer sent as it is. */
  body?: unknown;
  contentType?: string | null;
  headers?: Record<string, string>;
}

export async function call(base: string, method: string, path: string, opts: CallOptions = {}): Promise<Reply> {
  const headers: Record<string, string> = { ...opts.headers };
  if (opts.key) headers.authorization = opts.rawAuth ? opts.key : `Bearer ${opts.key}`;
  let body: string | Buffer | undefined;
  if (opts.body !== undefined) body = typeof opts.body === 'string' || Buffer.isBuffer(opts.body) ? opts.body : JSON.stringify(opts.body);
  const contentType = opts.contentType === undefined ? (body !== undefined ? 'application/json' : undefined) : opts.contentType;
  if (contentType) headers['content-type'] = contentType;
  const started = Date.now();
  const res = await fetch(`${base}${path}`, { method, headers, body });
  const text = await res.text();
  let json: Json = undefined as unknown as Json;
  try {
    json = JSON.parse(text) as Json;
  } catch {
    // not JSON: leave undefined
  }
  return { status: res.status, json, text, headers: res.headers, ms: Date.now() - started };
}

export { uniqueId } from '../helpers/jobs.js';

/** A gateway as these helpers need it: in the test process (TestGantry) or a `gantry serve` process. */
export interface Reachable {
  url: string;
}

/** Client side of one endpoint, with a run-scoped key by default. */
export function clientFor(t: Reachable, endpointId: string, key: string) {
  const v2 = (path: string) => `/v2/${endpointId}/${path}`;
  const c = {
    key,
    call: (method: string, path: string, opts: CallOptions = {}) => call(t.url, method, v2(path), { key, ...opts }),
    run: (body: unknown = { input: { hello: 'world' } }) => c.call('POST', 'run', { body }),
    runsync: (body: unknown, query = '') => c.call('POST', `runsync${query}`, { body }),
    status: (id: string, query = '') => c.call('GET', `status/${id}${query}`),
    statusSync: (id: string, query = '') => c.call('GET', `status-sync/${id}${query}`),
    stream: (id: string, query = '') => c.call('GET', `stream/${id}${query}`),
    cancel: (id: string) => c.call('POST', `cancel/${id}`),
    retry: (id: string) => c.call('POST', `retry/${id}`),
    purge: () => c.call('POST', 'purge-queue'),
    health: () => c.call('GET', 'health'),
    requests: (query = '') => c.call('GET', `requests${query}`),
    /** Submits and returns the id (asserting 200). */
    async submit(body: unknown = { input: { n: 1 } }): Promise<string> {
      const r = await c.run(body);
      if (r.status !== 200) throw new Error(`run failed: ${r.status} ${r.text}`);
      return r.json.id as string;
    },
  };
  return c;
}

export type Client = ReturnType<typeof clientFor>;

/** A worker simulated over HTTP: runpod-python's requests, with a worker key sent raw. */
export function workerFor(t: Reachable, endpointId: string, key: string, workerId = uniqueId('w')) {
  const v2 = (path: string) => `/v2/${endpointId}/${path}`;
  const w = {
    id: workerId,
    call: (method: string, path: string, opts: CallOptions = {}) => call(t.url, method, v2(path), { key, rawAuth: true, ...opts }),
    take: (query = '?&job_in_progress=0') => w.call('GET', `job-take/${workerId}${query}`, { contentType: 'application/json' }),
    takeBatch: (n: number) => w.call('GET', `job-take-batch/${workerId}?&batch_size=${n}&job_in_progress=0`),
    stop: () => w.call('GET', `job-stop/${workerId}`),
    ping: (query = '') => w.call('GET', `ping/${workerId}${query}`),
    /** job-done as runpod-python sends it: JSON in a form-encoded body, `?&isStream=false`. */
    done: (jobId: string, body: unknown, query = '?&isStream=false') =>
      w.call('POST', `job-done/${workerId}/${jobId}${query}`, { body, contentType: 'application/x-www-form-urlencoded', headers: { charset: 'utf-8' } }),
    streamChunk: (jobId: string, output: unknown) =>
      w.call('POST', `job-stream/${workerId}/${jobId}?&isStream=true`, { body: { output }, contentType: 'application/x-www-form-urlencoded' }),
    /** Polls job-take until a job comes (each poll may end 204 after the long-poll). */
    async takeJob(timeoutMs = 5_000): Promise<Json> {
      const deadline = Date.now() + timeoutMs;
      for (;;) {
        const r = await w.take();
        if (r.status === 200) return r.json;
        if (r.status !== 204) throw new Error(`job-take: ${r.status} ${r.text}`);
        if (Date.now() > deadline) throw new Error('job-take: no job in time');
      }
    },
  };
  return w;
}

export type Worker = ReturnType<typeof workerFor>;

export interface Receiver {
  url: string;
  /** Each call: its body, parsed and as sent, its headers and its path with the query. */
  calls: { body: Json; raw: string; headers: IncomingMessage['headers']; path: string }[];
  close(): Promise<void>;
}

/** A tiny HTTP server recording POSTs; `statuses` answers the calls in order (then 200). */
export async function startReceiver(statuses: number[] = []): Promise<Receiver> {
  const calls: Receiver['calls'] = [];
  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const text = Buffer.concat(chunks).toString('utf8');
      let body: Json = {};
      try {
        body = JSON.parse(text) as Json;
      } catch {
        body = { _raw: text };
      }
      calls.push({ body, raw: text, headers: req.headers, path: req.url ?? '' });
      res.writeHead(statuses.shift() ?? 200).end('ok');
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = (server.address() as AddressInfo).port;
  return {
    url: `http://127.0.0.1:${port}/hook`,
    calls,
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      }),
  };
}

export const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;

/** Asserts an error reply is JSON `{error: string, code: string}`. */
export function isErrorBody(r: Reply): boolean {
  return (
    r.headers.get('content-type')?.startsWith('application/json') === true &&
    typeof r.json === 'object' &&
    r.json !== null &&
    typeof r.json.error === 'string' &&
    typeof r.json.code === 'string'
  );
}
