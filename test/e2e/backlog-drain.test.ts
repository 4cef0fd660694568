import { statSync } from 'node:fs';
import http from 'node:http';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { eventually, startTestGantry, type TestBackend, type TestGantry } from '../helpers/gantry.js';

/**
 * Issue 15: a backlog drained by several batch-taking workers over real HTTP (in-test clients on
 * real sockets, as the worker protocol does: job-take-batch, then one job-done per job).
 *
 * CI variant: 6,000 jobs per backend, with GANTRY_WORKER_LOST_MS at 3 s so the drain lasts longer
 * than it (before the fix, every worker was declared lost 3 s after its first take); ~25 s per
 * backend at load 13. Soak variant (GANTRY_SOAK=1): 100,000 jobs with the default 30 s; it passed
 * in 315 s on SQLite and 291 s on PostgreSQL on the shared 2-core VM (load 10-13), too long for
 * CI there (bench/backlog.js and docs/benchmarks.md have the rates).
 */
const SOAK = process.env.GANTRY_SOAK === '1';
const JOBS = SOAK ? 100_000 : 6_000;
const WAL_LIMIT_MB = 1;
/**
 * The soak's bound on the WAL's peak: 100,000 jobs without a checkpoint write about 1.1 GB of WAL
 * (6,000 write 66 MB). The short run asserts no peak: how far the WAL grows between two steps of
 * a starved checkpointer thread is a matter of machine speed (the peak reached 42 MB in two of
 * four full-suite runs on 2 busy cores); it asserts the mechanism instead.
 */
const SOAK_WAL_BOUND = 64 * 1024 * 1024;
/** Growth of this process's RSS (gateway and clients) allowed from queued to drained. */
const RSS_GROWTH_BOUND = 150 * 1024 * 1024;

/** One connection pool per client, as separate worker processes have. */
const agents = new Map<string, http.Agent>();
const agentOf = (client: string): http.Agent => {
  let agent = agents.get(client);
  if (!agent) agents.set(client, (agent = new http.Agent({ keepAlive: true, maxSockets: 8 })));
  return agent;
};

interface Answer {
  status: number;
  text: string;
}

function request(base: string, method: string, path: string, auth: string, body?: unknown, client = 'client'): Promise<Answer> {
  const url = new URL(path, base);
  const data = body === undefined ? undefined : JSON.stringify(body);
  return new Promise((resolve, reject) => {
    const headers: Record<string, string | number> = { authorization: auth };
    if (data !== undefined) Object.assign(headers, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(data) });
    const req = http.request({ agent: agentOf(client), method, hostname: url.hostname, port: url.port, path: url.pathname + url.search, headers }, (res) => {
      let text = '';
      res.setEncoding('utf8');
      res.on('data', (chunk: string) => (text += chunk));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, text }));
    });
    req.on('error', reject);
    if (data !== undefined) req.write(data);
    req.end();
  });
}

/** Submits `n` jobs to `endpoint`, 32 requests in flight; returns their ids. */
async function submit(g: TestGantry, endpoint: string, n: number): Promise<string[]> {
  const ids: string[] = [];
  let next = 0;
  await Promise.all(
    Array.from({ length: 32 }, async () => {
      while (next < n) {
        const i = next++;
        const res = await request(g.url, 'POST', `/v2/${endpoint}/run`, `Bearer ${g.adminKey}`, { input: { i } });
        expect(res.status).toBe(200);
        ids.push((JSON.parse(res.text) as { id: string }).id);
      }
    }),
  );
  return ids;
}

/** What the workers saw: how often each job was handed out, and the job-done answers not accepted. */
interface Drain {
  handedOut: Map<string, number>;
  refused: string[];
  done: number;
  /** The batch a worker that stopped kept without results. */
  kept: string[];
}

/**
 * One worker: takes batches and posts a result for each job, until `drain.done` reaches `total`
 * or `stopAfter` batches (a worker that stops: it keeps the last batch without a result).
 */
async function work(g: TestGantry, key: string, endpoint: string, workerId: string, total: number, drain: Drain, stopAfter = Infinity): Promise<void> {
  for (let batches = 0; drain.done < total; batches++) {
    const res = await request(g.url, 'GET', `/v2/${endpoint}/job-take-batch/${workerId}?batch_size=50&job_in_progress=0`, key, undefined, workerId);
    if (res.status !== 200 || res.text === '') continue;
    const parsed = JSON.parse(res.text) as { id: string } | { id: string }[];
    const jobs = Array.isArray(parsed) ? parsed : [parsed];
    for (const job of jobs) {
      drain.handedOut.set(job.id, (drain.handedOut.get(job.id) ?? 0) + 1);
    }
    if (batches + 1 >= stopAfter) {
      drain.kept = jobs.map((job) => job.id);
      return;
    }
    const answers = await Promise.all(
      jobs.map((job) => request(g.url, 'POST', `/v2/${endpoint}/job-done/${workerId}/${job.id}?isStream=false`, key, { output: job.id }, workerId)),
    );
    for (const a of answers) if (!a.text.includes('"accepted":true')) drain.refused.push(`${a.status} ${a.text.slice(0, 120)}`);
    drain.done += jobs.length;
  }
}

