import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { emptyBuckets } from '../../src/store/minute-store.js';
import { WEBHOOK_ATTEMPTS_KEPT, type Store, type WebhookAttempt } from '../../src/store/store.js';
import { initialJob, type NewJobArgs } from '../../src/jobs/transitions.js';
import { JOB_STATUSES, type JobStatus } from '../../src/model/job-states.js';
import type { EndpointRecord, JobMeter, JobRecord, KeyRecord } from '../../src/model/records.js';

/**
 * What a backend's test hands the suite: a migrated store on a fresh, empty database, a way to
 * open another store on the same database (to check that data survives a restart), and a
 * cleanup that closes every store it opened and drops the database.
 */
export interface StoreHandle {
  store: Store;
  cleanup: () => Promise<void>;
  /**
   * Opens and migrates a second store on the same database; the suite closes the first one
   * before. Required: every backend must show that its data survives a restart.
   */
  reopen: () => Promise<Store>;
}

const T0 = 1_700_000_000_000;
const MIN = 60_000;

let serial = 0;
/** The input each newJob was made with (the record holds none), by job id: what `put` writes beside it. */
const inputs = new Map<string, string>();
/** The input of a job made here: newJob's, or `{}` for a record written by hand. */
const inputOf = (job: JobRecord): string => inputs.get(job.id) ?? '{}';

/** A job with plain defaults: endpoint `ep`, queued at T0, ttl 1 day, retention 30 min, 3 attempts; input `{"n":serial}` unless given. */
function newJob(overrides: Partial<NewJobArgs> & { inputJson?: string } = {}): JobRecord {
  serial += 1;
  const { inputJson = `{"n":${serial}}`, ...rest } = overrides;
  const id = rest.id ?? `job-${serial}`;
  inputs.set(id, inputJson);
  return initialJob({
    id,
    endpointId: 'ep',
    inputBytes: Buffer.byteLength(inputJson),
    webhook: null,
    s3Config: null,
    executionTimeoutMs: 10 * MIN,
    lowPriority: false,
    ttlMs: 24 * 60 * MIN,
    retentionMs: 30 * MIN,
    maxAttempts: 3,
    sync: false,
    keyId: null,
    now: T0,
    ...rest,
  });
}

function endpoint(id: string, overrides: Partial<EndpointRecord> = {}): EndpointRecord {
  return {
    id,
    name: `endpoint ${id}`,
    workersMin: 0,
    workersMax: 3,
    idleTimeout: 5,
    executionTimeoutMs: 600_000,
    scalerType: 'QUEUE_DELAY',
    scalerValue: 4,
    maxAttempts: 3,
    workerJson: '{"command":["python","handler.py"]}',
    webhookSecret: null,
    rateLimitsJson: null,
    priority: 50,
    preemptible: false,
    flashboot: false,
    shareWeight: 1,
    priceUnitsPerSecond: null,
    createdAt: T0,
    updatedAt: T0,
    ...overrides,
  };
}

function key(id: string, overrides: Partial<KeyRecord> = {}): KeyRecord {
  return { id, name: `key ${id}`, hash: `hash-${id}`, scopes: ['run'], endpoints: null, createdAt: T0, budgetUnits: null, budgetPeriod: null, maxConcurrentJobs: null, prefix: null, lastUsedAt: null, managed: false, ...overrides };
}

/**
 * The behaviour every Store backend must show, checked through the Store interface alone.
 * Time comes from explicit `now` values; nothing sleeps.
 *
 * @example describeStoreConformance('sqlite', async () => ({ store, cleanup, reopen }))
 */
