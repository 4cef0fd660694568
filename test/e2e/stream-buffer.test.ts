// A job's stream buffer (issue 22.1), over real HTTP with real worker processes, on both stores:
// its bytes are capped (GANTRY_STREAM_BUFFER_BYTES; a worker past it gets 413 STREAM_BUFFER_FULL
// and the run's stream is cut), a backlog is drained in bounded pages with nothing lost, and a
// page leaves the buffer only once its answer is out. Workers: the runpod-python 1.12 stand-in
// (handler stream_bytes: numbered chunks of a given size) and a Gantry SDK worker
// (fixtures/stream-bytes-worker.mjs). Needs `npm run build` (the SDK worker runs dist/).
import { fileURLToPath } from 'node:url';
import runpodSdk from 'runpod-sdk';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { eventually, startTestGantry, type TestGantry } from '../helpers/gantry.js';
import { spawnOwned } from '../helpers/processes.js';
import { clientFor, uniqueId, type Client, type Json } from '../http/http-helpers.js';
import { PyWorker } from '../limits/py-worker.js';
import { spawnWorker, type WorkerProcess } from '../openai/worker-process.js';

const SDK_WORKER = fileURLToPath(new URL('./fixtures/stream-bytes-worker.mjs', import.meta.url));
/** The cap of these gateways: 6 chunks of CHUNK_BYTES fit, a seventh does not. */
const CAP = 6_000_000;
/** Characters of one numbered chunk: with its JSON quotes, 999,999 bytes. */
const SIZE = 999_997;
const CHUNK_BYTES = SIZE + 2;
const numbers = (outputs: unknown[]): number[] => outputs.map((o) => Number(String(o).slice(0, 6)));

/** Python: a GET with a 4 KB receive buffer that reads one byte of the answer, then closes (a reset). */
const VANISHING_READER = `import socket, sys
port, path, key = int(sys.argv[1]), sys.argv[2], sys.argv[3]
s = socket.socket()
s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
s.connect(("127.0.0.1", port))
s.sendall(f"GET {path} HTTP/1.1\\r\\nhost: x\\r\\nauthorization: Bearer {key}\\r\\n\\r\\n".encode())
print("started" if s.recv(1) else "nothing", flush=True)
s.close()`;

