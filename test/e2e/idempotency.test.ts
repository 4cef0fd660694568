// A client's retry does not make a second job: `gantry serve` processes (SQLite, then
// PostgreSQL) take an Idempotency-Key on /run, /runsync and the OpenAI routes. A /run whose
// answer the client never saw (the gateway paused with SIGSTOP, the client timing out, then
// SIGCONT) was committed; its retry answers that job, which a real worker process (the
// runpod-python stand-in) runs once. Likewise across a gateway restart, for /runsync (the
// retry waits on the first try's job), for concurrent duplicates (across two gateways on
// PostgreSQL) and for an OpenAI request whose client left (its job is kept, not cancelled).
// Another body under the key is 409; another caller's same key is another job.
import type { ChildProcess } from 'node:child_process';
import { randomBytes, randomUUID } from 'node:crypto';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildWorkerEnv, eventually } from '../helpers/gantry.js';
import { createTestSchema, type TestSchema } from '../helpers/postgres.js';
import { newEndpoint as createEndpoint, newKey, uniqueId } from '../helpers/jobs.js';
import { spawnOwned } from '../helpers/processes.js';
import { scratchDir } from '../helpers/scratch.js';
import { startGateway as startServe, type ServeProcess } from '../helpers/serve-process.js';
import { call, type Json, type Reply } from '../http/http-helpers.js';

const WORKER_SCRIPT = fileURLToPath(new URL('./fixtures/runpod_like_worker.py', import.meta.url));
const ADMIN_KEY = `idem-admin-${randomBytes(8).toString('hex')}`;
const SECRET_KEY = randomBytes(32).toString('base64');
/** How long a client waits for an answer from the paused gateway before it gives up. */
const CLIENT_TIMEOUT_MS = 750;

/** One runpod-python stand-in process; its `EVENT taken <id>` lines say which jobs it was handed. */
interface PyWorker {
  proc: ChildProcess;
  taken: string[];
}

