#!/usr/bin/env node
/**
 * What tracing costs a job when it is on (docs/observability.md), measured in this process:
 * the gateway's tracing work for one job that is submitted, handed out and completed — the
 * submit span with the job's context, the wait and run spans, the run's traceparent rendered
 * for the worker, the result span (4 spans; a webhook delivery adds one) — and the batch
 * processor serialising them (OTLP protobuf by default) and POSTing them to a sink process. CPU time of the process (user + system) per
 * job, the same loop without tracing subtracted; median of several runs. With tracing off none
 * of this runs (no tracer, no observer): `node bench/core.js` off against the code before shows that.
 *
 * usage: npm run build && node bench/tracing-overhead.js [--jobs N] [--runs R] [--protocol http/protobuf|http/json] [--json]
 */
import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { createInterface } from 'node:readline';
import { parseArgs } from 'node:util';
import { pino } from 'pino';
import { renderTakenJob } from '../dist/src/jobs/job-view.js';
import { initialJob } from '../dist/src/jobs/transitions.js';
import { loadTracingConfig } from '../dist/src/tracing/tracing-config.js';
import { createTracing } from '../dist/src/tracing/tracing-feature.js';

const { values } = parseArgs({ options: { jobs: { type: 'string', default: '20000' }, runs: { type: 'string', default: '5' }, protocol: { type: 'string', default: 'http/protobuf' }, json: { type: 'boolean' } } });
const JOBS = Number(values.jobs);
const RUNS = Number(values.runs);

// The sink is a child process, so that receiving the spans costs this process nothing; it
// prints one line per export (its span count for OTLP/JSON, else 0) and its byte count.
const SINK = `
  const http = require('node:http');
  const server = http.createServer((req, res) => {
    const chunks = [];
    req.on('data', (c) => chunks.push(c));
    req.on('end', () => {
      const body = Buffer.concat(chunks);
      const json = req.headers['content-type'] === 'application/json';
      process.stdout.write((json ? body.toString().split('"spanId"').length - 1 : 0) + ' ' + body.length + '\\n');
      res.writeHead(200, { 'content-type': req.headers['content-type'] }).end(json ? '{}' : undefined);
    });
  });
  server.listen(0, '127.0.0.1', () => process.stdout.write('port ' + server.address().port + '\\n'));`;
const child = spawn(process.execPath, ['-e', SINK], { stdio: ['ignore', 'pipe', 'inherit'] });
let exports = 0;
let bytes = 0;
let jsonSpans = 0;
let wake = () => {};
const port = await new Promise((resolve) => {
  createInterface({ input: child.stdout }).on('line', (line) => {
    const [a, b] = line.split(' ');
    if (a === 'port') return resolve(Number(b));
    exports++;
    jsonSpans += Number(a);
    bytes += Number(b);
    wake();
  });
});
const url = `http://127.0.0.1:${port}`;

/** Resolves at the sink's next export (or after 250 ms). */
function nextExport() {
  return new Promise((resolve) => {
    const timer = setTimeout(resolve, 250);
    wake = () => {
      clearTimeout(timer);
      resolve();
    };
  });
}

function newJob(i) {
  const t = Date.now();
  return initialJob({ id: `j-${i}-${randomBytes(4).toString('hex')}`, endpointId: 'echo', inputBytes: 7, webhook: null, s3Config: null, executionTimeoutMs: 600_000, lowPriority: false, ttlMs: 86_400_000, retentionMs: 1_800_000, maxAttempts: 3, sync: false, keyId: 'k1', now: t });
}

/** One job's life as the gateway sees it, with or without the tracing calls. */
function life(i, tracing, parent) {
  const job = newJob(i);
  if (tracing) tracing.submits.begin(job, parent).end('stored');
  const t = job.createdAt;
  Object.assign(job, { status: 'IN_PROGRESS', startedAt: t + 2, workerId: 'w1', attempts: 1, inputJson: '{"n":1}' });
  if (tracing) tracing.jobs.started([job]);
  renderTakenJob(job, null, null);
  Object.assign(job, { status: 'COMPLETED', finishedAt: t + 15, outputJson: '{"n":1}' });
  if (tracing) tracing.jobs.ended(job);
}

/**
 * CPU µs per job over JOBS jobs, in steps of 100 jobs (500 spans, about one export batch),
 * each traced step followed by the wait for its export, so the exporter keeps up and no span
 * is dropped for a full queue (a gateway past that rate drops spans: OTEL_BSP_MAX_QUEUE_SIZE).
 */
async function run(traced) {
  const tracing = traced
    ? createTracing(loadTracingConfig({ OTEL_EXPORTER_OTLP_ENDPOINT: url, OTEL_EXPORTER_OTLP_PROTOCOL: values.protocol, OTEL_BSP_SCHEDULE_DELAY: '20', OTEL_BSP_MAX_EXPORT_BATCH_SIZE: '500' }), { now: Date.now, logger: pino({ level: 'silent' }) })
    : undefined;
  const parent = `00-${randomBytes(16).toString('hex')}-${randomBytes(8).toString('hex')}-01`;
  const before = process.cpuUsage();
  for (let i = 0; i < JOBS; i += 100) {
    for (let k = 0; k < 100; k++) life(i + k, tracing, parent);
    if (tracing) await nextExport();
  }
  await tracing?.shutdown(60_000);
  const used = process.cpuUsage(before);
  return (used.user + used.system) / JOBS;
}

const off = [];
const on = [];
for (let r = 0; r <= RUNS; r++) {
  const a = await run(false);
  const b = await run(true);
  if (r > 0) {
    off.push(a);
    on.push(b);
  }
}
const median = (xs) => [...xs].sort((x, y) => x - y)[Math.floor(xs.length / 2)];
const cost = on.map((b, i) => b - off[i]);
const result = { jobs: JOBS, runs: RUNS, protocol: values.protocol, cpuUsPerJobWithout: median(off), cpuUsPerJobWith: median(on), tracingCpuUsPerJob: median(cost), spansPerJob: 4, exports, bytesExported: bytes, ...(values.protocol === 'http/json' ? { spansReceived: jsonSpans, spansMade: (RUNS + 1) * JOBS * 4 } : {}) };
child.kill();
if (values.json) console.log(JSON.stringify(result, null, 2));
else {
  console.log(`tracing on, per job (${RUNS} runs of ${JOBS} jobs, ${values.protocol}, median):`);
  console.log(`  without tracing   ${result.cpuUsPerJobWithout.toFixed(1)} µs CPU`);
  console.log(`  with tracing      ${result.cpuUsPerJobWith.toFixed(1)} µs CPU (4 spans made, batched, serialised, POSTed to a sink process)`);
  console.log(`  tracing's cost    ${result.tracingCpuUsPerJob.toFixed(1)} µs CPU per job`);
  console.log(`  exported          ${exports} requests, ${(bytes / 1e6).toFixed(1)} MB${result.spansReceived === undefined ? '' : `, ${result.spansReceived} of ${result.spansMade} spans`}`);
}