async function health(g: TestGantry, endpoint: string): Promise<{ jobs: Record<string, number> }> {
  return JSON.parse((await request(g.url, 'GET', `/v2/${endpoint}/health`, `Bearer ${g.adminKey}`)).text) as { jobs: Record<string, number> };
}

const newDrain = (): Drain => ({ handedOut: new Map(), refused: [], done: 0, kept: [] });

describe.each<TestBackend>(['sqlite', 'postgres'])('backlog drain on %s (issue 15)', (backend) => {
  let g: TestGantry | undefined;
  afterEach(async () => {
    await g?.close();
    g = undefined;
  });

  it(`drains ${JOBS} jobs with 4 batch-taking workers: none handed out twice, no result refused, each COMPLETED once, WAL and RSS bounded`, async () => {
    g = await startTestGantry(
      { queueLimitFactor: 100_000, jobTakeWaitMs: 1_000, workerLostMs: SOAK ? 30_000 : 3_000, reaperIntervalMs: 100, sqliteWalLimitMb: WAL_LIMIT_MB },
      { backend },
    );
    await g.createEndpoint('bl', { workersMax: 1000 });
    const key = await g.createKey(['worker']);
    const wal = join(g.dataDir, 'gantry.db-wal');
    const walSize = (): number => (backend === 'sqlite' ? statSync(wal).size : 0);
    let walPeak = 0;
    let walLast = 0;
    let walShrinks = 0; // times the WAL was found smaller than the sample before: a TRUNCATE ran
    const sampler = setInterval(() => {
      const size = walSize();
      if (size < walLast) walShrinks++;
      walLast = size;
      walPeak = Math.max(walPeak, size);
    }, 50);
    try {
      const ids = await submit(g, 'bl', JOBS);
      const rssQueued = process.memoryUsage().rss;
      const drain = newDrain();
      await Promise.all([1, 2, 3, 4].map((w) => work(g as TestGantry, key, 'bl', `bw${w}`, JOBS, drain)));
      const rssDrained = process.memoryUsage().rss;

      expect(drain.refused).toEqual([]);
      expect([...drain.handedOut.entries()].filter(([, n]) => n > 1)).toEqual([]);
      expect(drain.handedOut.size).toBe(JOBS);
      expect(new Set(ids).size).toBe(JOBS);
      expect((await health(g, 'bl')).jobs).toMatchObject({ inQueue: 0, inProgress: 0, completed: JOBS, failed: 0 });
      expect(rssDrained - rssQueued).toBeLessThan(RSS_GROWTH_BOUND);
      if (backend === 'sqlite') {
        walPeak = Math.max(walPeak, walSize());
        // The checkpointer truncated the WAL while jobs were still being written, not only at the end.
        expect(walShrinks).toBeGreaterThan(0);
        if (SOAK) expect(walPeak).toBeLessThan(SOAK_WAL_BOUND);
        // After the drain the checkpointer brings it back under its limit.
        await eventually(async () => (walSize() <= WAL_LIMIT_MB * 1024 * 1024 ? true : undefined), 10_000, 'WAL under its limit');
      }
    } finally {
      clearInterval(sampler);
    }
  }, SOAK ? 1_800_000 : 300_000);

  it('with GANTRY_WORKER_LOST_MS at its minimum, requeues only the jobs of a worker that stopped mid-drain', async () => {
    g = await startTestGantry({ queueLimitFactor: 100_000, jobTakeWaitMs: 1_000, workerLostMs: 1_000, reaperIntervalMs: 100 }, { backend });
    await g.createEndpoint('bl', { workersMax: 1000 });
    const key = await g.createKey(['worker']);
    const total = Math.min(JOBS, 3_000);
    await submit(g, 'bl', total);
    const drain = newDrain();
    // bw4 takes three batches, posts results for two and stops: the third is held by a silent worker.
    await Promise.all([
      ...[1, 2, 3].map((w) => work(g as TestGantry, key, 'bl', `bw${w}`, total, drain)),
      work(g, key, 'bl', 'bw4', total, drain, 3),
    ]);
    const kept = drain.kept;
    expect(kept.length).toBeGreaterThan(0);

    expect(drain.refused).toEqual([]);
    const twice = [...drain.handedOut.entries()].filter(([, n]) => n > 1).map(([id]) => id);
    expect(twice.sort()).toEqual([...kept].sort());
    expect(drain.handedOut.get(kept[0] as string)).toBe(2);
    expect((await health(g, 'bl')).jobs).toMatchObject({ inQueue: 0, inProgress: 0, completed: total, failed: 0 });
  }, 300_000);
});
