/**
 * Shared pieces of the peer comparison (bench/compare): a keep-alive node:http client,
 * closed-loop load, distributions, CPU and RSS readings from /proc, and throw-away
 * PostgreSQL databases.
 */
import http from 'node:http';
import net from 'node:net';
import { readFileSync } from 'node:fs';

export const HOST = '127.0.0.1';
export const PG_SERVER = process.env.BENCH_PG_URL || 'postgres://postgres@127.0.0.1:5432/test';
export const REDIS_URL = process.env.BENCH_REDIS_URL || 'redis://127.0.0.1:6379';

export const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

/** A keep-alive agent with `maxSockets` sockets. */
export function agent(maxSockets) {
  return new http.Agent({ keepAlive: true, maxSockets, maxFreeSockets: maxSockets, scheduling: 'lifo' });
}

/** One request to 127.0.0.1:port; resolves `{status, text}` whatever the status. */
export function request(port, ag, method, path, key, body) {
  return new Promise((resolvePromise, reject) => {
    const headers = key ? { authorization: `Bearer ${key}` } : {};
    let payload;
    if (body !== undefined) {
      payload = typeof body === 'string' ? body : JSON.stringify(body);
      headers['content-type'] = 'application/json';
      headers['content-length'] = Buffer.byteLength(payload);
    }
    const req = http.request({ host: HOST, port, method, path, agent: ag, headers }, (res) => {
      let text = '';
      res.setEncoding('utf8');
      res.on('data', (chunk) => (text += chunk));
      res.on('end', () => resolvePromise({ status: res.statusCode, text }));
      res.on('error', reject);
    });
    req.on('error', reject);
    if (payload !== undefined) req.end(payload);
    else req.end();
  });
}

/** A free TCP port on 127.0.0.1. */
export function freePort() {
  return new Promise((resolvePromise, reject) => {
    const server = net.createServer();
    server.once('error', reject);
    server.listen(0, HOST, () => {
      const { port } = server.address();
      server.close(() => resolvePromise(port));
    });
  });
}

function percentile(sorted, p) {
  if (sorted.length === 0) return NaN;
  return sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1))];
}

/** p50 / p99 / max (and count) of latency samples in ms. */
export function distribution(samples) {
  const s = Float64Array.from(samples).sort();
  return { count: s.length, p50: percentile(s, 50), p99: percentile(s, 99), max: s.length ? s[s.length - 1] : NaN };
}

export function median(values) {
  const v = values.filter((x) => Number.isFinite(x)).sort((a, b) => a - b);
  if (v.length === 0) return NaN;
  return v.length % 2 ? v[(v.length - 1) / 2] : (v[v.length / 2 - 1] + v[v.length / 2]) / 2;
}

// ---- /proc ---------------------------------------------------------------------------------

const TICK_MS = 10; // USER_HZ

/** CPU ms (user + system) a process has used so far; NaN if it is gone. */
export function processCpuMs(pid) {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    return (Number(fields[11]) + Number(fields[12])) * TICK_MS;
  } catch {
    return NaN;
  }
}

/** Resident set size of a process in MiB; NaN if it is gone. */
export function rssMiB(pid) {
  try {
    const status = readFileSync(`/proc/${pid}/status`, 'utf8');
    const kb = Number(/VmRSS:\s+(\d+)/.exec(status)?.[1]);
    return Math.round((kb / 1024) * 10) / 10;
  } catch {
    return NaN;
  }
}

/** The 1-minute load average and busy cores of the whole machine, as `uptime` shows it. */
export function loadAverage() {
  try {
    return readFileSync('/proc/loadavg', 'utf8').split(' ').slice(0, 3).map(Number);
  } catch {
    return [NaN, NaN, NaN];
  }
}

// ---- load ----------------------------------------------------------------------------------

/**
 * `concurrency` loops calling `op(i)` for `warmup` then `seconds` seconds (measured), or until
 * `cap` calls. Returns the measured successes per second and the errors.
 */
export async function closedLoop({ concurrency, seconds, warmup, cap = Infinity, op, onMeasureStart }) {
  let measuring = false;
  let ok = 0;
  let errors = 0;
  let started = 0;
  let firstError;
  let t0 = performance.now();
  const warmupEnd = t0 + warmup * 1000;
  let end = Infinity;
  const loop = async () => {
    for (;;) {
      const now = performance.now();
      if (!measuring && now >= warmupEnd) {
        measuring = true;
        ok = 0;
        errors = 0;
        t0 = now;
        end = now + seconds * 1000;
        onMeasureStart?.();
      }
      if (now >= end || started >= cap) return;
      started++;
      try {
        if (await op(started)) ok++;
        else errors++;
      } catch (err) {
        errors++;
        firstError ??= err;
      }
    }
  };
  await Promise.all(Array.from({ length: concurrency }, loop));
  const elapsed = (performance.now() - t0) / 1000;
  return { ok, errors, elapsed, perSecond: ok / elapsed, firstError: firstError && String(firstError).slice(0, 300) };
}

// ---- PostgreSQL ----------------------------------------------------------------------------

let dbCounter = 0;

/** Runs one statement on the server's maintenance database. */
export async function pgAdmin(sql, params) {
  const { default: pg } = await import('pg');
  const client = new pg.Client({ connectionString: PG_SERVER });
  await client.connect();
  try {
    return await client.query(sql, params);
  } finally {
    await client.end();
  }
}

/** A fresh database for one system in one run: `{url, name, drop()}`. */
export async function freshDatabase(tag) {
  const name = `cmp_${tag}_${process.pid}_${++dbCounter}`.replace(/[^a-z0-9_]/g, '_');
  await pgAdmin(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
  await pgAdmin(`CREATE DATABASE ${name}`);
  const url = new URL(PG_SERVER);
  url.pathname = `/${name}`;
  return { url: url.toString(), name, drop: () => pgAdmin(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`) };
}