describe.each(['sqlite', 'postgres'] as const)('Idempotency-Key on a gateway process (%s)', (backend) => {
  let schema: TestSchema | undefined;
  let dir: string;
  let env: Record<string, string>;
  const gateways: ServeProcess[] = [];
  const workers: PyWorker[] = [];
  let gw: ServeProcess;
  let runKey: string;
  let otherKey: string;
  let workerKey: string;

  async function startGateway(): Promise<ServeProcess> {
    const started = await startServe({ adminKey: ADMIN_KEY, dataDir: dir, env });
    gateways.push(started);
    return started;
  }

  /** Ends `g`, paused or not. */
  async function stopGateway(g: ServeProcess): Promise<void> {
    g.proc.kill('SIGCONT');
    await g.stop();
  }

  beforeAll(async () => {
    dir = scratchDir('idem');
    schema = backend === 'postgres' ? await createTestSchema('idem') : undefined;
    // debug: the access log, one line per request once handled (sendWhilePaused waits on it).
    env = { GANTRY_SECRET_KEY: SECRET_KEY, GANTRY_JOB_TAKE_WAIT_MS: '2000', GANTRY_LOG_LEVEL: 'debug', ...(schema ? { DATABASE_URL: schema.url } : {}) };
    gw = await startGateway();
    runKey = await newKey(gw, ['run']);
    otherKey = await newKey(gw, ['run']); // another tenant
    workerKey = await newKey(gw, ['worker']);
  }, 60_000);

  afterAll(async () => {
    for (const w of workers) {
      if (w.proc.exitCode !== null || w.proc.signalCode !== null) continue;
      const exited = new Promise((resolve) => w.proc.once('exit', resolve));
      w.proc.kill('SIGTERM');
      await exited;
    }
    for (const g of gateways) await stopGateway(g);
    await schema?.drop();
  }, 30_000);

  const newEndpoint = (): Promise<string> => createEndpoint(gw, {}, 'idem');

  /** A runpod-python stand-in serving `endpointId` through `g` with the echo handler. */
  function startWorker(endpointId: string, g: ServeProcess = gw): PyWorker {
    const base = Object.fromEntries(Object.entries(process.env).filter(([k]) => !k.startsWith('RUNPOD_')));
    const proc = spawnOwned('python3', ['-u', WORKER_SCRIPT, '--handler', 'echo'], {
      env: { ...base, ...buildWorkerEnv(g.url, endpointId, uniqueId('py'), workerKey) },
      stdio: ['ignore', 'pipe', 'ignore'],
    });
    const worker: PyWorker = { proc, taken: [] };
    proc.stdout?.setEncoding('utf8').on('data', (chunk: string) => {
      for (const m of chunk.matchAll(/^EVENT taken (\S+)$/gm)) worker.taken.push(m[1]!);
    });
    workers.push(worker);
    return worker;
  }

  const submit = (endpointId: string, operation: string, body: unknown, idempotencyKey: string, opts: { key?: string; g?: ServeProcess } = {}): Promise<Reply> =>
    call((opts.g ?? gw).url, 'POST', `/v2/${endpointId}/${operation}`, { key: opts.key ?? runKey, body, headers: { 'idempotency-key': idempotencyKey } });

  /** Every job of the endpoint, newest first. */
  const jobsOf = async (endpointId: string): Promise<Json[]> => (await call(gw.url, 'GET', `/v2/${endpointId}/requests`, { key: runKey })).json.requests as Json[];

  /**
   * Sends a request that the paused gateway does not answer before the client gives up (it
   * closes its connection), resumes the gateway, and waits for the gateway's access-log line of
   * that request: its status once handled. The request's own X-Request-ID finds the line.
   */
  async function sendWhilePaused(path: string, body: unknown, idempotencyKey: string): Promise<number> {
    const requestId = `paused-${randomUUID()}`;
    gw.proc.kill('SIGSTOP');
    try {
      const request = fetch(`${gw.url}${path}`, {
        method: 'POST',
        headers: { authorization: `Bearer ${runKey}`, 'content-type': 'application/json', 'idempotency-key': idempotencyKey, 'x-request-id': requestId },
        body: JSON.stringify(body),
        signal: AbortSignal.timeout(CLIENT_TIMEOUT_MS),
      });
      await expect(request).rejects.toThrow(/timeout|aborted/i);
    } finally {
      gw.proc.kill('SIGCONT');
    }
    return eventually(async () => {
      const line = gw.output().split('\n').find((l) => l.includes(`"requestId":"${requestId}"`) && l.includes('"msg":"request"'));
      return line === undefined ? undefined : (JSON.parse(line) as { status: number }).status;
    }, 15_000, 'the gateway to handle the request the client gave up on');
  }

  /**
   * Reads the endpoint's key and settings through the gateway, so the paused request finds them
   * cached and reads its body before it sees the client's close (as a client's earlier calls
   * would have left them). Without that, a store round trip lets the gateway see the close
   * first and drop the request (400 INCOMPLETE_BODY): then no job, and the retry makes the one.
   */
  const warm = async (endpointId: string): Promise<void> => {
    expect((await call(gw.url, 'GET', `/v2/${endpointId}/health`, { key: runKey })).status).toBe(200);
  };

  /**
   * The endpoint's jobs once the gateway handled the request its client gave up on. On SQLite
   * (store reads without a round trip) the gateway reads the body before it sees the client's
   * close and commits the job; on PostgreSQL it does when the key and endpoint are still cached
   * (warm), else it may see the close first and drop the request: no job, and the retry makes
   * the one job. Either way there is one job in the end, run once.
   */
  async function afterPausedTry(endpointId: string): Promise<Json[]> {
    const jobs = await jobsOf(endpointId);
    if (backend === 'sqlite') expect(jobs).toHaveLength(1);
    else expect(jobs.length).toBeLessThanOrEqual(1);
    return jobs;
  }

  /** A retry answers the paused try's job, when there is one, as a replay. */
  function expectReplayOf(paused: Json[], retry: Reply, jobId: unknown): void {
    if (paused.length === 0) return;
    expect(jobId).toBe(paused[0]!.id);
    expect(retry.headers.get('idempotent-replayed')).toBe('true');
  }

  it('a /run whose answer timed out while the gateway was paused: the retry answers the committed job, run once', async () => {
    const ep = await newEndpoint();
    const body = { input: { order: 17 } };
    const key = randomUUID();
    await warm(ep);
    // Resumed, the gateway reads the request the client gave up on and commits its job; the
    // client never saw the answer.
    await sendWhilePaused(`/v2/${ep}/run`, body, key);
    const paused = await afterPausedTry(ep);
    const retry = await submit(ep, 'run', body, key);
    expect(retry.status).toBe(200);
    expect(retry.json).toEqual({ id: expect.any(String), status: 'IN_QUEUE' });
    expectReplayOf(paused, retry, retry.json.id);

    const worker = startWorker(ep);
    const id = retry.json.id as string;
    await eventually(async () => ((await call(gw.url, 'GET', `/v2/${ep}/status/${id}`, { key: runKey })).json.status === 'COMPLETED' ? true : undefined), 15_000, 'the job to complete');
    expect((await submit(ep, 'run', body, key)).json).toEqual({ id, status: 'COMPLETED' });
    expect(await jobsOf(ep)).toHaveLength(1);
    expect(worker.taken).toEqual([id]);
  });

  it('a /runsync retried across a pause waits on the first try\'s job and answers its result', async () => {
    const ep = await newEndpoint();
    const body = { input: { sync: 'yes' } };
    const key = randomUUID();
    await warm(ep);
    await sendWhilePaused(`/v2/${ep}/runsync`, body, key);
    const paused = await afterPausedTry(ep);
    for (const job of paused) expect(job.status).toBe('IN_QUEUE');
    // The retry waits on that job; a worker comes and runs it.
    const retrying = submit(ep, 'runsync', body, key);
    const worker = startWorker(ep);
    const retry = await retrying;
    expect(retry.json).toMatchObject({ status: 'COMPLETED', output: { sync: 'yes' } });
    expectReplayOf(paused, retry, retry.json.id);
    expect(await jobsOf(ep)).toHaveLength(1);
    expect(worker.taken).toEqual([retry.json.id]);
  });

  it('another body under a key is 409; another caller\'s same key is its own job; a malformed key is 400', async () => {
    const ep = await newEndpoint();
    const key = randomUUID();
    const first = await submit(ep, 'run', { input: { n: 1 } }, key);
    expect(first.status).toBe(200);
    const changed = await submit(ep, 'run', { input: { n: 2 } }, key);
    expect(changed.status).toBe(409);
    expect(changed.json).toMatchObject({ code: 'IDEMPOTENCY_KEY_REUSED', id: first.json.id });
    // The same body on another route is another request too.
    expect((await submit(ep, 'runsync?wait=1000', { input: { n: 1 } }, key)).json).toMatchObject({ code: 'IDEMPOTENCY_KEY_REUSED' });
    const theirs = await submit(ep, 'run', { input: { n: 1 } }, key, { key: otherKey });
    expect(theirs.status).toBe(200);
    expect(theirs.json.id).not.toBe(first.json.id);
    expect(theirs.headers.get('idempotent-replayed')).toBeNull();
    const tooLong = await submit(ep, 'run', { input: { n: 1 } }, 'k'.repeat(256));
    expect(tooLong.status).toBe(400);
    expect(tooLong.json).toMatchObject({ code: 'INVALID_IDEMPOTENCY_KEY', field: 'Idempotency-Key' });
    expect(await jobsOf(ep)).toHaveLength(2);
  });

  it('concurrent duplicates make one job' + (backend === 'postgres' ? ', across two gateways' : ''), async () => {
    const ep = await newEndpoint();
    const second = backend === 'postgres' ? await startGateway() : gw;
    const key = randomUUID();
    const answers = await Promise.all(Array.from({ length: 16 }, (_, i) => submit(ep, 'run', { input: { same: true } }, key, { g: i % 2 === 0 ? gw : second })));
    expect(answers.map((a) => a.status)).toEqual(Array(16).fill(200));
    expect(new Set(answers.map((a) => a.json.id)).size).toBe(1);
    expect(answers.filter((a) => a.headers.get('idempotent-replayed') === null)).toHaveLength(1);
    expect(await jobsOf(ep)).toHaveLength(1);
    if (second !== gw) await stopGateway(second);
  });

  it('an OpenAI request whose client left keeps its job for the retry; a streamed retry is 409', async () => {
    const ep = await newEndpoint();
    const chat = { model: 'm', messages: [{ role: 'user', content: 'hi' }] };
    const key = randomUUID();
    await warm(ep);
    // No worker yet: the job waits in the queue; the request ends with its client, its job stays.
    await sendWhilePaused(`/v2/${ep}/openai/v1/chat/completions`, chat, key);
    const paused = await afterPausedTry(ep);
    // Not cancelled when its client left: kept for the retry.
    for (const job of paused) expect(job.status).toBe('IN_QUEUE');
    const retry = submit(ep, 'openai/v1/chat/completions', chat, key);
    const worker = startWorker(ep);
    const answer = await retry;
    expect(answer.status).toBe(200);
    expect(answer.json).toEqual({ openai_route: '/v1/chat/completions', openai_input: chat });
    const jobId = answer.headers.get('x-request-id');
    expectReplayOf(paused, answer, jobId);
    expect(worker.taken).toEqual([jobId]);

    const streamKey = randomUUID();
    const streamed = await submit(ep, 'openai/v1/chat/completions', { ...chat, stream: true }, streamKey);
    expect(streamed.status).toBe(200);
    const again = await submit(ep, 'openai/v1/chat/completions', { ...chat, stream: true }, streamKey);
    expect(again.status).toBe(409);
    expect(again.json).toMatchObject({ error: { code: 'stream_not_replayable' } });
    expect(again.headers.get('x-request-id')).toBe(streamed.headers.get('x-request-id'));
    expect(await jobsOf(ep)).toHaveLength(2);
  });

  it('a key outlives a gateway restart', async () => {
    const ep = await newEndpoint();
    const key = randomUUID();
    const first = await submit(ep, 'run', { input: { kept: 1 } }, key);
    await stopGateway(gw);
    gw = await startGateway();
    const retry = await submit(ep, 'run', { input: { kept: 1 } }, key);
    expect(retry.json).toEqual({ id: first.json.id, status: 'IN_QUEUE' });
    expect(retry.headers.get('idempotent-replayed')).toBe('true');
    expect((await submit(ep, 'run', { input: { kept: 2 } }, key)).status).toBe(409);
    expect(await jobsOf(ep)).toHaveLength(1);
  });
});
