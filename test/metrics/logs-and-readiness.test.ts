// Request log lines carry the request's id; logs are JSON or pino-pretty lines; /readyz turns
// 503 when the store cannot be read (a real SQLite store, closed under it).
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Writable } from 'node:stream';
import { pino } from 'pino';
import { afterAll, describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/config/config.js';
import { createReadiness } from '../../src/http/readiness.js';
import { openStore } from '../../src/store/open-store.js';
import { createLogger, logFormatFrom } from '../../src/util/log.js';
import { startGantry } from '../../src/server.js';
import { call } from '../http/http-helpers.js';

/** A stream that keeps what is written, line by line. */
function lineSink(): { stream: Writable; lines: string[] } {
  const lines: string[] = [];
  let partial = '';
  const stream = new Writable({
    write(chunk: Buffer, _encoding, done) {
      const text = partial + chunk.toString('utf8');
      const parts = text.split('\n');
      partial = parts.pop() ?? '';
      lines.push(...parts.filter((l) => l.length > 0));
      done();
    },
  });
  return { stream, lines };
}

const dirs: string[] = [];
afterAll(() => {
  for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
});

describe('request logs', () => {
  it('at debug level, one line per request with its requestId, method, route and status', async () => {
    const sink = lineSink();
    const dir = mkdtempSync(join(tmpdir(), 'gantry-logs-'));
    dirs.push(dir);
    const g = await startGantry({
      env: {},
      logger: pino({ level: 'debug' }, sink.stream),
      config: { port: 0, host: '127.0.0.1', dataDir: dir, adminKey: 'logs-test-admin-key', images: { ...loadConfig({}).images, workers: false } },
    });
    try {
      await call(g.url, 'GET', '/healthz', { headers: { 'x-request-id': 'req-abc' } });
      await call(g.url, 'GET', '/v2/nope/status/123', { headers: { 'x-request-id': 'req-def' }, key: 'logs-test-admin-key' });
    } finally {
      await g.close();
    }
    const records = sink.lines.map((l) => JSON.parse(l) as Record<string, unknown>).filter((r) => r.msg === 'request');
    expect(records).toContainEqual(expect.objectContaining({ requestId: 'req-abc', method: 'GET', route: '/healthz', status: 200 }));
    expect(records).toContainEqual(expect.objectContaining({ requestId: 'req-def', route: '/v2/{endpoint}/status/{job}', status: 404 }));
    expect(sink.lines.join('\n')).not.toContain('logs-test-admin-key');
  });
});

describe('requestId on the lines written for a request', () => {
  it('at debug level every line written while handling it carries its id, across awaits', async () => {
    const sink = lineSink();
    const logger = createLogger({ level: 'debug', format: 'json', destination: sink.stream });
    const dir = mkdtempSync(join(tmpdir(), 'gantry-logs-'));
    dirs.push(dir);
    const g = await startGantry({ env: {}, logger, config: { port: 0, host: '127.0.0.1', dataDir: dir, adminKey: 'logs-test-admin-key', images: { ...loadConfig({}).images, workers: false } } });
    // A feature route that logs before and after an await, as a service called by a route does.
    g.gateway.routes.add({
      family: 'test',
      method: 'GET',
      path: '/probe',
      auth: 'public',
      async handle({ res }) {
        logger.info('probe starts');
        await new Promise((resolve) => setImmediate(resolve));
        logger.warn({ jobId: 'j-1' }, 'probe after an await');
        res.end('ok');
      },
    });
    try {
      await Promise.all([call(g.url, 'GET', '/probe', { headers: { 'x-request-id': 'ctx-1' } }), call(g.url, 'GET', '/probe', { headers: { 'x-request-id': 'ctx-2' } })]);
    } finally {
      await g.close();
    }
    const records = sink.lines.map((l) => JSON.parse(l) as Record<string, unknown>);
    for (const id of ['ctx-1', 'ctx-2']) {
      const mine = records.filter((r) => r.requestId === id).map((r) => r.msg);
      expect(mine).toEqual(['probe starts', 'probe after an await', 'request']);
    }
    expect(records.find((r) => r.msg === 'gantry listening')).not.toHaveProperty('requestId');
  });
});

describe('a fault is logged without the query', () => {
  // Issue 22 item 7: a 500 on any route logs its route and path, never the query, which may
  // carry a token or a signature (the /files route's own test covers its signed URLs).
  it('logs `request failed` with the path of a route that threw, and no query value', async () => {
    const sink = lineSink();
    const logger = createLogger({ level: 'debug', format: 'json', destination: sink.stream });
    const dir = mkdtempSync(join(tmpdir(), 'gantry-logs-'));
    dirs.push(dir);
    const g = await startGantry({ env: {}, logger, config: { port: 0, host: '127.0.0.1', dataDir: dir, adminKey: 'logs-test-admin-key', images: { ...loadConfig({}).images, workers: false } } });
    g.gateway.routes.add({
      family: 'test',
      method: 'GET',
      path: '/faulty/{job}',
      auth: 'public',
      handle: async () => {
        throw new Error('the route broke');
      },
    });
    let answer;
    try {
      answer = await call(g.url, 'GET', '/faulty/j-42?token=tok-secret-1&sig=sig-secret-2', { headers: { 'x-request-id': 'fault-1' } });
    } finally {
      await g.close();
    }
    expect(answer.status).toBe(500);
    expect(answer.json).toEqual({ error: 'Internal server error', code: 'INTERNAL' });
    const failed = sink.lines.map((l) => JSON.parse(l) as Record<string, unknown>).find((r) => r.msg === 'request failed');
    expect(failed).toMatchObject({ requestId: 'fault-1', route: '/faulty/{job}', path: '/faulty/j-42' });
    expect(sink.lines.join('\n')).not.toMatch(/tok-secret-1|sig-secret-2/);
  });
});

describe('log format', () => {
  it('JSON unless stdout is a terminal; GANTRY_LOG_FORMAT overrides; a bad value is refused', () => {
    expect(logFormatFrom({}, false)).toBe('json');
    expect(logFormatFrom({}, true)).toBe('pretty');
    expect(logFormatFrom({ GANTRY_LOG_FORMAT: 'auto' }, true)).toBe('pretty');
    expect(logFormatFrom({ GANTRY_LOG_FORMAT: 'json' }, true)).toBe('json');
    expect(logFormatFrom({ GANTRY_LOG_FORMAT: 'pretty' }, false)).toBe('pretty');
    expect(() => logFormatFrom({ GANTRY_LOG_FORMAT: 'xml' }, false)).toThrow(/GANTRY_LOG_FORMAT="xml"/);
  });

  it('pretty lines are readable and keep the fields; JSON lines parse', () => {
    const pretty = lineSink();
    createLogger({ level: 'info', format: 'pretty', destination: pretty.stream }).info({ requestId: 'r-1', jobId: 'j-9' }, 'job finished');
    const text = pretty.lines.join('\n');
    expect(text).toMatch(/INFO.*job finished/);
    expect(text).toContain('requestId: "r-1"');
    expect(() => JSON.parse(pretty.lines[0]!) as unknown).toThrow();
    const json = lineSink();
    createLogger({ level: 'info', format: 'json', destination: json.stream }).info({ requestId: 'r-2' }, 'hello');
    expect(JSON.parse(json.lines[0]!)).toMatchObject({ level: 30, msg: 'hello', requestId: 'r-2', service: 'gantry' });
  });
});

describe('readiness', () => {
  it('is ready while the store answers, and not once it cannot be read or the gateway closes', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'gantry-ready-'));
    dirs.push(dir);
    const logger = pino({ level: 'silent' });
    const { store } = openStore(loadConfig({}, { dataDir: dir }), {}, logger);
    await store.migrate();
    const readiness = createReadiness({ store, logger });
    expect(await readiness.check()).toEqual({ ready: true, checks: { migrations: 'applied', store: 'reachable', shutdown: 'no' } });
    await store.close();
    expect(await readiness.check()).toMatchObject({ ready: false, checks: { store: 'unreachable' } });
    readiness.closing();
    expect(await readiness.check()).toMatchObject({ ready: false, checks: { shutdown: 'in progress' } });
  });
});
