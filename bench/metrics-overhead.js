#!/usr/bin/env node
/**
 * What the metrics add to one request, measured piece by piece in this process (docs/metrics.md):
 * the observer calls a request or a job makes, the sampled store-timing wrapper, and the
 * request id every response gets. Each piece runs N times after a warm-up; the median of
 * several runs is printed in nanoseconds per call, to be set beside the gateway's CPU time
 * per request that `node bench/core.js` prints (gateway µs CPU per op).
 *
 * usage: npm run build && node bench/metrics-overhead.js [--calls N] [--runs R] [--json]
 */
import { randomBytes } from 'node:crypto';
import { IncomingMessage, ServerResponse } from 'node:http';
import { Socket } from 'node:net';
import { parseArgs } from 'node:util';
import { HttpMetrics } from '../dist/src/metrics/http-metrics.js';
import { JobMetrics } from '../dist/src/metrics/job-metrics.js';
import { StoreTiming } from '../dist/src/metrics/store-timing.js';

const { values } = parseArgs({ options: { calls: { type: 'string', default: '1000000' }, runs: { type: 'string', default: '7' }, json: { type: 'boolean' } } });
const CALLS = Number(values.calls);
const RUNS = Number(values.runs);

function job(i) {
  const t = 1_800_000_000_000 + i;
  return { id: `j${i}`, endpointId: 'echo', status: 'COMPLETED', queuedAt: t, startedAt: t + 2, finishedAt: t + 15 };
}

/** Median ns per call of `fn(i)` over RUNS runs of CALLS calls (sync), or awaited in batches (async). */
async function measure(fn, isAsync = false) {
  const per = [];
  for (let run = 0; run <= RUNS; run++) {
    const start = process.hrtime.bigint();
    if (isAsync) {
      for (let i = 0; i < CALLS; i += 1000) {
        const batch = [];
        for (let k = 0; k < 1000; k++) batch.push(fn(i + k));
        await Promise.all(batch);
      }
    } else for (let i = 0; i < CALLS; i++) fn(i);
    const ns = Number(process.hrtime.bigint() - start) / CALLS;
    if (run > 0) per.push(ns); // run 0 warms up
  }
  per.sort((a, b) => a - b);
  return per[Math.floor(per.length / 2)];
}

const http = new HttpMetrics();
const jobs = new JobMetrics();
const jobRecords = Array.from({ length: 1024 }, (_, i) => job(i));
const plainStore = { kind: 'sqlite', getJob: async () => undefined, migrate: async () => {}, close: async () => {} };
const timedStore = new StoreTiming().wrap(plainStore);
const res = new ServerResponse(new IncomingMessage(new Socket()));
const SAFE = /^[A-Za-z0-9._:-]{1,64}$/;
const PREFIX = randomBytes(6).toString('hex');
let counter = 0;

const results = {
  'request: route + status counted (HttpMetrics.answered)': await measure(() => http.answered('/v2/{endpoint}/status/{job}', 200)),
  'request: X-Request-ID made and set (prefix + counter, setHeader)': await measure(() => res.setHeader('x-request-id', `${PREFIX}-${(++counter).toString(36)}`)),
  'request: X-Request-ID checked and echoed (regex + setHeader)': await measure(() => SAFE.test('trace-42.a:b_c') && res.setHeader('x-request-id', 'trace-42.a:b_c')),
  'job: submitted': await measure((i) => jobs.submitted(jobRecords[i & 1023])),
  'job: started (delay histogram)': await measure((i) => jobs.started([jobRecords[i & 1023]])),
  'job: ended (state counter + execution histogram)': await measure((i) => jobs.ended(jobRecords[i & 1023])),
  'store call, plain (baseline)': await measure((i) => plainStore.getJob(`j${i}`), true),
  'store call, through the timing wrapper (1 in 16 timed)': await measure((i) => timedStore.getJob(`j${i}`), true),
};

if (values.json) console.log(JSON.stringify({ command: `node bench/metrics-overhead.js --calls ${CALLS} --runs ${RUNS}`, node: process.version, nsPerCall: results }, null, 2));
else {
  console.log(`ns per call, median of ${RUNS} runs of ${CALLS} calls (node ${process.version})`);
  for (const [what, ns] of Object.entries(results)) console.log(`${ns.toFixed(1).padStart(9)}  ${what}`);
}
