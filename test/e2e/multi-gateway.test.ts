// Several gateway processes (`gantry serve`) on one PostgreSQL schema, clients and workers
// spread over them (docs/postgres.md): hand-off, waits, cancels and streams cross gateways;
// every job completes exactly once; a gateway killed with SIGKILL loses no accepted job.
import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { eventually } from '../helpers/gantry.js';
import { newEndpoint as createEndpoint, newKey, uniqueId, workerListed } from '../helpers/jobs.js';
import { createTestSchema, type TestSchema } from '../helpers/postgres.js';
import { startGateway, type ServeProcess } from '../helpers/serve-process.js';
import { call, type Json } from '../http/http-helpers.js';

const ADMIN_KEY = `multi-admin-${randomBytes(8).toString('hex')}`;
const SECRET_KEY = randomBytes(32).toString('base64');

interface Gateway extends ServeProcess {
  name: string;
  /** What its last log line with a `leader` field said. */
  leader: boolean;
}

let schema: TestSchema;
const gateways: Gateway[] = [];
let runKey: string;
let workerKey: string;

async function startNamed(name: string): Promise<Gateway> {
  const serve = await startGateway({
    adminKey: ADMIN_KEY,
    env: {
      DATABASE_URL: schema.url,
      GANTRY_SECRET_KEY: SECRET_KEY,
      GANTRY_JOB_TAKE_WAIT_MS: '1000',
      GANTRY_WORKER_LOST_MS: '3000',
      GANTRY_REAPER_INTERVAL_MS: '250',
    },
  });
  const gw: Gateway = Object.assign(serve, { name, leader: false });
  const follow = (line: Json): void => {
    if (typeof line.leader === 'boolean') gw.leader = line.leader;
  };
  serve.logs().forEach(follow);
  serve.onLog(follow);
  return gw;
}

const v2 = (gw: Gateway, endpointId: string, method: string, path: string, body?: unknown) =>
  call(gw.url, method, `/v2/${endpointId}/${path}`, { key: runKey, body });
const worker = (gw: Gateway, endpointId: string, method: string, path: string, body?: unknown) =>
  call(gw.url, method, `/v2/${endpointId}/${path}`, { key: workerKey, rawAuth: true, body, contentType: body === undefined ? null : 'application/json' });

const newEndpoint = (): Promise<string> => createEndpoint(gw(0), {}, 'multi');

const gw = (i: number): Gateway => gateways[i] as Gateway;


beforeAll(async () => {
  schema = await createTestSchema('multi');
  // Started together: the migration lock makes that safe. One that fails to start leaves the
  // others to the test kit, which kills them with this file.
  gateways.push(...(await Promise.all(['a', 'b', 'c'].map(startNamed))));
  runKey = await newKey(gw(0), ['run']);
  workerKey = await newKey(gw(1), ['worker']);
  await eventually(async () => (gateways.filter((g) => g.leader).length === 1 ? true : undefined), 10_000, 'one leader');
}, 180_000);

afterAll(async () => {
  for (const g of gateways) await g.stop();
  await schema?.drop();
}, 60_000);

