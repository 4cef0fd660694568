#!/usr/bin/env node
// PostgreSQL store: submissions and results grouped per event-loop turn (src/store/postgres/batch.ts)
// vs one statement per call, 64 concurrent callers, 6,000 jobs. usage: npm run build && node bench/pg-batching.js
// Uses DATABASE_URL or postgres://postgres@127.0.0.1:5432/test, in a schema of its own (dropped at the end).
import pg from 'pg';
import { createPostgresStore } from '../dist/src/store/postgres/postgres-store.js';
import { initialJob } from '../dist/src/jobs/transitions.js';
const server = process.env.DATABASE_URL || 'postgres://postgres@127.0.0.1:5432/test';
const schema = `gantry_measure_${process.pid}`;
const c = new pg.Client({ connectionString: server }); await c.connect();
await c.query(`CREATE SCHEMA ${schema}`);
const url = `${server}?options=${encodeURIComponent(`-c search_path=${schema}`)}`;
const store = createPostgresStore({ connectionString: url }); await store.migrate();
const N = 6000, C = 64;
const job = (id) => initialJob({ id, endpointId: 'ep', inputBytes: 2, webhook: null, s3Config: null, executionTimeoutMs: 600000, lowPriority: false, ttlMs: 86400000, retentionMs: 600000, maxAttempts: 3, sync: false, keyId: null, now: Date.now() });
// The one-statement-per-call variant uses a pool of its own on the same schema.
const single = new pg.Pool({ connectionString: url, max: 10 });
async function run(label, insert, finish) {
  let next = 0; const t0 = performance.now();
  await Promise.all(Array.from({ length: C }, async () => { for (;;) { const i = next++; if (i >= N) return; await insert(job(`${label}-${i}`)); } }));
  const t1 = performance.now();
  const claimed = await store.claimJobs({ endpointId: 'ep', workerId: 'w', limit: N, now: Date.now() });
  next = 0; const t2 = performance.now();
  await Promise.all(Array.from({ length: C }, async () => { for (;;) { const i = next++; if (i >= claimed.length) return; await finish(claimed[i].id); } }));
  const t3 = performance.now();
  console.log(`${label}: insert ${Math.round(N / ((t1 - t0) / 1000))}/s, finish ${Math.round(claimed.length / ((t3 - t2) / 1000))}/s`);
}
const fin = (id) => ({ id, workerId: 'w', status: 'COMPLETED', outputJson: '1', error: null, now: Date.now() });
await run('batched', (j) => store.insertJob({ job: j, inputJson: '{}' }), (id) => store.finishJob(fin(id)));
await run('single', (j) => single.query(`WITH ins AS (INSERT INTO jobs (id, endpoint_id, status, execution_timeout_ms, ttl_ms, retention_ms, max_attempts, created_at, queued_at, deadline_at) VALUES ($1,$2,'IN_QUEUE',$4,$5,$6,$7,$8,$8,$8::bigint+$5::bigint) RETURNING id) INSERT INTO job_inputs (job_id, input_json) SELECT id, $3 FROM ins`, [j.id, j.endpointId, '{}', j.executionTimeoutMs, j.ttlMs, j.retentionMs, j.maxAttempts, j.createdAt]),
  (id) => single.query(`UPDATE jobs SET status='COMPLETED', output_json='1', finished_at=$2, expires_at=$2::bigint+retention_ms, deadline_at=NULL, webhook_next_at=NULL WHERE id=$1 AND status='IN_PROGRESS' AND worker_id='w' RETURNING *`, [id, Date.now()]));
await store.close(); await single.end(); await c.query(`DROP SCHEMA ${schema} CASCADE`); await c.end();