export function describeStoreConformance(name: string, open: () => Promise<StoreHandle>): void {
  describe(`Store conformance: ${name}`, () => {
    let handle: StoreHandle;
    let store: Store;

    beforeEach(async () => {
      handle = await open();
      store = handle.store;
    });
    afterEach(async () => {
      await handle.cleanup();
    });

    /** Writes a job with its input (inputOf). */
    function put(job: JobRecord): Promise<void> {
      return store.insertJob({ job, inputJson: inputOf(job) });
    }

    /** Inserts a job and returns what the store holds for it. */
    async function insert(overrides: Partial<NewJobArgs> & { inputJson?: string } = {}): Promise<JobRecord> {
      const job = newJob(overrides);
      await put(job);
      const stored = await store.getJob(job.id);
      if (!stored) throw new Error(`inserted job ${job.id} not found`);
      return stored;
    }

    async function get(id: string): Promise<JobRecord> {
      const job = await store.getJob(id);
      if (!job) throw new Error(`job ${id} not found`);
      return job;
    }

    /** appendStream with the chunks' byte count and a cap far away unless given. */
    function append(id: string, workerId: string, chunks: string[], more: { endpointId?: string; maxBytes?: number } = {}) {
      const bytes = chunks.reduce((n, chunk) => n + Buffer.byteLength(chunk), 0);
      return store.appendStream({ id, workerId, chunks, bytes, maxBytes: 1e12, ...more });
    }

    /** What a reader gets: every buffered chunk (one big page), deleted after. */
    async function drain(id: string): Promise<string[]> {
      const { chunks } = await store.readStream({ id, after: 0, limit: 1_000_000, maxBytes: 1e12 });
      if (chunks.length > 0) await store.deleteStream({ id, through: chunks[chunks.length - 1]!.seq });
      return chunks.map((c) => c.chunk);
    }

    /**
     * Inserts a job and claims it with `workerId` at `now`. It is queued at T0 - 1 unless told
     * otherwise, by a key of its own with nothing queued (so its place is its queuedAt, fairPlace), ahead
     * of the jobs that insert() queues at T0, so the claim takes this one.
     */
    let runners = 0;
    async function running(workerId: string, overrides: Partial<NewJobArgs> = {}, now = T0 + 1000): Promise<JobRecord> {
      const job = await insert({ now: T0 - 1, keyId: `runner-${++runners}`, ...overrides });
      const claimed = await store.claimJobs({ endpointId: job.endpointId, workerId, limit: 1, now });
      expect(claimed.map((j) => j.id)).toEqual([job.id]);
      return get(job.id);
    }

    describe('schema', () => {
      it('has a kind', () => {
        expect(['sqlite', 'postgres']).toContain(store.kind);
      });

      it('migrate twice is harmless and keeps data', async () => {
        const job = await insert();
        await store.migrate();
        await store.migrate();
        expect(await store.getJob(job.id)).toEqual(job);
      });

      it('keeps data across a reopen', async () => {
        const job = await insert({ webhook: 'https://hook.example/x' });
        await store.createEndpoint(endpoint('ep'));
        await store.createKey(key('k1'));
        await store.touchWorker({ id: 'w1', endpointId: 'ep', now: T0 });
        await store.close();
        const again = await handle.reopen();
        expect(await again.getJob(job.id)).toEqual(job);
        expect(await again.getEndpoint('ep')).toEqual(endpoint('ep'));
        expect(await again.getKeyByHash('hash-k1')).toEqual(key('k1'));
        expect((await again.listWorkers()).map((w) => w.id)).toEqual(['w1']);
      });

      it('close twice is safe', async () => {
        await store.close();
        await store.close();
      });
    });

    describe('insertJob / getJob', () => {
      it('round-trips every field and starts the job in the queue', async () => {
        const input = newJob({
          webhook: 'https://hook.example/done',
          s3Config: 'enc:abc',
          lowPriority: true,
          sync: true,
          keyId: 'key-1',
          inputJson: '{"prompt":"a \\"quoted\\" cat","n":[1,2]}',
        });
        await put(input);
        expect(await store.getJob(input.id)).toEqual({
          id: input.id,
          endpointId: 'ep',
          status: 'IN_QUEUE',
          outputJson: null,
          error: null,
          webhook: 'https://hook.example/done',
          s3Config: 'enc:abc',
          executionTimeoutMs: input.executionTimeoutMs,
          lowPriority: true,
          ttlMs: input.ttlMs,
          retentionMs: input.retentionMs,
          maxAttempts: 3,
          sync: true,
          keyId: 'key-1',
          createdAt: T0,
          queuedAt: T0,
          startedAt: null,
          finishedAt: null,
          deadlineAt: T0 + input.ttlMs,
          expiresAt: null,
          workerId: null,
          attempts: 0,
          retries: 0,
          webhookAttempts: 0,
          webhookNextAt: null,
          inputBytes: Buffer.byteLength(inputOf(input)),
          preemptions: 0,
          traceparent: null,
        } satisfies JobRecord);
        const plain = await insert();
        expect(plain.lowPriority).toBe(false);
        expect(plain.sync).toBe(false);
      });

      it('writes every field exactly as given, none derived from the others', async () => {
        const unusual = (id: string, n: number): JobRecord => ({
          id,
          endpointId: `ep-${n}`,
          status: 'FAILED',
          outputJson: `{"partial":${n}}`,
          error: `boom ${n}`,
          webhook: `https://hook.example/${n}`,
          s3Config: `enc:${n}`,
          executionTimeoutMs: 1234 + n,
          lowPriority: true,
          ttlMs: 5678 + n,
          retentionMs: 91011 + n,
          maxAttempts: 7 + n,
          sync: true,
          keyId: `key-${n}`,
          createdAt: T0 - 50_000 - n,
          queuedAt: T0 - 40_000 - n,
          startedAt: T0 - 30_000 - n,
          finishedAt: T0 - 20_000 - n,
          deadlineAt: T0 + 123 + n,
          expiresAt: T0 + 456 + n,
          workerId: `w-${n}`,
          attempts: 3 + n,
          retries: 2 + n,
          webhookAttempts: 4 + n,
          webhookNextAt: T0 + 789 + n,
          inputBytes: 1_000 + n,
          preemptions: 5 + n,
          traceparent: `00-${'4bf92f3577b34da6a3ce929d0e0e4736'}-${(n + 1).toString(16).padStart(16, '0')}-01`,
        });
        const alone = unusual('alone', 0);
        await put(alone);
        expect(await store.getJob(alone.id)).toEqual(alone);
        // Several in one turn (a batched insert on backends that group them).
        const many = [1, 2, 3].map((n) => unusual(`many-${n}`, n));
        await Promise.all(many.map((job) => put(job)));
        for (const job of many) expect(await store.getJob(job.id)).toEqual(job);
        expect(await store.listJobs({ endpointId: 'ep-2', limit: 5 })).toEqual([many[1]]);

        // A live job written as given: the store claims by its queuedAt and deadlineAt, not by createdAt + ttl.
        const queued: JobRecord = { ...newJob({ now: T0, keyId: 'k1' }), queuedAt: T0 + 500, deadlineAt: T0 + 600 };
        const older = newJob({ now: T0 + 100, keyId: 'k2' });
        await put(queued);
        await put(older);
        expect(await store.getJob(queued.id)).toEqual(queued);
        expect((await store.claimJobs({ endpointId: 'ep', workerId: 'w1', limit: 1, now: T0 + 200 })).map((j) => j.id)).toEqual([older.id]);
        expect((await store.expireQueued({ now: T0 + 600, limit: 10 })).map((j) => j.id)).toEqual([queued.id]);
      });

      it('returns undefined for an unknown id', async () => {
        expect(await store.getJob('nope')).toBeUndefined();
      });
    });

    describe('job inputs (getJobInput)', () => {
      it('keeps the input as written, hands it out with a claim only, and deletes it with its job', async () => {
        const text = '{"prompt":"a \\"quoted\\" cat","big":"' + 'x'.repeat(300_000) + '","é":[1,2]}';
        const job = await insert({ inputJson: text, now: T0 });
        const other = await insert({ now: T0 + 1 });
        expect(await store.getJobInput(job.id)).toBe(text);
        expect(await store.getJobInput('nope')).toBeUndefined();
        // Reads and transitions come without it; the claim hands it to the worker.
        expect(await get(job.id)).not.toHaveProperty('inputJson');
        const claimed = await store.claimJobs({ endpointId: 'ep', workerId: 'w1', limit: 2, now: T0 + 10 });
        expect(claimed.map((j) => [j.id, j.inputJson])).toEqual([[job.id, text], [other.id, inputOf(other)]]);
        const finished = await store.finishJob({ id: job.id, workerId: 'w1', status: 'FAILED', outputJson: null, error: 'x', now: T0 + 20 });
        expect(finished).toBeDefined();
        expect(finished).not.toHaveProperty('inputJson');
        // A retry queues the same input again.
        const retried = await store.retryJob({ id: job.id, now: T0 + 30 });
        expect(retried).not.toHaveProperty('inputJson');
        expect((await store.claimJobs({ endpointId: 'ep', workerId: 'w2', limit: 1, now: T0 + 40 }))[0]?.inputJson).toBe(text);
        const cancelled = await store.cancelJob({ id: job.id, now: T0 + 50 });
        expect(cancelled).not.toHaveProperty('inputJson');
        expect(await store.getJobInput(job.id)).toBe(text);
        // Expiry deletes the input with the job; the other job's stays.
        expect(await store.deleteExpired({ now: T0 + 50 + 31 * MIN, limit: 10 })).toBe(1);
        expect(await store.getJobInput(job.id)).toBeUndefined();
        expect(await store.getJobInput(other.id)).toBe(inputOf(other));
      });

      it('writes the inputs of a burst of submissions (one batch where a backend groups them) each beside its job', async () => {
        const burst = Array.from({ length: 12 }, (_, i) => newJob({ inputJson: `{"i":${i},"pad":"${'p'.repeat(i * 1000)}"}` }));
        await Promise.all(burst.map((job) => put(job)));
        for (const job of burst) expect(await store.getJobInput(job.id)).toBe(inputOf(job));
        const claimed = await store.claimJobs({ endpointId: 'ep', workerId: 'w1', limit: 20, now: T0 + 10 });
        expect(claimed.map((j) => j.inputJson)).toEqual(burst.map(inputOf));
      });

      it('writes nothing when the input cannot be written: no job without its input', async () => {
        const job = newJob();
        await expect(store.insertJob({ job, inputJson: null as unknown as string })).rejects.toThrow();
        expect(await store.getJob(job.id)).toBeUndefined();
        expect(await store.getJobInput(job.id)).toBeUndefined();
        // The id is free again, and the queue hands out the job written next.
        await put(job);
        expect((await store.claimJobs({ endpointId: 'ep', workerId: 'w1', limit: 5, now: T0 + 10 })).map((j) => [j.id, j.inputJson])).toEqual([[job.id, inputOf(job)]]);
      });

      it('writes the input of an insertJobOnce only when it makes the job', async () => {
        const job = newJob();
        expect(await store.insertJobOnce({ job, inputJson: '{"first":1}', keyDigest: 'kin', requestDigest: 'r' })).toMatchObject({ created: true });
        expect(await store.insertJobOnce({ job: newJob(), inputJson: '{"second":2}', keyDigest: 'kin', requestDigest: 'r' })).toMatchObject({ created: false });
        expect(await store.getJobInput(job.id)).toBe('{"first":1}');
      });
    });

    describe('claimJobs', () => {
      it('takes the oldest queuedAt first among keys with nothing queued, insertion order breaking ties, up to the limit', async () => {
        const late = await insert({ now: T0 + 30, keyId: 'k1' });
        const tieA = await insert({ now: T0 + 10, keyId: 'k2' });
        const tieB = await insert({ now: T0 + 10, keyId: 'k3' });
        const early = await insert({ now: T0, keyId: 'k4' });
        await insert({ endpointId: 'other', now: T0 - 100 });
        const now = T0 + 1000;
        const first = await store.claimJobs({ endpointId: 'ep', workerId: 'w1', limit: 3, now });
        expect(first.map((j) => j.id)).toEqual([early.id, tieA.id, tieB.id]);
        for (const job of first) {
          expect(job).toMatchObject({
            status: 'IN_PROGRESS',
            workerId: 'w1',
            startedAt: now,
            attempts: 1,
            deadlineAt: now + job.executionTimeoutMs,
            outputJson: null,
            error: null,
          });
          // The claim hands out the input; the job's record alone holds none.
          const { inputJson, ...record } = job;
          expect(inputJson).toBe(inputOf(job));
          expect(await store.getJob(job.id)).toEqual(record);
        }
        const second = await store.claimJobs({ endpointId: 'ep', workerId: 'w2', limit: 10, now });
        expect(second.map((j) => j.id)).toEqual([late.id]);
        expect(await store.claimJobs({ endpointId: 'ep', workerId: 'w2', limit: 10, now })).toEqual([]);
        expect((await get(late.id)).workerId).toBe('w2');
      });

      it('keeps insertion order among many jobs queued in the same millisecond', async () => {
        const ids: string[] = [];
        // Sixty in one turn (one batch where a backend groups them), then sixty one by one.
        const batch = Array.from({ length: 60 }, () => newJob({ now: T0 }));
        await Promise.all(batch.flatMap((job) => [put(job), put(newJob({ endpointId: 'other', now: T0 }))]));
        ids.push(...batch.map((job) => job.id));
        for (let i = 0; i < 60; i++) ids.push((await insert({ now: T0 })).id);
        const last = await insert({ now: T0 - 1 }); // queued earlier, inserted last: a key's jobs keep insertion order
        const claimed: string[] = [];
        for (let round = 0; round < 20; round++) {
          const jobs = await store.claimJobs({ endpointId: 'ep', workerId: `w${round}`, limit: 7, now: T0 + 1000 });
          claimed.push(...jobs.map((j) => j.id));
        }
        expect(claimed).toEqual([...ids, last.id]);
      });

      it('interleaves keys: a key with a long queue takes one place in each round, each key FIFO', async () => {
        // Key A queues 50 (half in one turn, half one by one), then B queues 3 and C 1, later.
        const a: string[] = [];
        const burst = Array.from({ length: 25 }, (_, i) => newJob({ keyId: 'A', now: T0 + i }));
        await Promise.all(burst.map((job) => put(job)));
        a.push(...burst.map((job) => job.id));
        for (let i = 25; i < 50; i++) a.push((await insert({ keyId: 'A', now: T0 + i })).id);
        const b: string[] = [];
        for (let i = 0; i < 3; i++) b.push((await insert({ keyId: 'B', now: T0 + 100 + i })).id);
        const c = (await insert({ keyId: null, now: T0 + 200 })).id;
        // One at a time first (as single takes do), then the rest in one claim, returned in queue order.
        const order: string[] = [];
        for (let i = 0; i < 10; i++) order.push(...(await store.claimJobs({ endpointId: 'ep', workerId: 'w1', limit: 1, now: T0 + 1000 })).map((j) => j.id));
        order.push(...(await store.claimJobs({ endpointId: 'ep', workerId: 'w2', limit: 100, now: T0 + 1000 })).map((j) => j.id));
        expect(order).toHaveLength(54);
        // Each key in its own order.
        expect(order.filter((id) => a.includes(id))).toEqual(a);
        expect(order.filter((id) => b.includes(id))).toEqual(b);
        // B's and C's jobs all go within the first few places, not behind A's 50.
        expect(order.indexOf(b[0]!)).toBeLessThanOrEqual(2);
        expect(order.indexOf(c)).toBeLessThanOrEqual(3);
        expect(order.indexOf(b[2]!)).toBeLessThanOrEqual(8);
        expect((await store.countJobs('ep')).inProgress).toBe(54);
      });

      it('skips jobs whose queue ttl has passed', async () => {
        const stale = await insert({ ttlMs: 5000 });
        const fresh = await insert({ ttlMs: 5000, now: T0 + 1000 });
        const claimed = await store.claimJobs({ endpointId: 'ep', workerId: 'w1', limit: 5, now: T0 + 5000 });
        expect(claimed.map((j) => j.id)).toEqual([fresh.id]);
        expect(await store.getJob(stale.id)).toEqual(stale);
        const edge = await insert({ endpointId: 'b', ttlMs: 5000 });
        const taken = await store.claimJobs({ endpointId: 'b', workerId: 'w1', limit: 5, now: T0 + 4999 });
        expect(taken.map((j) => j.id)).toEqual([edge.id]);
      });

      it('claims for several takers in one call: queue order, the first taker first, a short queue leaving the last with none', async () => {
        const queued: string[] = [];
        for (let i = 0; i < 5; i++) queued.push((await insert({ now: T0 + i })).id);
        await insert({ endpointId: 'other', now: T0 - 100 });
        const now = T0 + 1000;
        const takers = [{ workerId: 'w1', limit: 2 }, { workerId: 'w2', limit: 1 }, { workerId: 'w3', limit: 3 }, { workerId: 'w4', limit: 1 }];
        const claimed = await store.claimJobsFor({ endpointId: 'ep', takers, now });
        expect(claimed.map((j) => [j.id, j.workerId])).toEqual([
          [queued[0], 'w1'], [queued[1], 'w1'], [queued[2], 'w2'], [queued[3], 'w3'], [queued[4], 'w3'],
        ]);
        for (const job of claimed) {
          expect(job).toMatchObject({ status: 'IN_PROGRESS', startedAt: now, attempts: 1, deadlineAt: now + job.executionTimeoutMs });
          // The claim hands out the input; the job's record alone holds none.
          const { inputJson, ...record } = job;
          expect(inputJson).toBe(inputOf(job));
          expect(await store.getJob(job.id)).toEqual(record);
        }
        expect(await store.claimJobsFor({ endpointId: 'ep', takers, now })).toEqual([]);
        expect(await store.claimJobsFor({ endpointId: 'ep', takers: [], now })).toEqual([]);
      });

      it('never hands the same job to two takers of concurrent multi-taker claims', async () => {
        const ids: string[] = [];
        for (let i = 0; i < 30; i++) ids.push((await insert()).id);
        const now = T0 + 1000;
        const results = await Promise.all(
          [0, 1, 2].map((g) => store.claimJobsFor({ endpointId: 'ep', takers: [{ workerId: `g${g}a`, limit: 4 }, { workerId: `g${g}b`, limit: 7 }], now })),
        );
        const claimed = results.flat().map((j) => j.id);
        expect(new Set(claimed).size).toBe(claimed.length);
        expect([...claimed].sort()).toEqual([...ids].sort());
        for (const job of results.flat()) expect((await get(job.id)).workerId).toBe(job.workerId);
      });

      it('never hands the same job to two workers', async () => {
        const ids: string[] = [];
        for (let i = 0; i < 20; i++) ids.push((await insert()).id);
        const now = T0 + 1000;
        const results = await Promise.all(
          ['w1', 'w2', 'w3', 'w4'].map((workerId) => store.claimJobs({ endpointId: 'ep', workerId, limit: 7, now })),
        );
        const claimed = results.flat().map((j) => j.id);
        expect(new Set(claimed).size).toBe(claimed.length);
        expect([...claimed].sort()).toEqual([...ids].sort());
        for (const result of results) {
          for (const job of result) expect((await get(job.id)).workerId).toBe(job.workerId);
        }
      });

      it('leaves running and finished jobs alone', async () => {
        const job = await running('w1');
        await store.finishJob({ id: job.id, workerId: 'w1', status: 'COMPLETED', outputJson: '1', error: null, now: T0 + 2000 });
        expect(await store.claimJobs({ endpointId: 'ep', workerId: 'w2', limit: 5, now: T0 + 3000 })).toEqual([]);
      });
    });

    describe('finishJob', () => {
      it('completes a job held by the worker', async () => {
        const job = await running('w1');
        const now = T0 + 5000;
        const done = await store.finishJob({ id: job.id, workerId: 'w1', status: 'COMPLETED', outputJson: '{"ok":true}', error: null, now });
        const expected: JobRecord = {
          ...job,
          status: 'COMPLETED',
          outputJson: '{"ok":true}',
          error: null,
          finishedAt: now,
          expiresAt: now + job.retentionMs,
          deadlineAt: null,
          webhookNextAt: null,
        };
        expect(done).toEqual(expected);
        expect(await store.getJob(job.id)).toEqual(expected);
      });

      it('fails a job and schedules its webhook', async () => {
        const job = await running('w1', { webhook: 'https://hook.example/' });
        const now = T0 + 5000;
        const done = await store.finishJob({ id: job.id, workerId: 'w1', status: 'FAILED', outputJson: null, error: 'boom', now });
        expect(done).toMatchObject({ status: 'FAILED', error: 'boom', outputJson: null, workerId: 'w1', webhookNextAt: now, webhookAttempts: 0 });
      });

      it('changes nothing for another worker, a queued job, a finished job or an unknown id', async () => {
        const job = await running('w1');
        const args = { id: job.id, status: 'COMPLETED' as const, outputJson: '"x"', error: null, now: T0 + 5000 };
        expect(await store.finishJob({ ...args, workerId: 'w2' })).toBeUndefined();
        expect(await store.getJob(job.id)).toEqual(job);

        const queued = await insert();
        expect(await store.finishJob({ ...args, id: queued.id, workerId: 'w1' })).toBeUndefined();
        expect(await store.getJob(queued.id)).toEqual(queued);

        const done = await store.finishJob({ ...args, workerId: 'w1' });
        expect(done?.status).toBe('COMPLETED');
        expect(await store.finishJob({ ...args, workerId: 'w1', status: 'FAILED', error: 'late', now: T0 + 9000 })).toBeUndefined();
        expect(await store.getJob(job.id)).toEqual(done);

        expect(await store.finishJob({ ...args, id: 'nope', workerId: 'w1' })).toBeUndefined();
      });
    });

    describe('setProgress', () => {
      it('updates the output of a job held by the worker only', async () => {
        const job = await running('w1');
        expect(await store.setProgress({ id: job.id, workerId: 'w1', outputJson: '{"step":1}' })).toBe(true);
        expect((await get(job.id)).outputJson).toBe('{"step":1}');
        expect(await store.setProgress({ id: job.id, workerId: 'w2', outputJson: '{"step":2}' })).toBe(false);
        expect((await get(job.id)).outputJson).toBe('{"step":1}');

        const queued = await insert();
        expect(await store.setProgress({ id: queued.id, workerId: 'w1', outputJson: '1' })).toBe(false);
        expect(await store.getJob(queued.id)).toEqual(queued);
        expect(await store.setProgress({ id: 'nope', workerId: 'w1', outputJson: '1' })).toBe(false);
      });

      it('never reopens or changes a finished job (a late progress post)', async () => {
        const job = await running('w1');
        const done = await store.finishJob({ id: job.id, workerId: 'w1', status: 'COMPLETED', outputJson: '"final"', error: null, now: T0 + 2000 });
        expect(await store.setProgress({ id: job.id, workerId: 'w1', outputJson: '"progress"' })).toBe(false);
        expect(await store.getJob(job.id)).toEqual(done);
      });
    });

    describe('cancelJob', () => {
      it('cancels a queued job', async () => {
        const job = await insert({ webhook: 'https://hook.example/' });
        const now = T0 + 3000;
        const cancelled = await store.cancelJob({ id: job.id, now });
        const expected: JobRecord = {
          ...job,
          status: 'CANCELLED',
          finishedAt: now,
          expiresAt: now + job.retentionMs,
          deadlineAt: null,
          webhookNextAt: now,
        };
        expect(cancelled).toEqual(expected);
        expect(await store.getJob(job.id)).toEqual(expected);
      });

      it('cancels a running job and keeps its worker', async () => {
        const job = await running('w1');
        const now = T0 + 3000;
        const cancelled = await store.cancelJob({ id: job.id, now });
        expect(cancelled).toMatchObject({ status: 'CANCELLED', workerId: 'w1', finishedAt: now, expiresAt: now + job.retentionMs, deadlineAt: null, webhookNextAt: null });
      });

      it('changes nothing for a finished job or an unknown id', async () => {
        const job = await insert();
        const cancelled = await store.cancelJob({ id: job.id, now: T0 + 1 });
        expect(await store.cancelJob({ id: job.id, now: T0 + 2 })).toBeUndefined();
        expect(await store.getJob(job.id)).toEqual(cancelled);
        const other = await running('w1');
        const done = await store.finishJob({ id: other.id, workerId: 'w1', status: 'COMPLETED', outputJson: '1', error: null, now: T0 + 2000 });
        expect(await store.cancelJob({ id: other.id, now: T0 + 3000 })).toBeUndefined();
        expect(await store.getJob(other.id)).toEqual(done);
        expect(await store.cancelJob({ id: 'nope', now: T0 })).toBeUndefined();
      });
    });

    describe('purgeQueue', () => {
      it('cancels the queued jobs of one endpoint and leaves running jobs and other endpoints alone', async () => {
        const run = await running('w1');
        const a = await insert();
        const b = await insert({ webhook: 'https://hook.example/' });
        const other = await insert({ endpointId: 'other' });
        const now = T0 + 5000;
        const purged = await store.purgeQueue({ endpointId: 'ep', now, limit: 100 });
        expect(purged.map((j) => j.id).sort()).toEqual([a.id, b.id].sort());
        expect(await get(a.id)).toEqual({ ...a, status: 'CANCELLED', finishedAt: now, expiresAt: now + a.retentionMs, deadlineAt: null, webhookNextAt: null });
        expect((await get(b.id)).webhookNextAt).toBe(now);
        expect(await store.getJob(run.id)).toEqual(run);
        expect(await store.getJob(other.id)).toEqual(other);
        expect(await store.purgeQueue({ endpointId: 'ep', now, limit: 100 })).toEqual([]);
      });

      it('goes in batches of at most `limit`, oldest first, returning each job\'s trace context; jobs queued after `now` stay', async () => {
        const traceparent = `00-${'a'.repeat(32)}-${'b'.repeat(16)}-01`;
        const old = await insert({ now: T0 - 10 });
        const traced = { ...newJob({ now: T0 - 5 }), traceparent, retries: 2 };
        await put(traced);
        const third = await insert({ now: T0 });
        const later = await insert({ now: T0 + 10 });
        const first = await store.purgeQueue({ endpointId: 'ep', now: T0, limit: 2 });
        expect(first).toEqual([
          { id: old.id, traceparent: null, queuedAt: T0 - 10, attempts: 0, preemptions: 0, retries: 0 },
          { id: traced.id, traceparent, queuedAt: T0 - 5, attempts: 0, preemptions: 0, retries: 2 },
        ]);
        expect((await get(third.id)).status).toBe('IN_QUEUE');
        expect(await store.purgeQueue({ endpointId: 'ep', now: T0, limit: 2 })).toEqual([{ id: third.id, traceparent: null, queuedAt: T0, attempts: 0, preemptions: 0, retries: 0 }]);
        expect(await store.purgeQueue({ endpointId: 'ep', now: T0, limit: 2 })).toEqual([]);
        expect((await get(later.id)).status).toBe('IN_QUEUE');
        expect((await get(traced.id)).status).toBe('CANCELLED');
      });
    });

    describe('retryJob', () => {
      it('requeues a failed job with the same id and input, clearing its run', async () => {
        const job = await running('w1', { webhook: 'https://hook.example/' });
        await append(job.id, 'w1', ['a', 'b']);
        await store.finishJob({ id: job.id, workerId: 'w1', status: 'FAILED', outputJson: null, error: 'boom', now: T0 + 2000 });
        await store.markWebhook({ id: job.id, attempts: 1, nextAt: null });
        const now = T0 + 3000;
        const retried = await store.retryJob({ id: job.id, now });
        const expected: JobRecord = {
          ...job,
          status: 'IN_QUEUE',
          outputJson: null,
          error: null,
          workerId: null,
          startedAt: null,
          finishedAt: null,
          expiresAt: null,
          webhookAttempts: 0,
          webhookNextAt: null,
          attempts: 0,
          retries: 1,
          queuedAt: now,
          deadlineAt: now + job.ttlMs,
        };
        expect(retried).toEqual(expected);
        expect(await store.getJob(job.id)).toEqual(expected);
        expect(await drain(job.id)).toEqual([]);
        const again = await store.claimJobs({ endpointId: 'ep', workerId: 'w2', limit: 1, now: now + 1 });
        expect(again.map((j) => j.id)).toEqual([job.id]);
        expect(again[0]?.attempts).toBe(1);
      });

      it('requeues a timed-out job', async () => {
        const job = await running('w1', { executionTimeoutMs: 1000 });
        await store.timeOutRunning({ now: T0 + 5000, limit: 10 });
        const retried = await store.retryJob({ id: job.id, now: T0 + 6000 });
        expect(retried).toMatchObject({ status: 'IN_QUEUE', retries: 1, error: null });
      });

      it('refuses live, completed and cancelled jobs, and expired ones', async () => {
        const queued = await insert();
        expect(await store.retryJob({ id: queued.id, now: T0 + 1 })).toBeUndefined();
        expect(await store.getJob(queued.id)).toEqual(queued);

        const run = await running('w1');
        expect(await store.retryJob({ id: run.id, now: T0 + 2000 })).toBeUndefined();
        expect(await store.getJob(run.id)).toEqual(run);

        const completed = await store.finishJob({ id: run.id, workerId: 'w1', status: 'COMPLETED', outputJson: '1', error: null, now: T0 + 3000 });
        expect(await store.retryJob({ id: run.id, now: T0 + 4000 })).toBeUndefined();
        expect(await store.getJob(run.id)).toEqual(completed);

        const cancelled = await store.cancelJob({ id: queued.id, now: T0 + 5000 });
        expect(await store.retryJob({ id: queued.id, now: T0 + 6000 })).toBeUndefined();
        expect(await store.getJob(queued.id)).toEqual(cancelled);

        const failing = await running('w2');
        const failed = await store.finishJob({ id: failing.id, workerId: 'w2', status: 'FAILED', outputJson: null, error: 'x', now: T0 + 7000 });
        const expiresAt = failed?.expiresAt ?? 0;
        expect(await store.retryJob({ id: failing.id, now: expiresAt })).toBeUndefined();
        expect(await store.getJob(failing.id)).toEqual(failed);
        expect(await store.retryJob({ id: failing.id, now: expiresAt - 1 })).toMatchObject({ status: 'IN_QUEUE' });

        expect(await store.retryJob({ id: 'nope', now: T0 })).toBeUndefined();
      });
    });

    describe('timeOutRunning', () => {
      it('times out running jobs past their deadline, up to the limit', async () => {
        const a = await running('w1', { executionTimeoutMs: 1000 });
        const b = await running('w1', { executionTimeoutMs: 2000, webhook: 'https://hook.example/' });
        const c = await running('w2', { executionTimeoutMs: 60_000 });
        const queued = await insert({ ttlMs: 10 });
        const now = T0 + 1000 + 5000;

        const first = await store.timeOutRunning({ now, limit: 1 });
        expect(first.map((j) => j.id)).toEqual([a.id]);
        expect(first[0]).toEqual({
          ...a,
          status: 'TIMED_OUT',
          error: 'execution timeout exceeded',
          finishedAt: now,
          expiresAt: now + a.retentionMs,
          deadlineAt: null,
          webhookNextAt: null,
        });
        const rest = await store.timeOutRunning({ now, limit: 10 });
        expect(rest.map((j) => j.id)).toEqual([b.id]);
        expect(rest[0]).toMatchObject({ workerId: 'w1', webhookNextAt: now });
        expect(await store.getJob(c.id)).toEqual(c);
        expect(await store.getJob(queued.id)).toEqual(queued);
        expect(await store.timeOutRunning({ now, limit: 10 })).toEqual([]);
      });

      it('uses the deadline set at claim time', async () => {
        const job = await running('w1', { executionTimeoutMs: 1000 }, T0 + 1000);
        expect(await store.timeOutRunning({ now: T0 + 1999, limit: 10 })).toEqual([]);
        expect((await store.timeOutRunning({ now: T0 + 2000, limit: 10 })).map((j) => j.id)).toEqual([job.id]);
      });
    });

    describe('expireQueued', () => {
      it('times out queued jobs past their ttl, up to the limit', async () => {
        const a = await insert({ ttlMs: 1000 });
        const b = await insert({ ttlMs: 2000 });
        const c = await insert({ ttlMs: 60_000 });
        const run = await running('w1', { ttlMs: 1000 }, T0 + 500);
        const now = T0 + 10_000;
        const first = await store.expireQueued({ now, limit: 1 });
        expect(first.map((j) => j.id)).toEqual([a.id]);
        expect(first[0]).toEqual({
          ...a,
          status: 'TIMED_OUT',
          error: 'ttl expired in queue',
          finishedAt: now,
          expiresAt: now + a.retentionMs,
          deadlineAt: null,
          webhookNextAt: null,
        });
        expect((await store.expireQueued({ now, limit: 10 })).map((j) => j.id)).toEqual([b.id]);
        expect(await store.getJob(c.id)).toEqual(c);
        expect(await store.getJob(run.id)).toEqual(run);
        expect(await store.expireQueued({ now: T0 + 999, limit: 10 })).toEqual([]);
      });
    });

    describe('requeueJobs (the one requeue rule)', () => {
      const lost = (workerIds: string[], now: number, ids?: string[]) =>
        store.requeueJobs({ workerIds, ...(ids ? { ids } : {}), counted: true, error: 'worker lost', now });

      it('requeues jobs under maxAttempts keeping queuedAt, and fails the rest with the error', async () => {
        const again = await running('w1', { maxAttempts: 2 });
        const last = await running('w1', { maxAttempts: 1, webhook: 'https://hook.example/' });
        const otherWorker = await running('w2');
        await store.setProgress({ id: again.id, workerId: 'w1', outputJson: '{"half":true}' });
        const now = T0 + 5000;
        const { requeued, failed } = await lost(['w1', 'w9'], now);
        // queuedAt as submitted: delayTime and queue order count from there; the queue deadline with it.
        expect(requeued).toEqual([{ ...again, status: 'IN_QUEUE', queuedAt: again.queuedAt, deadlineAt: again.queuedAt + again.ttlMs, workerId: null, startedAt: null }]);
        expect(failed).toEqual([
          {
            ...last,
            status: 'FAILED',
            error: 'worker lost',
            finishedAt: now,
            expiresAt: now + last.retentionMs,
            deadlineAt: null,
            webhookNextAt: now,
          },
        ]);
        expect(await store.getJob(again.id)).toEqual(requeued[0]);
        expect(await store.getJob(last.id)).toEqual(failed[0]);
        expect(await store.getJob(otherWorker.id)).toEqual(otherWorker);

        // Second loss of the requeued job reaches maxAttempts = 2; {attempts} in the error is its count.
        const claimed = await store.claimJobs({ endpointId: 'ep', workerId: 'w3', limit: 5, now: now + 1 });
        expect(claimed.map((j) => j.id)).toEqual([again.id]);
        expect(claimed[0]).toMatchObject({ attempts: 2, startedAt: now + 1, queuedAt: again.queuedAt });
        const second = await store.requeueJobs({ workerIds: ['w3'], counted: true, error: 'handed out {attempts} time(s)', now: now + 2 });
        expect(second.requeued).toEqual([]);
        expect(second.failed.map((j) => [j.id, j.error])).toEqual([[again.id, 'handed out 2 time(s)']]);
      });

      it('puts a requeued job back in its place: ahead of jobs submitted after it', async () => {
        const first = await running('w1');
        const later = await insert({ now: T0 + 10 });
        await lost(['w1'], T0 + 60_000);
        const next = await store.claimJobs({ endpointId: 'ep', workerId: 'w2', limit: 2, now: T0 + 61_000 });
        expect(next.map((j) => j.id)).toEqual([first.id, later.id]);
        expect(next[0]).toMatchObject({ queuedAt: first.queuedAt, startedAt: T0 + 61_000, attempts: 2 });
      });

      it('leaves a requeued job past its queue deadline unclaimable (the reaper times it out)', async () => {
        const short = await running('w1', { ttlMs: 10_000 });
        const [back] = (await lost(['w1'], T0 + 20_000)).requeued;
        expect(back).toMatchObject({ status: 'IN_QUEUE', deadlineAt: short.queuedAt + 10_000 });
        expect(await store.claimJobs({ endpointId: 'ep', workerId: 'w2', limit: 1, now: T0 + 20_001 })).toEqual([]);
        expect((await store.expireQueued({ now: T0 + 20_001, limit: 10 })).map((j) => j.id)).toEqual([short.id]);
      });

      it('un-claims only the named jobs of that worker; uncounted, the hand-out is taken back', async () => {
        await put(newJob());
        await put(newJob());
        const [a, b] = await store.claimJobs({ endpointId: 'ep', workerId: 'w1', limit: 2, now: T0 + 10 });
        const untaken = (workerId: string) => store.requeueJobs({ workerIds: [workerId], ids: [a!.id, 'missing'], counted: false, error: '', now: T0 + 15 });
        expect(await untaken('w2')).toEqual({ requeued: [], failed: [] });
        expect((await untaken('w1')).requeued.map((j) => j.id)).toEqual([a!.id]);
        const back = await store.getJob(a!.id);
        expect(back).toMatchObject({ status: 'IN_QUEUE', attempts: 0, workerId: null, startedAt: null, queuedAt: T0, deadlineAt: T0 + back!.ttlMs });
        expect((await store.getJob(b!.id))?.status).toBe('IN_PROGRESS');
        // It is the first in the queue again.
        expect((await store.claimJobs({ endpointId: 'ep', workerId: 'w3', limit: 1, now: T0 + 20 }))[0]?.id).toBe(a!.id);
      });

      it('never fails an uncounted hand-out, even at maxAttempts', async () => {
        const job = await running('w1', { maxAttempts: 1 });
        const { requeued, failed } = await store.requeueJobs({ workerIds: ['w1'], ids: [job.id], counted: false, error: 'x', now: T0 + 2000 });
        expect(failed).toEqual([]);
        expect(requeued.map((j) => [j.id, j.attempts])).toEqual([[job.id, 0]]);
      });

      it('counts a preemption, not an attempt, when the worker was stopped for a higher priority', async () => {
        const job = await running('w1', { maxAttempts: 1 });
        const { requeued, failed } = await store.requeueJobs({ workerIds: ['w1'], counted: false, preempted: true, error: '', now: T0 + 2000 });
        expect(failed).toEqual([]);
        expect(requeued.map((j) => [j.id, j.attempts, j.preemptions])).toEqual([[job.id, 0, 1]]);
        // Taken and preempted again: the count goes on; an ordinary requeue leaves it.
        await store.claimJobs({ endpointId: 'ep', workerId: 'w2', limit: 1, now: T0 + 3000 });
        await store.requeueJobs({ workerIds: ['w2'], counted: false, preempted: true, error: '', now: T0 + 3500 });
        await store.claimJobs({ endpointId: 'ep', workerId: 'w3', limit: 1, now: T0 + 4000 });
        await store.requeueJobs({ workerIds: ['w3'], counted: false, error: '', now: T0 + 4500 });
        expect(await store.getJob(job.id)).toMatchObject({ status: 'IN_QUEUE', attempts: 0, preemptions: 2, workerId: null });
      });

      it('keeps the hand-out counted when asked (a job its worker lost)', async () => {
        await put(newJob());
        const [a] = await store.claimJobs({ endpointId: 'ep', workerId: 'w1', limit: 1, now: T0 + 10 });
        expect((await lost(['w1'], T0 + 20, [a!.id])).requeued.map((j) => j.id)).toEqual([a!.id]);
        expect(await store.getJob(a!.id)).toMatchObject({ status: 'IN_QUEUE', attempts: 1, workerId: null, queuedAt: T0 });
      });

      it('does nothing for no workers, no ids or idle workers', async () => {
        const job = await running('w1');
        expect(await lost([], T0 + 5000)).toEqual({ requeued: [], failed: [] });
        expect(await lost(['w1'], T0 + 5000, [])).toEqual({ requeued: [], failed: [] });
        expect(await lost(['w2'], T0 + 5000)).toEqual({ requeued: [], failed: [] });
        expect(await store.getJob(job.id)).toEqual(job);
      });
    });

    describe('endpoint guard', () => {
      it('refuses results, progress and chunks for a job of another endpoint', async () => {
        const job = await running('w1');
        expect(await store.finishJob({ id: job.id, workerId: 'w1', endpointId: 'other', status: 'COMPLETED', outputJson: '1', error: null, now: T0 + 5 })).toBeUndefined();
        expect(await store.setProgress({ id: job.id, workerId: 'w1', endpointId: 'other', outputJson: '1' })).toBe(false);
        expect(await append(job.id, 'w1', ['1'], { endpointId: 'other' })).toBe('not-held');
        expect(await store.getJob(job.id)).toEqual(job);
        expect(await drain(job.id)).toEqual([]);
        expect(await store.setProgress({ id: job.id, workerId: 'w1', endpointId: 'ep', outputJson: '2' })).toBe(true);
        expect((await store.finishJob({ id: job.id, workerId: 'w1', endpointId: 'ep', status: 'COMPLETED', outputJson: '3', error: null, now: T0 + 6 }))?.status).toBe('COMPLETED');
      });
    });

    describe('deleteExpired', () => {
      it('deletes expired terminal jobs with their stream, up to the limit, keeping pending webhooks', async () => {
        const a = await running('w1', { retentionMs: 1000 });
        await append(a.id, 'w1', ['x']);
        await store.finishJob({ id: a.id, workerId: 'w1', status: 'COMPLETED', outputJson: '1', error: null, now: T0 + 2000 });
        const b = await insert({ retentionMs: 1000 });
        await store.cancelJob({ id: b.id, now: T0 + 2000 });
        const hooked = await insert({ retentionMs: 1000, webhook: 'https://hook.example/' });
        await store.cancelJob({ id: hooked.id, now: T0 + 2000 });
        const longLived = await insert({ retentionMs: 60 * MIN });
        await store.cancelJob({ id: longLived.id, now: T0 + 2000 });
        const live = await insert({ retentionMs: 1 });
        const runningJob = await running('w2', { retentionMs: 1 });

        expect(await store.deleteExpired({ now: T0 + 2999, limit: 10 })).toBe(0);
        const now = T0 + 3000;
        expect(await store.deleteExpired({ now, limit: 1 })).toBe(1);
        expect(await store.deleteExpired({ now, limit: 10 })).toBe(1);
        expect(await store.deleteExpired({ now, limit: 10 })).toBe(0);
        expect(await store.getJob(a.id)).toBeUndefined();
        expect(await store.getJob(b.id)).toBeUndefined();
        expect(await drain(a.id)).toEqual([]);
        expect((await get(hooked.id)).status).toBe('CANCELLED');
        expect((await get(longLived.id)).status).toBe('CANCELLED');
        expect(await store.getJob(live.id)).toEqual(live);
        expect((await get(runningJob.id)).status).toBe('IN_PROGRESS');

        await store.markWebhook({ id: hooked.id, attempts: 1, nextAt: null });
        expect(await store.deleteExpired({ now, limit: 10 })).toBe(1);
        expect(await store.getJob(hooked.id)).toBeUndefined();
      });
    });

    describe('insertJobOnce / findIdempotentJob', () => {
      it('writes one job per key: a second call returns the first with its digest; plain jobs hold no key', async () => {
        const first = newJob();
        expect(await store.insertJobOnce({ job: first, inputJson: '{}', keyDigest: 'k1', requestDigest: 'r1' })).toEqual({ created: true });
        expect(await store.getJob(first.id)).toEqual(first);
        const second = newJob();
        expect(await store.insertJobOnce({ job: second, inputJson: '{}', keyDigest: 'k1', requestDigest: 'r2' })).toEqual({ created: false, existing: { job: first, requestDigest: 'r1' } });
        expect(await store.getJob(second.id)).toBeUndefined();
        expect(await store.findIdempotentJob('k1')).toEqual({ job: first, requestDigest: 'r1' });
        expect(await store.findIdempotentJob('k2')).toBeUndefined();
        expect(await store.insertJobOnce({ job: newJob(), inputJson: '{}', keyDigest: 'k2', requestDigest: 'r1' })).toEqual({ created: true });
        await put(newJob());
        await put(newJob());
        expect(await store.listJobs({ endpointId: 'ep', limit: 10 })).toHaveLength(4);
      });

      it('writes one job for calls with one key at once', async () => {
        const results = await Promise.all(Array.from({ length: 8 }, () => store.insertJobOnce({ job: newJob(), inputJson: '{}', keyDigest: 'race', requestDigest: 'r' })));
        expect(results.filter((r) => r.created)).toHaveLength(1);
        const holder = await store.findIdempotentJob('race');
        expect(results.flatMap((r) => (r.created ? [] : [r.existing.job.id]))).toEqual(Array(7).fill(holder?.job.id));
        expect(await store.listJobs({ endpointId: 'ep', limit: 10 })).toHaveLength(1);
      });

      it('keeps the key across a reopen, and frees it when its job is deleted at the end of its retention', async () => {
        const job = newJob({ retentionMs: 1000 });
        await store.insertJobOnce({ job, inputJson: '{}', keyDigest: 'k', requestDigest: 'r' });
        await store.close();
        const again = await handle.reopen();
        expect(await again.findIdempotentJob('k')).toEqual({ job, requestDigest: 'r' });
        await again.cancelJob({ id: job.id, now: T0 + 1 });
        expect(await again.deleteExpired({ now: T0 + 1001, limit: 10 })).toBe(1);
        expect(await again.findIdempotentJob('k')).toBeUndefined();
        expect(await again.insertJobOnce({ job: newJob(), inputJson: '{}', keyDigest: 'k', requestDigest: 'r2' })).toEqual({ created: true });
      });
    });

    describe('shortenRetention', () => {
      it('shortens a live job so that it expires sooner once finished', async () => {
        const job = await insert({ retentionMs: 30 * MIN });
        await store.shortenRetention({ id: job.id, ttlMs: 1000 });
        expect(await get(job.id)).toEqual({ ...job, retentionMs: 1000 });
        const cancelled = await store.cancelJob({ id: job.id, now: T0 + 5000 });
        expect(cancelled?.expiresAt).toBe(T0 + 6000);
      });

      it('shortens a finished job and never lengthens', async () => {
        const job = await insert({ retentionMs: 30 * MIN });
        const finishedAt = T0 + 5000;
        await store.cancelJob({ id: job.id, now: finishedAt });
        await store.shortenRetention({ id: job.id, ttlMs: 60 * MIN });
        expect(await get(job.id)).toMatchObject({ retentionMs: 30 * MIN, expiresAt: finishedAt + 30 * MIN });
        await store.shortenRetention({ id: job.id, ttlMs: 2000 });
        expect(await get(job.id)).toMatchObject({ retentionMs: 2000, expiresAt: finishedAt + 2000 });
        await store.shortenRetention({ id: job.id, ttlMs: 5000 });
        expect(await get(job.id)).toMatchObject({ retentionMs: 2000, expiresAt: finishedAt + 2000 });
        await store.shortenRetention({ id: 'nope', ttlMs: 1 });
      });
    });

    describe('appendStream / readStream / deleteStream', () => {
      it('buffers chunks of the holder in order; a delivered page is deleted', async () => {
        const job = await running('w1');
        expect(await append(job.id, 'w1', ['a', 'b'])).toBe('appended');
        expect(await append(job.id, 'w1', ['c'])).toBe('appended');
        expect(await append(job.id, 'w1', [])).toBe('appended');
        expect(await drain(job.id)).toEqual(['a', 'b', 'c']);
        expect(await drain(job.id)).toEqual([]);
        expect(await append(job.id, 'w1', ['d', '{"e":1}'])).toBe('appended');
        expect(await drain(job.id)).toEqual(['d', '{"e":1}']);
      });

      it('keeps many chunks in order', async () => {
        const job = await running('w1');
        const chunks = Array.from({ length: 25 }, (_, i) => `chunk-${i}`);
        for (const chunk of chunks) await append(job.id, 'w1', [chunk]);
        expect(await drain(job.id)).toEqual(chunks);
      });

      it('refuses other workers, queued and finished jobs', async () => {
        const job = await running('w1');
        expect(await append(job.id, 'w2', ['x'])).toBe('not-held');
        const queued = await insert();
        expect(await append(queued.id, 'w1', ['x'])).toBe('not-held');
        await store.finishJob({ id: job.id, workerId: 'w1', status: 'COMPLETED', outputJson: '1', error: null, now: T0 + 2000 });
        expect(await append(job.id, 'w1', ['late'])).toBe('not-held');
        expect(await append('nope', 'w1', ['x'])).toBe('not-held');
        expect(await drain(job.id)).toEqual([]);
        expect(await drain(queued.id)).toEqual([]);
        expect(await drain('nope')).toEqual([]);
      });

      it('keeps chunks buffered after the job finishes until drained', async () => {
        const job = await running('w1');
        await append(job.id, 'w1', ['last']);
        await store.finishJob({ id: job.id, workerId: 'w1', status: 'COMPLETED', outputJson: null, error: null, now: T0 + 2000 });
        expect(await drain(job.id)).toEqual(['last']);
      });
    });

    describe('stream pages and the byte cap', () => {
      const page = (id: string, after = 0, limit = 10, maxBytes = 1_000_000) => store.readStream({ id, after, limit, maxBytes });
      const texts = (p: { chunks: { chunk: string }[] }) => p.chunks.map((c) => c.chunk);

      it('reads pages bounded in chunks and bytes, the first chunk always, without deleting anything', async () => {
        const job = await running('w1');
        await append(job.id, 'w1', ['"aaaa"', '"bb"', '"c"', '"dddddd"', '"é"']);
        expect(texts(await page(job.id, 0, 2))).toEqual(['"aaaa"', '"bb"']);
        expect((await page(job.id, 0, 2)).more).toBe(true);
        // Bytes read before a chunk must be under maxBytes: 6 + 4 = 10 is not under 10.
        expect(texts(await page(job.id, 0, 10, 10))).toEqual(['"aaaa"', '"bb"']);
        expect(texts(await page(job.id, 0, 10, 1))).toEqual(['"aaaa"']);
        const all = await page(job.id);
        expect(texts(all)).toEqual(['"aaaa"', '"bb"', '"c"', '"dddddd"', '"é"']);
        expect(all.more).toBe(false);
        // Seqs increase; reading on after one gives the rest.
        const seqs = all.chunks.map((c) => c.seq);
        expect([...seqs].sort((a, b) => a - b)).toEqual(seqs);
        expect(texts(await page(job.id, seqs[2]!))).toEqual(['"dddddd"', '"é"']);
        expect(await page('nope')).toEqual({ chunks: [], more: false });
      });

      it('deletes exactly the delivered chunks, never those appended after them, and never reuses a seq', async () => {
        const job = await running('w1');
        await append(job.id, 'w1', ['1', '2']);
        const first = await page(job.id);
        await append(job.id, 'w1', ['3']);
        expect(await store.deleteStream({ id: job.id, through: first.chunks[1]!.seq })).toBe(2);
        // A second reader that delivered the same page deletes nothing more.
        expect(await store.deleteStream({ id: job.id, through: first.chunks[1]!.seq })).toBe(0);
        const rest = await page(job.id);
        expect(texts(rest)).toEqual(['3']);
        await store.deleteStream({ id: job.id, through: rest.chunks[0]!.seq });
        // An empty buffer: the next chunk still gets a seq past every earlier one.
        await append(job.id, 'w1', ['4']);
        const next = await page(job.id);
        expect(texts(next)).toEqual(['4']);
        expect(next.chunks[0]!.seq).toBeGreaterThan(rest.chunks[0]!.seq);
      });

      it('caps the undelivered bytes: a post past them is refused and cuts the run with a marker; delivery does not reopen it', async () => {
        const job = await running('w1');
        expect(await append(job.id, 'w1', ['"12345678"'], { maxBytes: 25 })).toBe('appended'); // 10 bytes
        expect(await append(job.id, 'w1', ['"1234567"', '"ab"'], { maxBytes: 25 })).toBe('appended'); // 9 + 4: 23
        expect(await append(job.id, 'w1', ['"abc"'], { maxBytes: 25 })).toBe('full'); // 23 + 5 > 25
        expect(await append(job.id, 'w1', ['1'], { maxBytes: 25 })).toBe('full'); // the run is cut: would fit, refused all the same
        const read = await page(job.id);
        expect(texts(read)).toEqual(['"12345678"', '"1234567"', '"ab"', '']);
        await store.deleteStream({ id: job.id, through: read.chunks[3]!.seq });
        expect(await append(job.id, 'w1', ['1'], { maxBytes: 25 })).toBe('full');
        expect(await append(job.id, 'w2', ['1'], { maxBytes: 25 })).toBe('not-held');
        expect(texts(await page(job.id))).toEqual([]);
        // The console's peek leaves markers out.
        await append(job.id, 'w1', []);
        expect(await store.peekStream({ id: job.id, limit: 10, maxChars: 1000 })).toEqual({ chunks: [], total: 0 });
      });

      it('gives back the bytes of delivered chunks: a reader that keeps up never meets the cap', async () => {
        const job = await running('w1');
        for (let i = 0; i < 20; i++) {
          expect(await append(job.id, 'w1', ['"0123456789"'], { maxBytes: 25 })).toBe('appended');
          const read = await page(job.id);
          await store.deleteStream({ id: job.id, through: read.chunks[read.chunks.length - 1]!.seq });
        }
      });

      it('a new run of the job (requeued, taken again) streams again after a cut; a retry starts from an empty buffer', async () => {
        const job = await running('w1', { maxAttempts: 3 });
        expect(await append(job.id, 'w1', ['"0123456789"', '"0123456789"', '"0123456789"'], { maxBytes: 25 })).toBe('full');
        await store.requeueJobs({ workerIds: ['w1'], counted: true, error: 'worker lost', now: T0 + 2000 });
        await store.claimJobs({ endpointId: 'ep', workerId: 'w2', limit: 1, now: T0 + 3000 });
        // The requeue dropped the first run's chunks and marker: 0 bytes buffered, the second run is not cut.
        expect(await append(job.id, 'w2', ['"0123456789"'], { maxBytes: 25 })).toBe('appended');
        expect(texts(await page(job.id))).toEqual(['"0123456789"']);
        await store.finishJob({ id: job.id, workerId: 'w2', status: 'FAILED', outputJson: null, error: 'x', now: T0 + 4000 });
        await store.retryJob({ id: job.id, now: T0 + 5000 });
        expect(await page(job.id)).toEqual({ chunks: [], more: false });
        await store.claimJobs({ endpointId: 'ep', workerId: 'w3', limit: 1, now: T0 + 6000 });
        expect(await append(job.id, 'w3', ['"0123456789"', '"0123456789"'], { maxBytes: 25 })).toBe('appended');
      });
    });

    describe('a job that runs again (issue 21.4)', () => {
      const page = (id: string, after = 0) => store.readStream({ id, after, limit: 100, maxBytes: 1_000_000 });

      it('tags each chunk with its run; a requeue drops the abandoned run\'s undelivered chunks and bytes, never a later run\'s', async () => {
        const job = await running('w1', { maxAttempts: 3 });
        expect(await append(job.id, 'w1', ['"a0"', '"a1"'], { maxBytes: 20 })).toBe('appended');
        const first = await page(job.id);
        expect(first.chunks.map((c) => [c.chunk, c.attempt])).toEqual([['"a0"', 1], ['"a1"', 1]]);
        // A reader delivered the first chunk; the second is still buffered when the worker is lost.
        await store.deleteStream({ id: job.id, through: first.chunks[0]!.seq });
        expect(await append(job.id, 'w1', ['"a2"'], { maxBytes: 20 })).toBe('appended');
        const { requeued } = await store.requeueJobs({ workerIds: ['w1'], counted: true, error: 'worker lost', now: T0 + 2000 });
        expect(requeued.map((j) => j.id)).toEqual([job.id]);
        expect(await page(job.id)).toEqual({ chunks: [], more: false });
        await store.claimJobs({ endpointId: 'ep', workerId: 'w2', limit: 1, now: T0 + 3000 });
        // The whole cap is the new run's: the dropped chunks' bytes were given back.
        expect(await append(job.id, 'w2', ['"b0"', '"b1"', '"b2"', '"b3"'], { maxBytes: 20 })).toBe('appended');
        const second = await page(job.id);
        expect(second.chunks.map((c) => [c.chunk, c.attempt])).toEqual([['"b0"', 2], ['"b1"', 2], ['"b2"', 2], ['"b3"', 2]]);
        expect(second.chunks[0]!.seq).toBeGreaterThan(first.chunks[1]!.seq);
        // A late delete by the first run's reader touches nothing of the new run.
        expect(await store.deleteStream({ id: job.id, through: first.chunks[1]!.seq })).toBe(0);
        expect((await page(job.id)).chunks).toHaveLength(4);
      });

      it('numbers the run after a preemption (an uncounted requeue that did run) past the preempted one', async () => {
        const job = await running('w1');
        await append(job.id, 'w1', ['"p0"']);
        await store.requeueJobs({ workerIds: ['w1'], counted: false, preempted: true, error: '', now: T0 + 2000 });
        expect(await get(job.id)).toMatchObject({ status: 'IN_QUEUE', attempts: 0, preemptions: 1 });
        expect(await page(job.id)).toEqual({ chunks: [], more: false });
        await store.claimJobs({ endpointId: 'ep', workerId: 'w2', limit: 1, now: T0 + 3000 });
        await append(job.id, 'w2', ['"q0"']);
        // attempts is 1 again (the preempted hand-out was taken back), yet this is the job's second run.
        expect((await page(job.id)).chunks.map((c) => [c.chunk, c.attempt])).toEqual([['"q0"', 2]]);
      });

      it('keeps the chunks of a job that a requeue ends FAILED at maxAttempts, and of jobs it does not touch', async () => {
        const job = await running('w1', { maxAttempts: 1 });
        const other = await running('w2');
        await append(job.id, 'w1', ['"last"']);
        await append(other.id, 'w2', ['"kept"']);
        const { failed } = await store.requeueJobs({ workerIds: ['w1'], counted: true, error: 'worker lost', now: T0 + 2000 });
        expect(failed.map((j) => j.id)).toEqual([job.id]);
        expect((await page(job.id)).chunks.map((c) => [c.chunk, c.attempt])).toEqual([['"last"', 1]]);
        expect((await page(other.id)).chunks.map((c) => c.chunk)).toEqual(['"kept"']);
      });
    });

    describe('peekStream', () => {
      const peek = (id: string, limit = 10, maxChars = 1_000_000) => store.peekStream({ id, limit, maxChars });

      it('reads buffered chunks in order without removing them, up to the limit', async () => {
        const job = await running('w1');
        expect(await peek(job.id)).toEqual({ chunks: [], total: 0 });
        await append(job.id, 'w1', ['"a"', '{"b":1}']);
        await append(job.id, 'w1', ['3']);
        expect(await peek(job.id)).toEqual({ chunks: ['"a"', '{"b":1}', '3'], total: 3 });
        expect(await peek(job.id, 2)).toEqual({ chunks: ['"a"', '{"b":1}'], total: 3 });
        // Still there for the client: a drain gets every chunk, then nothing is left to peek.
        expect(await drain(job.id)).toEqual(['"a"', '{"b":1}', '3']);
        expect(await peek(job.id)).toEqual({ chunks: [], total: 0 });
        await append(job.id, 'w1', ['4']);
        await store.finishJob({ id: job.id, workerId: 'w1', status: 'COMPLETED', outputJson: null, error: null, now: T0 + 2000 });
        expect(await peek(job.id)).toEqual({ chunks: ['4'], total: 1 });
        expect(await peek('nope')).toEqual({ chunks: [], total: 0 });
      });

      it('stops once the chunks read reach maxChars, the first one always read', async () => {
        const job = await running('w1');
        await append(job.id, 'w1', ['"aaaa"', '"bb"', '"c"', '"dddddd"']);
        // Lengths 6, 4, 3, 8: before each chunk 0, 6, 10, 13 characters were read.
        expect(await peek(job.id, 10, 1)).toEqual({ chunks: ['"aaaa"'], total: 4 });
        expect(await peek(job.id, 10, 10)).toEqual({ chunks: ['"aaaa"', '"bb"'], total: 4 });
        expect(await peek(job.id, 10, 11)).toEqual({ chunks: ['"aaaa"', '"bb"', '"c"'], total: 4 });
        expect(await peek(job.id, 2, 1000)).toEqual({ chunks: ['"aaaa"', '"bb"'], total: 4 });
        expect((await peek(job.id, 10, 1000)).chunks).toHaveLength(4);
      });

      it('reads only the job asked for', async () => {
        const a = await running('w1');
        const b = await running('w2');
        await append(a.id, 'w1', ['"a1"']);
        await append(b.id, 'w2', ['"b1"']);
        await append(a.id, 'w1', ['"a2"']);
        expect(await peek(a.id)).toEqual({ chunks: ['"a1"', '"a2"'], total: 2 });
        expect(await peek(b.id)).toEqual({ chunks: ['"b1"'], total: 1 });
      });
    });

    describe('countJobs / listJobs / jobStates', () => {
      it('counts the retained jobs of one endpoint by state', async () => {
        expect(await store.countJobs('ep')).toEqual({ inQueue: 0, inProgress: 0, completed: 0, failed: 0, cancelled: 0, timedOut: 0, retried: 0, reattempted: 0 });
        await insert();
        await insert();
        await insert({ endpointId: 'other' });
        const run = await running('w1');
        const done = await running('w1');
        await store.finishJob({ id: done.id, workerId: 'w1', status: 'COMPLETED', outputJson: '1', error: null, now: T0 + 2000 });
        const bad = await running('w1');
        await store.finishJob({ id: bad.id, workerId: 'w1', status: 'FAILED', outputJson: null, error: 'x', now: T0 + 2000 });
        const cancelled = await insert();
        await store.cancelJob({ id: cancelled.id, now: T0 + 2000 });
        const late = await insert({ ttlMs: 10 });
        await store.expireQueued({ now: T0 + 20, limit: 10 });
        // a retried job (retries > 0) and a requeued one (attempts > 1 once claimed again)
        const retried = await running('w2');
        await store.finishJob({ id: retried.id, workerId: 'w2', status: 'FAILED', outputJson: null, error: 'x', now: T0 + 2000 });
        await store.retryJob({ id: retried.id, now: T0 + 3000 });
        const lost = await running('w3');
        await store.requeueJobs({ workerIds: ['w3'], counted: true, error: 'worker lost', now: T0 + 3000 });
        // claims the two first jobs, the retried one (attempts 1) and the lost one (attempts 2)
        expect(await store.claimJobs({ endpointId: 'ep', workerId: 'w4', limit: 10, now: T0 + 4000 })).toHaveLength(4);
        expect((await get(lost.id)).attempts).toBe(2);
        await insert();

        // retried: by a client; reattempted: handed out more than once (the lost one)
        expect(await store.countJobs('ep')).toEqual({ inQueue: 1, inProgress: 5, completed: 1, failed: 1, cancelled: 1, timedOut: 1, retried: 1, reattempted: 1 });
        expect(await store.countJobs('other')).toMatchObject({ inQueue: 1, retried: 0 });
        expect(await store.countJobs('none')).toMatchObject({ inQueue: 0, completed: 0 });
        expect(run.status).toBe('IN_PROGRESS');
        expect((await get(late.id)).status).toBe('TIMED_OUT');
      });

      it('queueStats: queued normal and lowPriority jobs, their input bytes, the oldest normal one, running jobs per worker and when each took its last', async () => {
        expect(await store.queueStats({ endpointId: 'ep', now: T0 })).toEqual({
          inQueue: 0,
          inQueueBytes: 0,
          inQueueNormal: 0,
          oldestNormalQueuedAt: null,
          inProgress: 0,
          heldBy: new Map(),
          heldSince: new Map(),
        });
        await running('w1');
        await running('w1', {}, T0 + 1200);
        await running('w2', { lowPriority: true });
        const done = await running('w3');
        await store.finishJob({ id: done.id, workerId: 'w3', status: 'COMPLETED', outputJson: '1', error: null, now: T0 + 1500 });
        // Input bytes are UTF-8 bytes, not characters ('é' is two).
        await insert({ lowPriority: true, now: T0 + 10, inputJson: `"${'x'.repeat(1000)}"` });
        await insert({ now: T0 + 20, inputJson: '"é"' });
        await insert({ now: T0 + 30, inputJson: `{"a":"${'y'.repeat(70_000)}"}` });
        await insert({ ttlMs: 100, now: T0 + 5 }); // its queue ttl has passed by T0 + 2000
        await insert({ endpointId: 'other', now: T0 });
        expect(await store.queueStats({ endpointId: 'ep', now: T0 + 2000 })).toEqual({
          inQueue: 3,
          inQueueBytes: 1002 + 4 + 70_008,
          inQueueNormal: 2,
          oldestNormalQueuedAt: T0 + 20,
          inProgress: 3,
          heldBy: new Map([['w1', 2], ['w2', 1]]),
          // The start of the job each took last (the allocator preempts the least run first).
          heldSince: new Map([['w1', T0 + 1200], ['w2', T0 + 1000]]),
        });
        // Only lowPriority jobs queued: nothing that justifies a new worker.
        await store.claimJobs({ endpointId: 'ep', workerId: 'w4', limit: 1, now: T0 + 2000 }); // the lowPriority one (oldest)
        await store.claimJobs({ endpointId: 'ep', workerId: 'w4', limit: 2, now: T0 + 2000 });
        await insert({ lowPriority: true, now: T0 + 40, inputJson: '[1,2,3]' });
        expect(await store.queueStats({ endpointId: 'ep', now: T0 + 2000 })).toMatchObject({
          inQueue: 1,
          inQueueBytes: 7, // the claimed jobs' bytes left the count
          inQueueNormal: 0,
          oldestNormalQueuedAt: null,
          inProgress: 6,
          heldBy: new Map([['w1', 2], ['w2', 1], ['w4', 3]]),
        });
        expect(await store.queueStats({ endpointId: 'other', now: T0 + 2000 })).toMatchObject({ inQueue: 1, inQueueNormal: 1, oldestNormalQueuedAt: T0 });
      });

      it('queueByKey: queued jobs and input bytes per key (most first, at most `limit`), totals over every key', async () => {
        expect(await store.queueByKey({ endpointId: 'ep', now: T0, limit: 10 })).toEqual({ jobs: 0, bytes: 0, keys: [] });
        await running('w1', { keyId: 'key_b' }); // running, not queued
        for (let i = 0; i < 3; i++) await insert({ keyId: 'key_a', inputJson: '"aaaa"' });
        await insert({ keyId: 'key_b', inputJson: '"é"' });
        await insert({ inputJson: '1' });
        await insert({ keyId: 'key_b', ttlMs: 100, now: T0 }); // its queue ttl has passed by T0 + 2000
        await insert({ keyId: 'key_a', endpointId: 'other' });
        expect(await store.queueByKey({ endpointId: 'ep', now: T0 + 2000, limit: 10 })).toEqual({
          jobs: 5,
          bytes: 3 * 6 + 4 + 1,
          keys: [
            { keyId: 'key_a', jobs: 3, bytes: 18 },
            { keyId: '', jobs: 1, bytes: 1 },
            { keyId: 'key_b', jobs: 1, bytes: 4 },
          ],
        });
        // The totals count the keys past the limit too.
        expect(await store.queueByKey({ endpointId: 'ep', now: T0 + 2000, limit: 1 })).toEqual({ jobs: 5, bytes: 23, keys: [{ keyId: 'key_a', jobs: 3, bytes: 18 }] });
      });

      it('lists the newest jobs of an endpoint first', async () => {
        const a = await insert({ now: T0 });
        const b = await insert({ now: T0 + 10 });
        const c = await insert({ now: T0 + 10 });
        await insert({ endpointId: 'other', now: T0 + 20 });
        expect((await store.listJobs({ endpointId: 'ep', limit: 10 })).map((j) => j.id)).toEqual([c.id, b.id, a.id]);
        expect((await store.listJobs({ endpointId: 'ep', limit: 2 })).map((j) => j.id)).toEqual([c.id, b.id]);
        expect((await store.listJobs({ endpointId: 'ep', limit: 1 }))[0]).toEqual(c);
        expect(await store.listJobs({ endpointId: 'none', limit: 10 })).toEqual([]);
      });

      it('reports the state and holder of existing jobs', async () => {
        const queued = await insert();
        const run = await running('w1');
        const states = await store.jobStates([queued.id, 'gone', run.id]);
        expect([...states].sort((x, y) => x.id.localeCompare(y.id))).toEqual(
          [
            { id: queued.id, status: 'IN_QUEUE', workerId: null },
            { id: run.id, status: 'IN_PROGRESS', workerId: 'w1' },
          ].sort((x, y) => x.id.localeCompare(y.id)),
        );
        expect(await store.jobStates([])).toEqual([]);
      });
    });

    describe('job states', () => {
      /** One job in `status`, written as given: webhook due, retention over and retry still allowed at T0 + 10. */
      async function inState(status: JobStatus): Promise<JobRecord> {
        const job: JobRecord = {
          ...newJob({ webhook: 'https://hook.example/' }),
          status,
          workerId: status === 'IN_QUEUE' ? null : 'w1',
          webhookNextAt: T0,
          expiresAt: T0 + 100,
        };
        await put(job);
        return job;
      }
      const terminal: JobStatus[] = ['COMPLETED', 'FAILED', 'CANCELLED', 'TIMED_OUT'];

      it('delivers webhooks and deletes expired jobs of the terminal states only', async () => {
        const jobs = new Map<JobStatus, JobRecord>();
        for (const status of JOB_STATUSES) jobs.set(status, await inState(status));
        const idsOf = (statuses: JobStatus[]) => statuses.map((status) => jobs.get(status)?.id);
        expect((await store.dueWebhooks({ now: T0 + 10, limit: 10 })).map((j) => j.id)).toEqual(idsOf(terminal));
        for (const job of jobs.values()) await store.markWebhook({ id: job.id, attempts: 1, nextAt: null });
        expect(await store.deleteExpired({ now: T0 + 100, limit: 10 })).toBe(terminal.length);
        expect((await store.listJobs({ endpointId: 'ep', limit: 10 })).map((j) => j.status).sort()).toEqual(['IN_PROGRESS', 'IN_QUEUE']);
      });

      it('cancels the live states and retries failed and timed-out jobs only', async () => {
        for (const status of JOB_STATUSES) {
          const job = await inState(status);
          const cancelled = await store.cancelJob({ id: job.id, now: T0 + 10 });
          expect(cancelled?.status, status).toBe(status === 'IN_QUEUE' || status === 'IN_PROGRESS' ? 'CANCELLED' : undefined);
          const again = await inState(status);
          const retried = await store.retryJob({ id: again.id, now: T0 + 10 });
          expect(retried?.status, status).toBe(status === 'FAILED' || status === 'TIMED_OUT' ? 'IN_QUEUE' : undefined);
        }
      });
    });

    describe('probeWrite (upkeep)', () => {
      it('commits the one probe row, again and again: what ends a store fault episode', async () => {
        await store.probeWrite(T0);
        await store.probeWrite(T0 + 1);
        await expect(store.probeWrite(T0 + 2)).resolves.toBeUndefined();
      });
    });

    describe('webhooks', () => {
      it('lists due deliveries oldest first and follows markWebhook', async () => {
        const a = await insert({ webhook: 'https://hook.example/a' });
        const b = await insert({ webhook: 'https://hook.example/b' });
        const plain = await insert();
        const live = await insert({ webhook: 'https://hook.example/live' });
        await store.cancelJob({ id: b.id, now: T0 + 100 });
        await store.cancelJob({ id: a.id, now: T0 + 200 });
        await store.cancelJob({ id: plain.id, now: T0 + 50 });

        expect(await store.dueWebhooks({ now: T0 + 99, limit: 10 })).toEqual([]);
        const due = await store.dueWebhooks({ now: T0 + 1000, limit: 10 });
        expect(due.map((j) => j.id)).toEqual([b.id, a.id]);
        expect(due[0]).toEqual(await get(b.id));
        expect((await store.dueWebhooks({ now: T0 + 1000, limit: 1 })).map((j) => j.id)).toEqual([b.id]);
        // Keys at their share are skipped ('' names jobs without a key).
        const keyed = await insert({ webhook: 'https://hook.example/k', keyId: 'k1' });
        await store.cancelJob({ id: keyed.id, now: T0 + 150 });
        expect((await store.dueWebhooks({ now: T0 + 1000, limit: 10, skipKeys: [] })).map((j) => j.id)).toEqual([b.id, keyed.id, a.id]);
        expect((await store.dueWebhooks({ now: T0 + 1000, limit: 1, skipKeys: [''] })).map((j) => j.id)).toEqual([keyed.id]);
        expect((await store.dueWebhooks({ now: T0 + 1000, limit: 10, skipKeys: ['k1'] })).map((j) => j.id)).toEqual([b.id, a.id]);
        await store.markWebhook({ id: keyed.id, attempts: 1, nextAt: null });

        await store.markWebhook({ id: b.id, attempts: 1, nextAt: T0 + 10_000 });
        expect(await get(b.id)).toMatchObject({ webhookAttempts: 1, webhookNextAt: T0 + 10_000 });
        expect((await store.dueWebhooks({ now: T0 + 1000, limit: 10 })).map((j) => j.id)).toEqual([a.id]);
        expect((await store.dueWebhooks({ now: T0 + 10_000, limit: 10 })).map((j) => j.id)).toEqual([a.id, b.id]);

        await store.markWebhook({ id: a.id, attempts: 1, nextAt: null });
        expect(await get(a.id)).toMatchObject({ webhookAttempts: 1, webhookNextAt: null });
        expect((await store.dueWebhooks({ now: T0 + 99_999, limit: 10 })).map((j) => j.id)).toEqual([b.id]);
        expect((await get(live.id)).webhookNextAt).toBeNull();
      });
    });

    describe('redeliverWebhook', () => {
      it('makes a finished delivery due again, keeping its attempts; refuses a live job, one without a webhook, and a pending delivery', async () => {
        const hooked = await insert({ webhook: 'https://hook.example/a' });
        const plain = await insert();
        const live = await insert({ webhook: 'https://hook.example/live' });
        await store.cancelJob({ id: hooked.id, now: T0 + 100 });
        await store.cancelJob({ id: plain.id, now: T0 + 100 });
        // Pending (due since the cancel): not again.
        expect(await store.redeliverWebhook({ id: hooked.id, now: T0 + 200 })).toBe(false);
        await store.markWebhook({ id: hooked.id, attempts: 3, nextAt: null });
        expect(await store.redeliverWebhook({ id: hooked.id, now: T0 + 300 })).toBe(true);
        expect(await get(hooked.id)).toMatchObject({ webhookNextAt: T0 + 300, webhookAttempts: 3, status: 'CANCELLED' });
        expect((await store.dueWebhooks({ now: T0 + 300, limit: 10 })).map((j) => j.id)).toEqual([hooked.id]);
        expect(await store.redeliverWebhook({ id: hooked.id, now: T0 + 400 })).toBe(false);
        expect(await store.redeliverWebhook({ id: plain.id, now: T0 + 300 })).toBe(false);
        expect(await store.redeliverWebhook({ id: live.id, now: T0 + 300 })).toBe(false);
        expect(await store.redeliverWebhook({ id: 'nope', now: T0 + 300 })).toBe(false);
        expect((await get(live.id))?.webhookNextAt).toBeNull();
      });
    });

    describe('webhook attempts', () => {
      const attempt = (n: number, over: Partial<WebhookAttempt> = {}): WebhookAttempt => ({ retries: 0, attempt: n, at: T0 + n * 1000, httpStatus: 500, error: null, ...over });

      it('records an attempt with the delivery state in one call, and the lease records nothing', async () => {
        const job = await insert({ webhook: 'https://hook.example/a' });
        await store.cancelJob({ id: job.id, now: T0 + 100 });
        expect(await store.listWebhookAttempts(job.id)).toEqual([]);
        await store.markWebhook({ id: job.id, attempts: 0, nextAt: T0 + 40_000 });
        expect(await store.listWebhookAttempts(job.id)).toEqual([]);
        await store.markWebhook({ id: job.id, attempts: 1, nextAt: T0 + 5000, attempt: attempt(1, { httpStatus: null, error: 'timeout' }) });
        expect(await get(job.id)).toMatchObject({ webhookAttempts: 1, webhookNextAt: T0 + 5000 });
        await store.markWebhook({ id: job.id, attempts: 2, nextAt: T0 + 9000, attempt: attempt(2, { httpStatus: 503 }) });
        await store.markWebhook({ id: job.id, attempts: 3, nextAt: null, attempt: attempt(3, { httpStatus: 204 }) });
        expect(await get(job.id)).toMatchObject({ webhookAttempts: 3, webhookNextAt: null });
        expect(await store.listWebhookAttempts(job.id)).toEqual([
          { retries: 0, attempt: 1, at: T0 + 1000, httpStatus: null, error: 'timeout' },
          { retries: 0, attempt: 2, at: T0 + 2000, httpStatus: 503, error: null },
          { retries: 0, attempt: 3, at: T0 + 3000, httpStatus: 204, error: null },
        ]);
        expect(await store.listWebhookAttempts('nope')).toEqual([]);
      });

      it(`keeps the newest ${WEBHOOK_ATTEMPTS_KEPT} records of a job, across its retries, and each job its own`, async () => {
        const job = await insert({ webhook: 'https://hook.example/a' });
        const other = await insert({ webhook: 'https://hook.example/b' });
        await store.cancelJob({ id: other.id, now: T0 + 100 });
        await store.markWebhook({ id: other.id, attempts: 1, nextAt: null, attempt: attempt(1, { httpStatus: 200 }) });
        const total = WEBHOOK_ATTEMPTS_KEPT + 4;
        for (let n = 1; n <= total; n++) {
          await store.markWebhook({ id: job.id, attempts: n, nextAt: null, attempt: attempt(n, { retries: Math.floor((n - 1) / 3) }) });
        }
        const kept = await store.listWebhookAttempts(job.id);
        expect(kept.map((a) => a.attempt)).toEqual(Array.from({ length: WEBHOOK_ATTEMPTS_KEPT }, (_, i) => total - WEBHOOK_ATTEMPTS_KEPT + 1 + i));
        expect(kept[kept.length - 1]).toMatchObject({ retries: Math.floor((total - 1) / 3) });
        expect(await store.listWebhookAttempts(other.id)).toHaveLength(1);
      });

      it('keeps the records through a retry of the job', async () => {
        const job = await running('w1', { webhook: 'https://hook.example/' });
        await store.finishJob({ id: job.id, workerId: 'w1', status: 'FAILED', outputJson: null, error: 'x', now: T0 + 2000 });
        await store.markWebhook({ id: job.id, attempts: 1, nextAt: null, attempt: attempt(1, { httpStatus: 200 }) });
        const retried = await store.retryJob({ id: job.id, now: T0 + 3000 });
        expect(retried).toMatchObject({ webhookAttempts: 0, webhookNextAt: null, retries: 1 });
        expect(await store.listWebhookAttempts(job.id)).toHaveLength(1);
      });

      it('records nothing for an unknown job, and the records go with the job (retention, endpoint deletion)', async () => {
        await store.markWebhook({ id: 'nope', attempts: 1, nextAt: null, attempt: attempt(1) });
        expect(await store.listWebhookAttempts('nope')).toEqual([]);

        const expiring = await insert({ retentionMs: 1000, webhook: 'https://hook.example/' });
        await store.cancelJob({ id: expiring.id, now: T0 + 2000 });
        await store.markWebhook({ id: expiring.id, attempts: 1, nextAt: null, attempt: attempt(1, { httpStatus: 200 }) });
        expect(await store.deleteExpired({ now: T0 + 3000, limit: 10 })).toBe(1);
        expect(await store.listWebhookAttempts(expiring.id)).toEqual([]);

        await store.createEndpoint(endpoint('gone'));
        const ofEndpoint = await insert({ endpointId: 'gone', webhook: 'https://hook.example/' });
        await store.cancelJob({ id: ofEndpoint.id, now: T0 + 2000 });
        await store.markWebhook({ id: ofEndpoint.id, attempts: 1, nextAt: null, attempt: attempt(1, { httpStatus: 200 }) });
        expect(await store.deleteEndpoint('gone')).toBe(true);
        expect(await store.listWebhookAttempts(ofEndpoint.id)).toEqual([]);
        // A job later given the same id starts with no records.
        await put({ ...ofEndpoint, status: 'IN_QUEUE' });
        expect(await store.listWebhookAttempts(ofEndpoint.id)).toEqual([]);
      });
    });

    describe('workers', () => {
      it('creates and refreshes liveness rows', async () => {
        await store.touchWorker({ id: 'w1', endpointId: 'ep', now: T0, version: '1.12.0' });
        expect(await store.listWorkers()).toEqual([
          { id: 'w1', endpointId: 'ep', firstSeenAt: T0, lastSeenAt: T0, healthy: true, reason: null, version: '1.12.0' },
        ]);
        await store.touchWorker({ id: 'w1', endpointId: 'ep', now: T0 + 10, healthy: false, reason: 'gpu gone' });
        expect(await store.listWorkers('ep')).toEqual([
          { id: 'w1', endpointId: 'ep', firstSeenAt: T0, lastSeenAt: T0 + 10, healthy: false, reason: 'gpu gone', version: '1.12.0' },
        ]);
        await store.touchWorker({ id: 'w1', endpointId: 'ep', now: T0 + 20 });
        expect((await store.listWorkers())[0]).toMatchObject({ lastSeenAt: T0 + 20, healthy: false, reason: 'gpu gone', version: '1.12.0' });
        await store.touchWorker({ id: 'w1', endpointId: 'ep', now: T0 + 30, healthy: true, reason: null, version: null });
        expect((await store.listWorkers())[0]).toMatchObject({ firstSeenAt: T0, lastSeenAt: T0 + 30, healthy: true, reason: null, version: null });
      });

      it('lists by endpoint, finds stale workers and deletes them', async () => {
        await store.touchWorker({ id: 'w1', endpointId: 'ep', now: T0 });
        await store.touchWorker({ id: 'w2', endpointId: 'ep', now: T0 + 100 });
        await store.touchWorker({ id: 'w3', endpointId: 'other', now: T0 + 200 });
        expect((await store.listWorkers('ep')).map((w) => w.id).sort()).toEqual(['w1', 'w2']);
        expect((await store.listWorkers()).map((w) => w.id).sort()).toEqual(['w1', 'w2', 'w3']);
        expect(await store.listWorkers('none')).toEqual([]);
        expect((await store.findStaleWorkers(T0 + 100)).map((w) => w.id)).toEqual(['w1']);
        expect((await store.findStaleWorkers(T0 + 201)).map((w) => w.id).sort()).toEqual(['w1', 'w2', 'w3']);
        await store.deleteWorkers(['w1', 'w3', 'nope']);
        expect((await store.listWorkers()).map((w) => w.id)).toEqual(['w2']);
        await store.deleteWorkers([]);
        expect((await store.listWorkers()).map((w) => w.id)).toEqual(['w2']);
      });

      it('lists the running jobs a worker holds', async () => {
        const a = await running('w1');
        const b = await running('w1');
        await running('w2');
        await store.finishJob({ id: b.id, workerId: 'w1', status: 'COMPLETED', outputJson: '1', error: null, now: T0 + 2000 });
        const c = await running('w1');
        expect([...(await store.jobsHeldBy('w1'))].sort()).toEqual([a.id, c.id].sort());
        expect(await store.jobsHeldBy('nobody')).toEqual([]);
      });
    });

    describe('endpoints', () => {
      it('creates, reads, lists, updates and deletes', async () => {
        expect(await store.createEndpoint(endpoint('a'))).toBe(true);
        expect(await store.createEndpoint(endpoint('b', { workerJson: null, scalerType: 'REQUEST_COUNT', createdAt: T0 + 1 }))).toBe(true);
        expect(await store.createEndpoint(endpoint('a', { name: 'dup' }))).toBe(false);
        expect(await store.getEndpoint('a')).toEqual(endpoint('a'));
        expect(await store.getEndpoint('nope')).toBeUndefined();
        expect(await store.listEndpoints()).toEqual([
          endpoint('a'),
          endpoint('b', { workerJson: null, scalerType: 'REQUEST_COUNT', createdAt: T0 + 1 }),
        ]);

        const changed = endpoint('a', { name: 'renamed', workersMax: 9, maxAttempts: 1, idleTimeout: 60, webhookSecret: 'v1:sealed', priority: 90, preemptible: true, flashboot: true, shareWeight: 7, updatedAt: T0 + 50 });
        expect(await store.updateEndpoint(changed)).toBe(true);
        expect(await store.getEndpoint('a')).toEqual(changed);
        // The id and createdAt are never replaced.
        expect(await store.updateEndpoint({ ...changed, createdAt: T0 + 999, updatedAt: T0 + 60 })).toBe(true);
        expect(await store.getEndpoint('a')).toEqual({ ...changed, updatedAt: T0 + 60 });
        expect(await store.updateEndpoint(endpoint('nope'))).toBe(false);
        expect(await store.getEndpoint('nope')).toBeUndefined();

        expect(await store.deleteEndpoint('a')).toBe(true);
        expect(await store.deleteEndpoint('a')).toBe(false);
        expect((await store.listEndpoints()).map((e) => e.id)).toEqual(['b']);
      });

      it('deleting an endpoint removes its jobs, stream chunks and workers', async () => {
        await store.createEndpoint(endpoint('ep'));
        await store.createEndpoint(endpoint('other'));
        const job = await running('w1');
        await append(job.id, 'w1', ['x']);
        const queued = await insert();
        const kept = await insert({ endpointId: 'other' });
        await store.touchWorker({ id: 'w1', endpointId: 'ep', now: T0 });
        await store.touchWorker({ id: 'w2', endpointId: 'other', now: T0 });

        expect(await store.deleteEndpoint('ep')).toBe(true);
        expect(await store.getJob(job.id)).toBeUndefined();
        expect(await store.getJob(queued.id)).toBeUndefined();
        expect(await drain(job.id)).toEqual([]);
        expect(await store.getJob(kept.id)).toEqual(kept);
        expect((await store.listWorkers()).map((w) => w.id)).toEqual(['w2']);
        expect(await store.countJobs('ep')).toMatchObject({ inQueue: 0, inProgress: 0 });
      });
    });

    describe('per-minute aggregates', () => {
      const DAY = 24 * 60 * MIN;
      /** A minute of `endpointId` with one job submitted and one queue-delay sample in bucket 3. */
      const minute = (endpointId: string, at: number) => {
        const delay = emptyBuckets();
        delay[3] = 1;
        return { endpointId, minute: at, submitted: 1, completed: 0, failed: 0, queueDepth: 0, delay, execution: emptyBuckets() };
      };
      const minutesOf = async (endpointId: string) => store.readMinutes({ endpointId, from: 0, to: T0 + 30 * DAY });

      it('deleteMinutesBefore deletes the oldest rows below the cutoff with their buckets, up to the limit, and keeps the rest', async () => {
        const cutoff = T0 + 10 * DAY;
        await store.addMinutes([minute('ep', T0), minute('ep', T0 + MIN), minute('other', T0 + 2 * MIN), minute('ep', cutoff), minute('ep', cutoff + MIN)]);

        expect(await store.deleteMinutesBefore({ before: cutoff, limit: 2 })).toBe(2);
        expect((await minutesOf('ep')).map((m) => m.minute)).toEqual([cutoff, cutoff + MIN]);
        expect((await minutesOf('other')).map((m) => m.minute)).toEqual([T0 + 2 * MIN]);
        expect(await store.deleteMinutesBefore({ before: cutoff, limit: 10 })).toBe(1);
        expect(await store.deleteMinutesBefore({ before: cutoff, limit: 10 })).toBe(0);
        expect(await minutesOf('other')).toEqual([]);
        const kept = await minutesOf('ep');
        expect(kept.map((m) => [m.minute, m.submitted, m.delay[3]])).toEqual([
          [cutoff, 1, 1],
          [cutoff + MIN, 1, 1],
        ]);

        // The buckets went with their rows: the same minute written again starts from nothing.
        await store.addMinutes([{ ...minute('ep', T0), delay: emptyBuckets() }]);
        const again = await store.readMinutes({ endpointId: 'ep', from: T0, to: T0 + MIN });
        expect(again.map((m) => [m.submitted, m.delay.reduce((a, b) => a + b, 0)])).toEqual([[1, 0]]);
      });

      it('deleting an endpoint deletes its minutes and their buckets; a new endpoint with the same id starts empty', async () => {
        await store.createEndpoint(endpoint('ep'));
        await store.createEndpoint(endpoint('other'));
        await store.addMinutes([minute('ep', T0), minute('ep', T0 + MIN), minute('other', T0)]);

        expect(await store.deleteEndpoint('ep')).toBe(true);
        expect(await minutesOf('ep')).toEqual([]);
        expect((await minutesOf('other')).map((m) => [m.minute, m.delay[3]])).toEqual([[T0, 1]]);

        await store.createEndpoint(endpoint('ep'));
        expect(await minutesOf('ep')).toEqual([]);
        await store.addMinutes([{ ...minute('ep', T0), delay: emptyBuckets() }]);
        expect((await minutesOf('ep')).map((m) => [m.submitted, m.delay.reduce((a, b) => a + b, 0)])).toEqual([[1, 0]]);
      });
    });

    describe('API keys', () => {
      it('creates, finds by hash, lists, counts scopes and deletes', async () => {
        const admin = key('k1', { scopes: ['admin'], createdAt: T0 });
        const limited = key('k2', { scopes: ['run', 'read'], endpoints: ['ep', 'other'], createdAt: T0 + 1 });
        const worker = key('k3', { scopes: ['worker'], createdAt: T0 + 2 });
        for (const k of [admin, limited, worker]) await store.createKey(k);

        expect(await store.getKeyByHash('hash-k2')).toEqual(limited);
        expect(await store.getKeyByHash('hash-nope')).toBeUndefined();
        expect(await store.listKeys()).toEqual([admin, limited, worker]);
        expect(await store.countKeysWithScope('admin')).toBe(1);
        expect(await store.countKeysWithScope('read')).toBe(1);
        expect(await store.countKeysWithScope('run')).toBe(1);

        expect(await store.deleteKey('k1')).toBe(true);
        expect(await store.deleteKey('k1')).toBe(false);
        expect(await store.countKeysWithScope('admin')).toBe(0);
        expect(await store.getKeyByHash('hash-k1')).toBeUndefined();
        expect((await store.listKeys()).map((k) => k.id)).toEqual(['k2', 'k3']);
      });

      it('keeps a key\'s prefix and managed flag, and writes its last use at most once a gap', async () => {
        const pool = key('kp', { prefix: 'gk_AbCdE', managed: true });
        await store.createKey(pool);
        expect(await store.getKey('kp')).toEqual(pool);
        await store.touchKey({ id: 'kp', at: T0 + 1000, minGapMs: 60_000 });
        expect((await store.getKey('kp'))?.lastUsedAt).toBe(T0 + 1000);
        // Within the gap: left as it is.
        await store.touchKey({ id: 'kp', at: T0 + 30_000, minGapMs: 60_000 });
        expect((await store.getKey('kp'))?.lastUsedAt).toBe(T0 + 1000);
        await store.touchKey({ id: 'kp', at: T0 + 61_000, minGapMs: 60_000 });
        expect(await store.getKeyByHash('hash-kp')).toEqual({ ...pool, lastUsedAt: T0 + 61_000 });
        await store.touchKey({ id: 'nope', at: T0, minGapMs: 60_000 });
      });

      it('rejects a second key with the same hash', async () => {
        await store.createKey(key('k1'));
        await expect(store.createKey(key('k2', { hash: 'hash-k1' }))).rejects.toThrow();
        expect((await store.listKeys()).map((k) => k.id)).toEqual(['k1']);
      });
    });

    describe('usage', () => {
      const DAY = 86_400_000;
      const meter = (jobId: string, keyId: string | null, endpointId: string, costUnits: bigint, createdAt: number, extra: Partial<JobMeter> = {}): JobMeter => ({
        jobId,
        run: 0,
        keyId,
        endpointId,
        status: 'COMPLETED',
        executionMs: 1000,
        pixels: 1024 * 1024,
        costUnits,
        workerId: null,
        createdAt,
        ...extra,
      });

      it('sums by key and by endpoint over [from, to), exactly, writing each run of a job once', async () => {
        await store.recordJobMeter(meter('j1', 'k1', 'image-quality', 209_715_200n, T0));
        await store.recordJobMeter(meter('j1', 'k1', 'image-quality', 999n, T0, { executionMs: 5 })); // same run: ignored
        await store.recordJobMeter(meter('j2', 'k1', 'image-fast', 25_165_824n, T0 + 10));
        await store.recordJobMeter(meter('j3', 'k2', 'image-fast', 25_165_824n, T0 + 20));
        await store.recordJobMeter(meter('j4', null, 'image-fast', 1n, T0 + 30));
        await store.recordJobMeter(meter('j5', 'k2', 'image-fast', 7n, T0 + 40)); // at `to`: excluded

        expect(await store.sumUsage({ from: T0, to: T0 + 40, groupBy: ['key'] })).toEqual([
          { key: 'k1', jobs: 2, executionMs: 2000, pixels: 2 * 1024 * 1024, costUnits: 234_881_024n },
          { key: 'k2', jobs: 1, executionMs: 1000, pixels: 1024 * 1024, costUnits: 25_165_824n },
          { key: null, jobs: 1, executionMs: 1000, pixels: 1024 * 1024, costUnits: 1n },
        ]);
        expect(await store.sumUsage({ from: T0 + 10, to: T0 + 41, groupBy: ['endpoint'] })).toEqual([
          { endpoint: 'image-fast', jobs: 4, executionMs: 4000, pixels: 4 * 1024 * 1024, costUnits: 50_331_656n },
        ]);
        expect(await store.sumUsage({ from: T0 + 100, to: T0 + 200, groupBy: ['key'] })).toEqual([]);
      });

      it("counts each worker's metered runs on the endpoint, and the completed ones", async () => {
        await store.recordJobMeter(meter('w1', 'k1', 'ep', 1n, T0, { workerId: 'wa' }));
        await store.recordJobMeter(meter('w2', 'k1', 'ep', 1n, T0, { workerId: 'wa', status: 'FAILED' }));
        await store.recordJobMeter(meter('w2', 'k1', 'ep', 1n, T0, { workerId: 'wa', run: 1 }));
        await store.recordJobMeter(meter('w3', 'k1', 'ep', 1n, T0, { workerId: 'wb' }));
        await store.recordJobMeter(meter('w4', 'k1', 'other', 1n, T0, { workerId: 'wb' }));
        await store.recordJobMeter(meter('w5', 'k1', 'ep', 1n, T0));
        const counts = await store.countWorkerRuns({ endpointId: 'ep', workerIds: ['wa', 'wb', 'wc'] });
        expect(counts.sort((x, y) => x.workerId.localeCompare(y.workerId))).toEqual([
          { workerId: 'wa', runs: 3, completed: 2 },
          { workerId: 'wb', runs: 1, completed: 1 },
        ]);
        expect(await store.countWorkerRuns({ endpointId: 'ep', workerIds: [] })).toEqual([]);
        expect((await store.listJobMeters('w2')).map((m) => m.workerId)).toEqual(['wa', 'wa']);
      });

      it('meters a retried job per run, and groups by UTC day with key and endpoint', async () => {
        const day0 = Math.floor(T0 / DAY) * DAY;
        await store.recordJobMeter(meter('r', 'k1', 'ep', 10n, day0 + 5, { status: 'FAILED', pixels: 0, executionMs: 250 }));
        await store.recordJobMeter(meter('r', 'k1', 'ep', 20n, day0 + DAY + 5, { run: 1, executionMs: 750 }));
        await store.recordJobMeter(meter('s', 'k2', 'ep', 30n, day0 + DAY + 6));
        expect(await store.sumUsage({ from: day0, to: day0 + 2 * DAY, groupBy: ['day', 'key', 'endpoint'] })).toEqual([
          { day: day0, key: 'k1', endpoint: 'ep', jobs: 1, executionMs: 250, pixels: 0, costUnits: 10n },
          { day: day0 + DAY, key: 'k2', endpoint: 'ep', jobs: 1, executionMs: 1000, pixels: 1024 * 1024, costUnits: 30n },
          { day: day0 + DAY, key: 'k1', endpoint: 'ep', jobs: 1, executionMs: 750, pixels: 1024 * 1024, costUnits: 20n },
        ]);
        expect(await store.keySpend({ keyId: 'k1', from: day0 })).toBe(30n);
        expect(await store.keySpend({ keyId: 'k1', from: day0 + DAY })).toBe(20n);
        expect(await store.keySpend({ keyId: 'nobody', from: 0 })).toBe(0n);
      });

      it('keeps sums exact past 2^53 units', async () => {
        const big = 2n ** 53n + 1n;
        await store.recordJobMeter(meter('a', 'k', 'ep', big, T0));
        await store.recordJobMeter(meter('b', 'k', 'ep', big, T0));
        expect((await store.sumUsage({ from: 0, to: T0 + 1, groupBy: ['key'] }))[0]?.costUnits).toBe(2n * big);
        expect(await store.keySpend({ keyId: 'k', from: 0 })).toBe(2n * big);
      });

      it('counts a key\'s queued and running jobs', async () => {
        const q1 = await insert({ keyId: 'k1' });
        await insert({ keyId: 'k1' });
        await insert({ keyId: 'k2' });
        expect(await store.countLiveJobs('k1')).toBe(2);
        await store.cancelJob({ id: q1.id, now: T0 + 1 });
        expect(await store.countLiveJobs('k1')).toBe(1);
        expect(await store.countLiveJobs('nobody')).toBe(0);
      });

      it('opens a worker meter once, moves its end while it runs and closes it once', async () => {
        const w = { workerId: 'w1', startedAt: T0, endpointId: 'ep', gpus: 2, endedAt: T0, open: true };
        await store.openWorkerMeter(w);
        await store.openWorkerMeter({ ...w, endedAt: T0 + 999 }); // same start: ignored
        await store.openWorkerMeter({ ...w, workerId: 'w2', startedAt: T0 + 10, endedAt: T0 + 10, gpus: 0 });
        await store.advanceWorkerMeters({ meters: [{ workerId: 'w1', startedAt: T0 }], at: T0 + 500 });
        expect(await store.closeWorkerMeter({ workerId: 'w1', startedAt: T0, at: T0 + 600 })).toBe(true);
        expect(await store.closeWorkerMeter({ workerId: 'w1', startedAt: T0, at: T0 + 9000 })).toBe(false);
        await store.advanceWorkerMeters({ meters: [{ workerId: 'w1', startedAt: T0 }], at: T0 + 9000 }); // closed: left
        expect(await store.listWorkerMeters({ from: T0, to: T0 + 1000, limit: 10 })).toEqual([
          { ...w, endedAt: T0 + 600, open: false },
          { workerId: 'w2', startedAt: T0 + 10, endpointId: 'ep', gpus: 0, endedAt: T0 + 10, open: true },
        ]);
        expect(await store.listWorkerMeters({ from: T0 + 601, to: T0 + 1000, limit: 10 })).toEqual([]);
        expect(await store.listWorkerMeters({ from: 0, to: T0 + 1000, limit: 1 })).toHaveLength(1);
      });

      it('keeps an endpoint\'s cold starts: counts, histogram, the ring of the last `window`; deleted with the endpoint', async () => {
        expect(await store.readColdStarts('ep')).toEqual([]);
        // Five starts into a ring of 3: slots 0, 1, 2, 0, 1 (the count before each, modulo 3).
        for (const [i, ms] of [100, 200, 300, 400, 500].entries()) await store.recordColdStart({ endpointId: 'ep', kind: 'start', ms, bucket: i % 2, at: T0 + i, window: 3 });
        await store.recordColdStart({ endpointId: 'ep', kind: 'resume', ms: 25.5, bucket: 0, at: T0 + 10, window: 3 });
        await store.recordColdStart({ endpointId: 'other', kind: 'start', ms: 7, bucket: 0, at: T0, window: 3 });
        const read = await store.readColdStarts('ep');
        const sorted = read.map((k) => ({ ...k, buckets: [...k.buckets].sort((a, b) => a.bucket - b.bucket), recent: [...k.recent].sort((a, b) => a.slot - b.slot) }));
        expect(sorted).toEqual([
          { kind: 'resume', count: 1, sumMs: 25.5, lastMs: 25.5, lastAt: T0 + 10, buckets: [{ bucket: 0, count: 1 }], recent: [{ slot: 0, ms: 25.5 }] },
          {
            kind: 'start',
            count: 5,
            sumMs: 1500,
            lastMs: 500,
            lastAt: T0 + 4,
            buckets: [
              { bucket: 0, count: 3 },
              { bucket: 1, count: 2 },
            ],
            recent: [
              { slot: 0, ms: 400 },
              { slot: 1, ms: 500 },
              { slot: 2, ms: 300 },
            ],
          },
        ]);
        await store.createEndpoint(endpoint('ep'));
        expect(await store.deleteEndpoint('ep')).toBe(true);
        expect(await store.readColdStarts('ep')).toEqual([]);
        expect(await store.readColdStarts('other')).toHaveLength(1);
      });

      it('sets and reads back a key\'s budget and job cap', async () => {
        await store.createKey(key('kb'));
        expect(await store.updateKeyLimits({ id: 'kb', budgetUnits: 5_000_000_000, budgetPeriod: 'month', maxConcurrentJobs: 3 })).toMatchObject({
          id: 'kb',
          budgetUnits: 5_000_000_000,
          budgetPeriod: 'month',
          maxConcurrentJobs: 3,
        });
        expect(await store.getKey('kb')).toMatchObject({ budgetUnits: 5_000_000_000, budgetPeriod: 'month', maxConcurrentJobs: 3 });
        expect(await store.updateKeyLimits({ id: 'kb', budgetUnits: null, budgetPeriod: null, maxConcurrentJobs: null })).toMatchObject({ budgetUnits: null, maxConcurrentJobs: null });
        expect(await store.updateKeyLimits({ id: 'none', budgetUnits: null, budgetPeriod: null, maxConcurrentJobs: null })).toBeUndefined();
        expect(await store.getKey('none')).toBeUndefined();
      });
    });

    describe('files', () => {
      const bytes = (n: number, fill: number): Uint8Array => new Uint8Array(n).fill(fill);

      it('stores, describes and reads a file by slices; a replaced file is not spliced', async () => {
        expect(await store.fileInfo('ep/a.png')).toBeUndefined();
        const body = Uint8Array.from({ length: 3000 }, (_, i) => i % 251);
        expect(await store.putFile({ key: 'ep/a.png', contentType: 'image/png', body, now: T0, maxBytes: 1_000_000 })).toEqual({ evicted: 0 });
        expect(await store.fileInfo('ep/a.png')).toEqual({ size: 3000, contentType: 'image/png', createdAt: T0 });
        const parts: Uint8Array[] = [];
        for (let offset = 0; offset < 3000; offset += 1024) parts.push((await store.readFile({ key: 'ep/a.png', createdAt: T0, offset, length: 1024 }))!);
        expect(parts.map((p) => p.byteLength)).toEqual([1024, 1024, 952]);
        expect(Buffer.concat(parts).equals(Buffer.from(body))).toBe(true);
        expect(await store.readFile({ key: 'ep/a.png', createdAt: T0, offset: 3000, length: 10 })).toHaveLength(0);
        await store.putFile({ key: 'ep/a.png', contentType: 'image/jpeg', body: bytes(10, 7), now: T0 + 5, maxBytes: 1_000_000 });
        expect(await store.readFile({ key: 'ep/a.png', createdAt: T0, offset: 0, length: 10 })).toBeUndefined();
        expect(Buffer.from((await store.readFile({ key: 'ep/a.png', createdAt: T0 + 5, offset: 0, length: 100 }))!)).toEqual(Buffer.from(bytes(10, 7)));
        expect(await store.readFile({ key: 'ep/none.png', createdAt: T0, offset: 0, length: 10 })).toBeUndefined();
      });

      it('keeps all files within maxBytes, deleting the oldest first but never the one just stored', async () => {
        for (let i = 0; i < 4; i++) await store.putFile({ key: `ep/${i}.png`, contentType: 'image/png', body: bytes(100, i), now: T0 + i, maxBytes: 1000 });
        // 400 bytes; 750 more leave room for 250: the two oldest go.
        expect(await store.putFile({ key: 'ep/big.png', contentType: 'image/png', body: bytes(750, 9), now: T0 + 10, maxBytes: 1000 })).toEqual({ evicted: 2 });
        expect(await store.fileInfo('ep/0.png')).toBeUndefined();
        expect(await store.fileInfo('ep/1.png')).toBeUndefined();
        expect(await store.fileInfo('ep/2.png')).toMatchObject({ size: 100 });
        // A file larger than the bound alone stays, and is all that stays.
        expect(await store.putFile({ key: 'ep/huge.png', contentType: 'image/png', body: bytes(1500, 1), now: T0 + 20, maxBytes: 1000 })).toEqual({ evicted: 3 });
        expect(await store.fileInfo('ep/huge.png')).toMatchObject({ size: 1500 });
      });

      it('deletes files stored before a time, oldest first, at most `limit`', async () => {
        for (let i = 0; i < 3; i++) await store.putFile({ key: `ep/${i}.jpeg`, contentType: 'image/jpeg', body: bytes(10, i), now: T0 + i * 1000, maxBytes: 1_000_000 });
        expect(await store.deleteFilesBefore({ before: T0 + 2000, limit: 1 })).toBe(1);
        expect(await store.fileInfo('ep/0.jpeg')).toBeUndefined();
        expect(await store.deleteFilesBefore({ before: T0 + 2000, limit: 10 })).toBe(1);
        expect(await store.fileInfo('ep/2.jpeg')).toMatchObject({ createdAt: T0 + 2000 });
      });
    });
  });
}