describe('several gateways on one PostgreSQL database', () => {
  it('exactly one gateway is the leader', () => {
    expect(gateways.filter((g) => g.leader)).toHaveLength(1);
  });

  // That the hand-off uses NOTIFY and not the 1 s poll is shown in-process (postgres-notify.test.ts).
  it('a job submitted on A is handed to a worker long-polling B', async () => {
    const ep = await newEndpoint();
    for (let i = 0; i < 5; i++) {
      const workerId = `w-hand-off-${i}`;
      const take = worker(gw(1), ep, 'GET', `job-take/${workerId}?job_in_progress=0`);
      await workerListed(gw(1), ep, workerId); // its long-poll has reached B
      const run = await v2(gw(0), ep, 'POST', 'run', { input: { i } });
      let taken = await take;
      if (taken.status === 204) taken = await worker(gw(1), ep, 'GET', `job-take/${workerId}?job_in_progress=0`); // the 1 s poll ended first
      expect(taken.status).toBe(200);
      expect(taken.json.id).toBe(run.json.id);
      await worker(gw(1), ep, 'POST', `job-done/${workerId}/${run.json.id as string}`, { output: i });
    }
  });

  it('runsync on A returns when a worker on B posts the result; status-sync on C too', async () => {
    const ep = await newEndpoint();
    const sync = v2(gw(0), ep, 'POST', 'runsync?wait=10000', { input: { n: 7 } });
    const job = await eventually(async () => {
      const r = await worker(gw(1), ep, 'GET', 'job-take/w-sync?job_in_progress=0');
      return r.status === 200 ? r.json : undefined;
    });
    const statusSync = v2(gw(2), ep, 'GET', `status-sync/${job.id as string}?wait=10000`);
    await worker(gw(1), ep, 'POST', `job-done/w-sync/${job.id as string}`, { output: { doubled: 14 } });
    const [a, c] = await Promise.all([sync, statusSync]);
    expect(a.json).toMatchObject({ id: job.id, status: 'COMPLETED', output: { doubled: 14 } });
    expect(c.json).toMatchObject({ id: job.id, status: 'COMPLETED', output: { doubled: 14 } });
  });

  it('cancel on A stops the job running under a worker attached to C', async () => {
    const ep = await newEndpoint();
    const run = await v2(gw(1), ep, 'POST', 'run', { input: {} });
    const taken = await eventually(async () => {
      const r = await worker(gw(2), ep, 'GET', 'job-take/w-cancel?job_in_progress=0');
      return r.status === 200 ? r.json : undefined;
    });
    expect(taken.id).toBe(run.json.id);
    const stop = worker(gw(2), ep, 'GET', 'job-stop/w-cancel');
    const cancelled = await v2(gw(0), ep, 'POST', `cancel/${taken.id as string}`);
    expect(cancelled.json.status).toBe('CANCELLED');
    // C keeps the stop list until a poll takes it: the open poll, or the next one if that one ended empty.
    let stopped = await stop;
    if (stopped.status === 204) stopped = await worker(gw(2), ep, 'GET', 'job-stop/w-cancel');
    expect(stopped.status).toBe(200);
    expect(stopped.json.jobsToStop).toEqual([taken.id]);
    // The late result changes nothing.
    const late = await worker(gw(2), ep, 'POST', `job-done/w-cancel/${taken.id as string}`, { output: 'late' });
    expect(late.json).toMatchObject({ status: 'CANCELLED', accepted: false });
  });

  it('stream chunks posted on B are read on A, then the stream ends with the job', async () => {
    const ep = await newEndpoint();
    const run = await v2(gw(0), ep, 'POST', 'run', { input: {} });
    const id = run.json.id as string;
    await eventually(async () => ((await worker(gw(1), ep, 'GET', 'job-take/w-stream?job_in_progress=0')).status === 200 ? true : undefined));
    const first = v2(gw(0), ep, 'GET', `stream/${id}?wait=5000`);
    await worker(gw(1), ep, 'POST', `job-stream/w-stream/${id}?isStream=true`, [{ output: 'one' }, { output: 'two' }]);
    let got = await first;
    if ((got.json.stream as Json[]).length === 0) got = await v2(gw(0), ep, 'GET', `stream/${id}?wait=5000`); // read before the chunks landed
    expect((got.json.stream as Json[]).map((c) => c.output)).toEqual(['one', 'two']);
    await worker(gw(1), ep, 'POST', `job-stream/w-stream/${id}?isStream=true`, { output: 'three' });
    await worker(gw(1), ep, 'POST', `job-done/w-stream/${id}`, { output: 'done' });
    const rest = await v2(gw(2), ep, 'GET', `stream/${id}`);
    expect(rest.json.status).toBe('COMPLETED');
    expect((rest.json.stream as Json[]).map((c) => c.output)).toEqual(['three']);
  });

  it('600 jobs from clients on every gateway, 6 workers spread over them: each completes exactly once', async () => {
    const ep = await newEndpoint();
    const pool = createWorkerPool(ep, [0, 0, 1, 1, 2, 2]);
    const ids = await submitMany(ep, 600, () => true);
    await pool.untilCompleted(ids, 30_000);
    await pool.stop();
    pool.expectExactlyOnce(ids);
    for (const id of ids.filter((_, i) => i % 20 === 0)) {
      const r = await v2(gw(1), ep, 'GET', `status/${id}`);
      expect(r.json.status).toBe('COMPLETED');
    }
  }, 60_000);

  // Last: it kills the leader.
  it('kill -9 of the leader while jobs flow: every accepted job ends, none twice, jobs held there are not lost', async () => {
    const ep = await newEndpoint();
    const victimIndex = gateways.findIndex((g) => g.leader);
    const victim = gw(victimIndex);
    const others = gateways.filter((g) => g !== victim);
    // Two workers per gateway; those on the victim fail over to another gateway when it dies,
    // as behind a load balancer (under a new worker id, as a restarted worker would).
    // One worker on the victim that takes jobs and dies with it, holding them: parked first in
    // the victim's take queue.
    const held: string[] = [];
    const grabbing = worker(victim, ep, 'GET', 'job-take-batch/w-doomed?batch_size=5&job_in_progress=0');
    await workerListed(victim, ep, 'w-doomed');
    const pool = createWorkerPool(ep, [0, 0, 1, 1, 2, 2]);
    let killed = false;
    const submitting = submitMany(ep, 400, (i) => {
      if (i === 150 && !killed) {
        killed = true;
        victim.proc.kill('SIGKILL');
      }
      return true;
    });
    const grab = await grabbing;
    if (grab.status === 200) held.push(...(grab.json as unknown as Json[]).map((j) => j.id as string));
    const ids = await submitting;
    expect(killed).toBe(true);
    expect(held.length).toBeGreaterThan(0);
    // A new leader within seconds (its reaper gives the dead worker's jobs back to the queue).
    await eventually(async () => (others.some((g) => g.leader) ? true : undefined), 10_000, 'a new leader');
    await pool.untilCompleted(ids, 40_000);
    await pool.stop();
    pool.expectExactlyOnce(ids);
    for (const id of held) expect(ids).toContain(id);
    for (const id of held) {
      const r = await v2(others[0] as Gateway, ep, 'GET', `status/${id}`);
      expect(r.json.status).toBe('COMPLETED');
    }
  }, 90_000);
});