describe.each(['sqlite', 'postgres'] as const)('the stream buffer: byte cap and paged, lossless reads (%s store)', (backend) => {
  let t: TestGantry;
  let runKey: string;
  const processes: { kill?: () => Promise<void>; stop?: () => Promise<void> }[] = [];

  beforeAll(async () => {
    t = await startTestGantry({ streamBufferBytes: CAP, jobTakeWaitMs: 1_000 }, { backend });
    runKey = await t.createKey(['run']);
  });
  afterEach(async () => {
    await Promise.all(processes.splice(0).map((p) => (p.kill ? p.kill() : p.stop?.())));
  });
  afterAll(async () => {
    await t?.close();
  });

  /** Runs VANISHING_READER against `path`; resolves with what it printed. */
  async function vanishingReader(path: string, key: string): Promise<string> {
    const child = spawnOwned('python3', ['-c', VANISHING_READER, new URL(t.url).port, path, key], { stdio: ['ignore', 'pipe', 'inherit'] });
    let out = '';
    child.stdout!.setEncoding('utf8').on('data', (text: string) => (out += text));
    await new Promise((resolve) => child.once('exit', resolve));
    return out.trim();
  }

  async function endpoint(): Promise<{ ep: string; c: Client }> {
    const ep = uniqueId('buf');
    await t.createEndpoint(ep);
    return { ep, c: clientFor(t, ep, runKey) };
  }

  function pyWorker(ep: string): PyWorker {
    const worker = new PyWorker(t.workerEnv(ep, uniqueId('py')), ['--handler', 'stream_bytes']);
    processes.push(worker);
    return worker;
  }

  function sdkWorker(ep: string): WorkerProcess {
    const worker = spawnWorker(SDK_WORKER, t.workerEnv(ep, uniqueId('sdk')));
    processes.push(worker);
    return worker;
  }

  async function finished(c: Client, id: string): Promise<Json> {
    return eventually(async () => {
      const job = (await c.status(id)).json;
      return job.status === 'COMPLETED' || job.status === 'FAILED' ? job : undefined;
    }, 30_000, `job ${id} to end`);
  }

  /** Reads /stream (JSON) until its status is final, keeping every answer. */
  async function readAll(c: Client, id: string): Promise<{ status: string; outputs: unknown[]; truncated?: boolean; bytes: number }[]> {
    const answers: { status: string; outputs: unknown[]; truncated?: boolean; bytes: number }[] = [];
    for (;;) {
      const r = await c.stream(id);
      expect(r.status).toBe(200);
      const json = r.json as { status: string; stream: { output: unknown }[]; truncated?: boolean };
      answers.push({ status: json.status, outputs: json.stream.map((s) => s.output), ...(json.truncated ? { truncated: true } : {}), bytes: Buffer.byteLength(r.text) });
      if (json.status !== 'IN_PROGRESS' && json.status !== 'IN_QUEUE') return answers;
    }
  }

  it('refuses a runpod-python worker past the cap with 413; it goes on, the job completes, readers get the prefix and "truncated"', async () => {
    const { ep, c } = await endpoint();
    const id = await c.submit({ input: { count: 8, size: SIZE } });
    const worker = pyWorker(ep);
    await worker.waitFor('done', id, 1, 30_000);
    expect(await finished(c, id)).toMatchObject({ status: 'COMPLETED' });
    // runpod-python logs a refused stream post and goes on: 6 accepted, the 7th and 8th refused, then its job-done.
    expect(worker.requests(/POST \/v2\/[^/]+\/job-stream\/.* -> 200$/)).toBe(6);
    expect(worker.requests(/POST \/v2\/[^/]+\/job-stream\/.* -> 413$/)).toBe(2);
    expect(worker.requests(/POST \/v2\/[^/]+\/job-done\/.* -> 200$/)).toBe(1);
    const answers = await readAll(c, id);
    expect(numbers(answers.flatMap((a) => a.outputs))).toEqual([0, 1, 2, 3, 4, 5]);
    // The last page ends where the run's stream was cut, with the job's final status; nothing is left.
    expect(answers.map((a) => [a.status, a.outputs.length, a.truncated ?? false])).toEqual([
      ['IN_PROGRESS', 5, false],
      ['COMPLETED', 1, true],
    ]);
    expect((await c.stream(id)).json).toEqual({ id, status: 'COMPLETED', stream: [] });
  });

  // The worker's side, not the store's: on one store.
  it.runIf(backend === 'sqlite')('tells the worker why (STREAM_BUFFER_FULL): the Gantry SDK worker stops streaming that job and still sends its whole result', async () => {
    const { ep, c } = await endpoint();
    const id = await c.submit({ input: { count: 8, size: SIZE } });
    const worker = sdkWorker(ep);
    const done = await finished(c, id);
    expect(done.status).toBe('COMPLETED');
    expect(numbers(done.output as unknown[])).toEqual([0, 1, 2, 3, 4, 5, 6, 7]);
    const cut = worker.logs.filter((l) => typeof l.msg === 'string' && l.msg.startsWith('stream buffer full'));
    expect(cut).toHaveLength(1);
    expect(cut[0]).toMatchObject({ jobId: id, status: 413 });
    expect(worker.logs.filter((l) => l.msg === 'stream chunk rejected')).toEqual([]);
    const answers = await readAll(c, id);
    expect(numbers(answers.flatMap((a) => a.outputs))).toEqual([0, 1, 2, 3, 4, 5]);
    expect(answers.some((a) => a.truncated)).toBe(true);
  });

  it('drains a backlog in pages of about 4 MB, in order, nothing lost, "IN_PROGRESS" until the last page', async () => {
    const { ep, c } = await endpoint();
    const id = await c.submit({ input: { count: 6, size: SIZE } });
    pyWorker(ep);
    expect(await finished(c, id)).toMatchObject({ status: 'COMPLETED' });
    const answers = await readAll(c, id);
    // Pages hold chunks while fewer than 4,000,000 bytes came before: 5 of 999,999 bytes, then 1.
    expect(answers.map((a) => [a.status, a.outputs.length])).toEqual([
      ['IN_PROGRESS', 5],
      ['COMPLETED', 1],
    ]);
    for (const a of answers) expect(a.bytes).toBeLessThan(5 * CHUNK_BYTES + 1_000);
    expect(numbers(answers.flatMap((a) => a.outputs))).toEqual([0, 1, 2, 3, 4, 5]);
    expect((await c.stream(id)).json).toMatchObject({ status: 'COMPLETED', stream: [] });
  });

  it("serves runpod-sdk's stream() a paged backlog whole: it stops at a final status, which comes with the last page", async () => {
    const { ep, c } = await endpoint();
    const id = await c.submit({ input: { count: 6, size: SIZE } });
    pyWorker(ep);
    expect(await finished(c, id)).toMatchObject({ status: 'COMPLETED' });
    const sdk = runpodSdk(runKey, { baseUrl: `${t.url}/v2` }).endpoint(ep)!;
    const outputs: unknown[] = [];
    for await (const part of sdk.stream(id)) outputs.push((part as { output: unknown }).output);
    expect(numbers(outputs)).toEqual([0, 1, 2, 3, 4, 5]);
  });

  it('deletes a page only once its answer is out: a reader gone mid-answer takes nothing with it', async () => {
    const { ep, c } = await endpoint();
    const id = await c.submit({ input: { count: 6, size: SIZE } });
    pyWorker(ep);
    expect(await finished(c, id)).toMatchObject({ status: 'COMPLETED' });
    // A reader that vanishes as soon as its answer starts, with a 4 KB receive buffer (which also
    // stops Linux from growing it): the first page (5 chunks, about 5 MB) cannot all be in the
    // sockets' buffers (the gateway's send buffer holds at most 4 MB), so it is not out.
    expect(await vanishingReader(`/v2/${ep}/stream/${id}`, runKey)).toBe('started');
    const answers = await readAll(c, id);
    expect(numbers(answers.flatMap((a) => a.outputs))).toEqual([0, 1, 2, 3, 4, 5]);
  });
});

