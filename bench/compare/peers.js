/**
 * The peers as systems under comparison, each an in-process library in the bench process
 * (no HTTP hop, unlike Gantry): BullMQ on the machine's Redis, pg-boss and graphile-worker on
 * a fresh PostgreSQL database each. Same interface as bench/compare/gantry.js.
 *
 * "runsync" for a peer is submit + wait until the job's handler has finished in this process
 * (a promise per job id): the peers have no synchronous-run call a remote client could use.
 */
import { freshDatabase, REDIS_URL, sleep } from './lib.js';
import { QUEUES } from './gantry.js';

/** Promise per job id, resolved when a worker of this process finishes that job. */
function completionWaiters() {
  const waiters = new Map();
  const early = new Set();
  return {
    done(id) {
      const key = String(id);
      const w = waiters.get(key);
      if (w) {
        waiters.delete(key);
        w();
      } else early.add(key);
    },
    wait(id) {
      const key = String(id);
      if (early.delete(key)) return Promise.resolve();
      return new Promise((r) => waiters.set(key, r));
    },
  };
}

let redisRun = 0;

/** BullMQ 5+/6 on Redis: Queue.add / Worker(concurrency); no batch take outside BullMQ Pro. */
export function bullmqSystem() {
  const sys = { name: 'bullmq', label: 'BullMQ, Redis (in-process)', inProcess: true, supportsBatch: false, pid: process.pid };
  const prefix = `cmp${process.pid}r${++redisRun}`;
  const queues = new Map();
  let mod;
  let connection;
  const waiters = completionWaiters();
  sys.start = async () => {
    mod = await import('bullmq');
    const url = new URL(REDIS_URL);
    connection = { host: url.hostname, port: Number(url.port || 6379), maxRetriesPerRequest: null };
    for (const q of QUEUES) queues.set(q, new mod.Queue(q, { connection, prefix }));
    await Promise.all([...queues.values()].map((q) => q.waitUntilReady()));
  };
  sys.stop = async () => {
    for (const q of queues.values()) {
      await q.obliterate({ force: true }).catch(() => {});
      await q.close();
    }
  };
  sys.submit = async (queue, i) => (await queues.get(queue).add('j', { n: i, prompt: 'a small job' })).id;
  sys.status = async (queue, id) => Boolean(await mod.Job.fromId(queues.get(queue), id));
  sys.fill = async (queue, n, onProgress) => {
    for (let i = 0; i < n; i += 1000) {
      const chunk = Array.from({ length: Math.min(1000, n - i) }, (_, k) => ({ name: 'j', data: { n: i + k, prompt: 'a small job' } }));
      await queues.get(queue).addBulk(chunk);
      if ((i + 1000) % 5000 === 0) onProgress?.(i + 1000);
    }
  };
  sys.runsync = async (queue, i) => {
    const id = await sys.submit(queue, i);
    await waiters.wait(id);
    return true;
  };
  sys.workers = (queue, { concurrency, onDone }) => {
    const worker = new mod.Worker(queue, async (job) => ({ n: job.data.n }), { connection, prefix, concurrency });
    worker.on('completed', (job) => {
      onDone(1);
      waiters.done(job.id);
    });
    worker.on('error', (err) => (sys.lastWorkerError = String(err)));
    return { stop: () => worker.close() };
  };
  return sys;
}

/**
 * pg-boss 10: send / fetch / complete. Workers are fetch+complete loops (10 ms pause when
 * empty) rather than boss.work(), whose loop waits out its polling interval (≥ 0.5 s) after
 * every fetch: the loops are the fastest way pg-boss offers to take jobs.
 */