/** Submits `n` jobs round-robin over the gateways; returns the ids of those accepted (200). */
async function submitMany(ep: string, n: number, before: (i: number) => boolean): Promise<string[]> {
  const accepted: string[] = [];
  let next = 0;
  const client = async (): Promise<void> => {
    for (;;) {
      const i = next++;
      if (i >= n) return;
      before(i);
      const g = gw(i % gateways.length);
      try {
        const r = await v2(g, ep, 'POST', 'run', { input: { i } });
        if (r.status === 200) accepted.push(r.json.id as string);
      } catch {
        // the gateway is gone: this submission was not accepted
      }
    }
  };
  await Promise.all(Array.from({ length: 8 }, client));
  return accepted;
}

/** Workers looping take-batch → job-done on given gateways, failing over when one dies. */
function createWorkerPool(ep: string, homes: number[]) {
  const accepted = new Map<string, number>();
  let stopped = false;
  const loops = homes.map(async (home, n) => {
    let at = home;
    let id = uniqueId(`w${n}`);
    const failover = (): void => {
      at = (at + 1) % gateways.length;
      id = uniqueId(`w${n}`);
    };
    while (!stopped) {
      let batch: Json[];
      try {
        const r = await worker(gw(at), ep, 'GET', `job-take-batch/${id}?batch_size=4&job_in_progress=0`);
        if (r.status !== 200) continue;
        batch = r.json as unknown as Json[];
      } catch {
        failover();
        continue;
      }
      const takenAs = id;
      for (const job of batch) {
        for (let attempt = 0; attempt < gateways.length; attempt++) {
          try {
            const r = await worker(gw(at), ep, 'POST', `job-done/${takenAs}/${job.id as string}`, { output: job.input });
            // A resend after the gateway died between committing the result and answering is
            // answered "already COMPLETED" (accepted: false): the first post is the one that counted.
            const resentAfterCommit = attempt > 0 && r.json.accepted === false && r.json.status === 'COMPLETED';
            if (r.json.accepted === true || resentAfterCommit) accepted.set(job.id as string, (accepted.get(job.id as string) ?? 0) + 1);
            break;
          } catch {
            failover();
          }
        }
      }
    }
  });
  return {
    async untilCompleted(ids: string[], timeoutMs: number): Promise<void> {
      await eventually(async () => (ids.every((id) => accepted.has(id)) ? true : undefined), timeoutMs, 'every job to complete');
    },
    async stop(): Promise<void> {
      stopped = true;
      await Promise.all(loops);
    },
    expectExactlyOnce(ids: string[]): void {
      const twice = [...accepted].filter(([, n]) => n > 1);
      expect(twice).toEqual([]);
      expect(ids.filter((id) => !accepted.has(id))).toEqual([]);
      expect(new Set(ids).size).toBe(ids.length);
    },
  };
}
