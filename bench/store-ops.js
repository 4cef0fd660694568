#!/usr/bin/env node
/**
 * CPU per job of the SQLite store's hot operations, in this process (no HTTP): `insertJob`,
 * `claimJobs`, rendering each claimed job's job-take answer, and `finishJob`, over 20,000 jobs
 * with small inputs in batches of 100. CPU time (process.cpuUsage) is less exposed to a loaded
 * machine than requests per second: use it to size a change of a few µs per job, running the
 * built tree before and after alternately (docs/benchmarks.md).
 *
 * usage: npm run build && node bench/store-ops.js [ROOT]   (ROOT: a built checkout, default .)
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { pathToFileURL } from 'node:url';

const root = resolve(process.argv[2] ?? '.');
const load = (path) => import(pathToFileURL(join(root, 'dist/src', path)).href);
const { createSqliteStore } = await load('store/sqlite/sqlite-store.js');
const { initialJob } = await load('jobs/transitions.js');
const { renderTakenJob } = await load('jobs/job-view.js');

const BATCHES = 200;
const BATCH = 100;
const dir = mkdtempSync(join(tmpdir(), 'gantry-store-ops-'));
const store = createSqliteStore({ file: join(dir, 'gantry.db') });
await store.migrate();
const t0 = Date.now();
await store.createEndpoint({
  id: 'ep', name: 'ep', workersMin: 0, workersMax: 3, idleTimeout: 5, executionTimeoutMs: 600_000, scalerType: 'QUEUE_DELAY',
  scalerValue: 4, maxAttempts: 3, workerJson: '{}', webhookSecret: null, rateLimitsJson: null, priority: 50, preemptible: false,
  flashboot: false, shareWeight: 1, priceUnitsPerSecond: null, createdAt: t0, updatedAt: t0,
});
const cpu = () => {
  const u = process.cpuUsage();
  return u.user + u.system;
};
const spent = { insert: 0, claim: 0, render: 0, finish: 0 };
let n = 0;
for (let b = 0; b < BATCHES; b++) {
  const jobs = Array.from({ length: BATCH }, () => initialJob({
    id: `job-${++n}`, endpointId: 'ep', inputBytes: 32, webhook: null, s3Config: null, executionTimeoutMs: 600_000, lowPriority: false,
    ttlMs: 86_400_000, retentionMs: 1_800_000, maxAttempts: 3, sync: false, keyId: null, now: t0 + n,
  }));
  let at = cpu();
  await Promise.all(jobs.map((job, i) => store.insertJob({ job, inputJson: `{"prompt":"a cat ${i}","steps":20}` })));
  spent.insert += cpu() - at;
  at = cpu();
  const claimed = await store.claimJobs({ endpointId: 'ep', workerId: 'w1', limit: BATCH, now: t0 + n + 1 });
  spent.claim += cpu() - at;
  at = cpu();
  for (const job of claimed) renderTakenJob(job, null, null);
  spent.render += cpu() - at;
  at = cpu();
  await Promise.all(claimed.map((job) => store.finishJob({ id: job.id, workerId: 'w1', status: 'COMPLETED', outputJson: '{"ok":true}', error: null, now: t0 + n + 2 })));
  spent.finish += cpu() - at;
}
await store.close();
rmSync(dir, { recursive: true, force: true });
console.log(`${root}: ${Object.entries(spent).map(([op, us]) => `${op} ${(us / n).toFixed(2)}`).join(' | ')} µs of CPU per job (${n} jobs)`);
