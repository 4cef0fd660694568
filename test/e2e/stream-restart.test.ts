// A streamed job that runs again never splices two runs (issue 21.4, docs/api.md "A job that runs
// again"): a real worker process is SIGKILLed mid-stream, the reaper finds it lost and requeues
// the job, a second worker process runs it from its start. Read over real HTTP through SSE, the
// JSON /stream (the SDK client's stream()) and the official `openai` client, on both stores (the
// store tags each chunk with its run and drops the abandoned run's chunks at the requeue).
// Needs `npm run build` (the OpenAI part spawns `gantry worker` from dist/).
import { rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import OpenAI from 'openai';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { GantryApiError } from '../../src/sdk/client.js';
import { runCli } from '../cli/run-cli.js';
import { eventually, startTestGantry, type TestGantry } from '../helpers/gantry.js';
import { clientFor, uniqueId, type Client, type Json } from '../http/http-helpers.js';
import { dataOf, readStream, type ReceivedEvent } from '../http/sse-reader.js';
import { PyWorker } from '../limits/py-worker.js';
import { spawnWorker, TOY_WORKER, type WorkerProcess } from '../openai/worker-process.js';

/** The words the runpod-python stand-in streams, one chunk each, WORD_SECONDS apart. */
const WORDS = Array.from({ length: 8 }, (_, i) => `w${i} `);
const WORD_SECONDS = 0.3;
/** Generous: the reaper needs GANTRY_WORKER_LOST_MS of silence, the machine may be busy. */
const WAIT_MS = 90_000;
/** Each test waits for at most a few of those. */
const TEST_MS = 180_000;

describe.each(['sqlite', 'postgres'] as const)('a streamed job whose worker is killed mid-stream (%s store)', (backend) => {
  let t: TestGantry;
  let runKey: string;
  const pyWorkers: PyWorker[] = [];
  const sdkWorkers: WorkerProcess[] = [];
  const holdFile = join(tmpdir(), `stream-restart-hold-${process.pid}-${backend}`);

  beforeAll(async () => {
    // Lost after 4 s without a ping (workers ping every second): the requeue comes quickly.
    t = await startTestGantry({ workerLostMs: 4_000, reaperIntervalMs: 200 }, { backend });
    runKey = await t.createKey(['run']);
  });
  afterEach(async () => {
    await Promise.all([...pyWorkers.splice(0).map((w) => w.kill()), ...sdkWorkers.splice(0).map((w) => w.stop())]);
    rmSync(holdFile, { force: true });
  });
  afterAll(async () => {
    await t?.close();
  });

  async function endpoint(): Promise<{ ep: string; c: Client }> {
    const ep = uniqueId('restart');
    await t.createEndpoint(ep);
    return { ep, c: clientFor(t, ep, runKey) };
  }

  function pyWorker(ep: string): PyWorker {
    const worker = new PyWorker(t.workerEnv(ep, uniqueId('py')), ['--handler', 'stream']);
    pyWorkers.push(worker);
    return worker;
  }

  /** Submits the word stream and starts the first worker on it. */
  async function streamingJob(ep: string, c: Client): Promise<{ id: string; first: PyWorker }> {
    const id = await c.submit({ input: { chunks: WORDS, chunk_seconds: WORD_SECONDS } });
    const first = pyWorker(ep);
    await first.waitFor('taken', id, 1, WAIT_MS);
    return { id, first };
  }

  /** Kills the first worker (a crash: nothing more is posted) and starts the one that runs the job again. */
  async function crashAndReplace(ep: string, first: PyWorker): Promise<PyWorker> {
    await first.kill();
    return pyWorker(ep);
  }

  async function finalJob(c: Client, id: string): Promise<Json> {
    return eventually(async () => {
      const job = (await c.status(id)).json;
      return job.status === 'COMPLETED' ? job : undefined;
    }, WAIT_MS, `job ${id} to complete on the second worker`);
  }

  it('SSE: the reader is told the job restarted (event: status with the new attempt) before the second run, which comes whole', async () => {
    const { ep, c } = await endpoint();
    const { id, first } = await streamingJob(ep, c);
    const reader = readStream(`${t.url}/v2/${ep}/stream/${id}`, runKey);
    try {
      const chunks = (): ReceivedEvent[] => reader.events.filter((e) => e.type === 'message');
      await eventually(async () => (chunks().length >= 2 ? true : undefined), WAIT_MS, 'two chunks of the first run');
      await crashAndReplace(ep, first);
      await reader.waitFor((e) => e.type === 'done', 'the end of the job', WAIT_MS);
      const seen = reader.events.map((e) => (e.type === 'message' ? `chunk ${dataOf(e).output as string}` : e.type === 'status' ? `status ${JSON.stringify(dataOf(e))}` : e.type));
      const restartAt = reader.events.findIndex((e) => e.type === 'status' && dataOf(e).restarted === true);
      expect(restartAt, seen.join('\n')).toBeGreaterThan(0);
      const before = reader.events.slice(0, restartAt).filter((e) => e.type === 'message').map((e) => dataOf(e).output);
      const after = reader.events.slice(restartAt).filter((e) => e.type === 'message').map((e) => dataOf(e).output);
      // The first run's chunks are a prefix of the stream; the second run comes from its start, whole.
      expect(before.length).toBeGreaterThanOrEqual(2);
      expect(before).toEqual(WORDS.slice(0, before.length));
      expect(after, seen.join('\n')).toEqual(WORDS);
      // Before the second run's first chunk, a status event names attempt 2.
      const firstOfRun2 = reader.events.findIndex((e, i) => i > restartAt && e.type === 'message');
      const announced = reader.events.slice(restartAt, firstOfRun2).filter((e) => e.type === 'status').map((e) => dataOf(e));
      expect(announced, seen.join('\n')).toContainEqual(expect.objectContaining({ id, status: 'IN_PROGRESS', attempt: 2 }));
      expect(dataOf(reader.events[reader.events.length - 1]!)).toMatchObject({ id, status: 'COMPLETED', attempts: 2 });
    } finally {
      reader.close();
    }
  }, TEST_MS);

  it('JSON /stream: the SDK client calls onRestart before the second run, and what the reader builds is that run alone', async () => {
    const { ep, c } = await endpoint();
    const { id, first } = await streamingJob(ep, c);
    const client = t.client(runKey);
    const restarts: number[] = [];
    let text = '';
    let read = 0;
    for await (const word of client.stream<string>(ep, id, { onRestart: (attempt) => { restarts.push(attempt); text = ''; } })) {
      text += word;
      if (++read === 2) await crashAndReplace(ep, first);
    }
    // What the reader built is the second run's answer alone: no splice.
    expect(restarts).toEqual([2]);
    expect(text).toBe(WORDS.join(''));
    expect(await finalJob(c, id)).toMatchObject({ attempts: 2 });
  }, TEST_MS);

  it('JSON /stream: without onRestart the SDK client throws STREAM_RESTARTED instead of going on into the second run', async () => {
    const { ep, c } = await endpoint();
    const client = t.client(runKey);
    const again = await streamingJob(ep, c);
    const words: string[] = [];
    const failure = await (async () => {
      for await (const word of client.stream<string>(ep, again.id)) {
        words.push(word);
        if (words.length === 2) await crashAndReplace(ep, again.first);
      }
    })().catch((err: unknown) => err);
    expect(failure).toBeInstanceOf(GantryApiError);
    expect(failure).toMatchObject({ code: 'STREAM_RESTARTED' });
    expect(words).toEqual(WORDS.slice(0, words.length));
    await finalJob(c, again.id);
  }, TEST_MS);

  // One reader a job: the JSON /stream's chunks leave the buffer once read (docs/api.md), so two
  // readers of one job would share them out.
  /** Runs `gantry stream` on a streaming job (`flags` added) and kills its worker once it has printed two chunks. */
  async function cliStream(flags: string[]): Promise<{ id: string; code: number | null; stdout: string[]; stderr: string }> {
    const { ep, c } = await endpoint();
    const { id, first } = await streamingJob(ep, c);
    let replaced: Promise<PyWorker> | undefined;
    const result = await runCli(['stream', ep, id, '--url', t.url, '--key', runKey, ...flags], {}, undefined, (stdout) => {
      if (!replaced && stdout.split('\n').length > 2) replaced = crashAndReplace(ep, first);
    });
    expect(replaced).toBeDefined();
    return { id, code: result.code, stdout: result.stdout.split('\n').slice(0, -1), stderr: result.stderr };
  }

  it('gantry stream (the CLI): a marker line on stderr before the second run, whose output comes whole', async () => {
    const { id, code, stdout, stderr } = await cliStream([]);
    expect(code, stderr).toBe(0);
    expect(stderr.split('\n').filter((l) => l.startsWith('---'))).toEqual(['--- job restarted (attempt 2) ---']);
    expect(stderr).toContain(`${id} COMPLETED`);
    // What it printed: the first run's chunks (a prefix), then the second run whole.
    const before = stdout.slice(0, -WORDS.length);
    expect(before.length).toBeGreaterThanOrEqual(2);
    expect(before).toEqual(WORDS.slice(0, before.length));
    expect(stdout.slice(-WORDS.length)).toEqual(WORDS);
  }, TEST_MS);

  it('gantry stream --json: the restart is a line of its own between the runs', async () => {
    const { code, stdout, stderr } = await cliStream(['--json']);
    expect(code, stderr).toBe(0);
    expect(stderr).toContain('--- job restarted (attempt 2) ---');
    const items = stdout.map((l) => JSON.parse(l) as Json);
    const at = items.findIndex((item) => item.restarted === true);
    expect(items[at]).toEqual({ restarted: true, attempt: 2 });
    expect(at).toBeGreaterThanOrEqual(2);
    expect(items.slice(0, at).map((item) => item.output)).toEqual(WORDS.slice(0, at));
    expect(items.slice(at + 1).map((item) => item.output)).toEqual(WORDS);
  }, TEST_MS);

  it('JSON /stream: a raw page of the second run says attempt 2', async () => {
    const { ep, c } = await endpoint();
    const { id, first } = await streamingJob(ep, c);
    const firstPage = await eventually(async () => {
      const page = (await c.stream(id, '?wait=5000')).json;
      return (page.stream as Json[]).length > 0 ? page : undefined;
    }, WAIT_MS, 'a page of the first run');
    expect(firstPage).toMatchObject({ status: 'IN_PROGRESS', attempt: 1 });
    await crashAndReplace(ep, first);
    // Pages read before the requeue may still hold the first run's chunks; then the second run's, whole.
    const byRun = new Map<number, unknown[]>([[1, (firstPage.stream as Json[]).map((item) => item.output)]]);
    const runs: number[] = [];
    for (;;) {
      const page = (await c.stream(id, '?wait=5000')).json;
      if ((page.stream as Json[]).length > 0) {
        const attempt = page.attempt as number;
        runs.push(attempt);
        byRun.set(attempt, [...(byRun.get(attempt) ?? []), ...(page.stream as Json[]).map((item) => item.output)]);
      }
      if (page.status === 'COMPLETED') break;
    }
    expect(runs).toEqual([...runs].sort());
    expect([...byRun.keys()]).toEqual([1, 2]);
    expect(byRun.get(1)).toEqual(WORDS.slice(0, byRun.get(1)!.length));
    expect(byRun.get(2)).toEqual(WORDS);
  }, TEST_MS);

  it('the official openai client: the stream ends with an in-stream stream_restarted error, never the second run', async () => {
    const ep = uniqueId('restart-llm');
    await t.createEndpoint(ep);
    // The first worker holds before every word after the first: it is killed with one word out.
    writeFileSync(holdFile, '');
    const first = spawnWorker(TOY_WORKER, { ...t.workerEnv(ep, uniqueId('llm')), LLM_TOY_HOLD_FILE: holdFile });
    sdkWorkers.push(first);
    const openai = new OpenAI({ apiKey: runKey, baseURL: `${t.url}/v2/${ep}/openai/v1`, maxRetries: 0 });
    const { data: stream, request_id: jobId } = await openai.chat.completions
      .create({ model: 'gantry-toy-llm', messages: [{ role: 'user', content: 'Tell me about the gantry' }], max_tokens: 12, stream: true })
      .withResponse();
    let text = '';
    let after = 0;
    const failure = await (async () => {
      for await (const chunk of stream) {
        const content = chunk.choices[0]?.delta.content ?? '';
        if (content === '') continue;
        if (text === '') {
          await first.stop(); // SIGKILL: the run is lost mid-stream
          sdkWorkers.push(spawnWorker(TOY_WORKER, t.workerEnv(ep, uniqueId('llm'))));
        } else {
          after++;
        }
        text += content;
      }
    })().catch((err: unknown) => err);
    expect(failure).toBeInstanceOf(OpenAI.APIError);
    expect(failure).toMatchObject({ code: 'stream_restarted', error: { type: 'server_error', code: 'stream_restarted' } });
    expect((failure as Error).message).toMatch(/started again from the beginning/);
    // Nothing of the second run reached the client: only the first run's one word.
    expect(after).toBe(0);
    expect(text.trim().split(/\s+/)).toHaveLength(1);
    // Nobody can read the rest of that answer: the gateway cancelled the job.
    const c = clientFor(t, ep, runKey);
    expect(await eventually(async () => {
      const job = (await c.status(jobId!)).json;
      return job.status === 'CANCELLED' ? job : undefined;
    }, WAIT_MS, 'the job to be cancelled')).toMatchObject({ status: 'CANCELLED' });
  }, TEST_MS);
});