export function pgbossSystem() {
  const sys = { name: 'pg-boss', label: 'pg-boss, PostgreSQL (in-process)', inProcess: true, supportsBatch: true, pid: process.pid };
  let boss;
  let db;
  const waiters = completionWaiters();
  sys.start = async () => {
    const { default: PgBoss } = await import('pg-boss');
    db = await freshDatabase('pgboss');
    boss = new PgBoss({ connectionString: db.url, max: 10, supervise: false, schedule: false, migrate: true });
    boss.on('error', (err) => (sys.lastWorkerError = String(err)));
    await boss.start();
    for (const q of QUEUES) await boss.createQueue(q);
  };
  sys.stop = async () => {
    await boss?.stop({ graceful: false, wait: true, timeout: 5000 }).catch(() => {});
    await db?.drop();
  };
  sys.submit = (queue, i) => boss.send(queue, { n: i, prompt: 'a small job' });
  sys.status = async (queue, id) => Boolean(await boss.getJobById(queue, id));
  sys.fill = async (queue, n, onProgress) => {
    for (let i = 0; i < n; i += 1000) {
      const chunk = Array.from({ length: Math.min(1000, n - i) }, (_, k) => ({ name: queue, data: { n: i + k, prompt: 'a small job' } }));
      await boss.insert(chunk);
      if ((i + 1000) % 5000 === 0) onProgress?.(i + 1000);
    }
  };
  sys.runsync = async (queue, i) => {
    const id = await sys.submit(queue, i);
    await waiters.wait(id);
    return true;
  };
  sys.workers = (queue, { batch, concurrency, onDone }) => {
    let working = true;
    const loop = async () => {
      while (working) {
        try {
          const jobs = await boss.fetch(queue, { batchSize: batch });
          if (!jobs || jobs.length === 0) {
            await sleep(10);
            continue;
          }
          await boss.complete(queue, jobs.map((j) => j.id));
          onDone(jobs.length);
          for (const j of jobs) waiters.done(j.id);
        } catch (err) {
          sys.lastWorkerError = String(err);
          await sleep(10);
        }
      }
    };
    const loops = Array.from({ length: concurrency }, loop);
    return {
      async stop() {
        working = false;
        await Promise.all(loops);
      },
    };
  };
  return sys;
}

/** graphile-worker: addJob / run({concurrency}); batch take = its localQueue (size = batch). */
export function graphileSystem() {
  // batchConcurrency: its concurrency is handlers in parallel; the batch is the shared localQueue.
  const sys = { name: 'graphile-worker', label: 'graphile-worker, PostgreSQL (in-process)', inProcess: true, supportsBatch: true, batchConcurrency: 32, pid: process.pid };
  let mod;
  let utils;
  let db;
  let pool;
  const waiters = completionWaiters();
  sys.start = async () => {
    mod = await import('graphile-worker');
    const { default: pg } = await import('pg');
    db = await freshDatabase('graphile');
    utils = await mod.makeWorkerUtils({ connectionString: db.url });
    await utils.migrate();
    pool = new pg.Pool({ connectionString: db.url, max: 10 });
  };
  sys.stop = async () => {
    await utils?.release();
    await pool?.end();
    await db?.drop();
  };
  sys.submit = async (queue, i) => (await utils.addJob(queue, { n: i, prompt: 'a small job' })).id;
  // No status API: a primary-key read of its jobs table, the way an application would look.
  sys.status = async (_queue, id) => (await pool.query('SELECT id, task_id, attempts, last_error, locked_at FROM graphile_worker._private_jobs WHERE id = $1', [id])).rowCount === 1;
  sys.fill = async (queue, n, onProgress) => {
    for (let i = 0; i < n; i += 1000) {
      const chunk = Array.from({ length: Math.min(1000, n - i) }, (_, k) => ({ identifier: queue, payload: { n: i + k, prompt: 'a small job' } }));
      await utils.addJobs(chunk);
      if ((i + 1000) % 5000 === 0) onProgress?.(i + 1000);
    }
  };
  sys.runsync = async (queue, i) => {
    const id = await sys.submit(queue, i);
    await waiters.wait(id);
    return true;
  };
  sys.workers = (queue, { batch, concurrency, onDone }) => {
    const started = mod.run({
      connectionString: db.url,
      concurrency,
      noHandleSignals: true,
      pollInterval: 1000,
      logger: new mod.Logger(() => () => {}),
      preset: batch > 1 ? { worker: { localQueue: { size: batch } } } : undefined,
      taskList: {
        [queue]: async (payload, helpers) => {
          onDone(1);
          waiters.done(helpers.job.id);
          return { n: payload.n };
        },
      },
    });
    return {
      async stop() {
        const runner = await started;
        await runner.stop();
      },
    };
  };
  return sys;
}
