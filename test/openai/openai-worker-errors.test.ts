// A runpod-python worker's failure through the OpenAI routes: the error body carries the
// exception's type and message, never its traceback (the worker's file paths, host name and
// worker id); the job's `error` on /status keeps the whole text. Real worker processes: the
// runpod-python stand-in (test/e2e/fixtures/runpod_like_worker.py) with a raising handler and a
// raising generator; the answer with and without `"stream": true`.
import { spawn, type ChildProcess } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ERROR_MESSAGE_LIMIT, summariseWorkerError } from '../../src/openai/openai-errors.js';
import { startTestGantry, type TestGantry } from '../helpers/gantry.js';
import { call, uniqueId } from '../http/http-helpers.js';

const WORKER_SCRIPT = fileURLToPath(new URL('../e2e/fixtures/runpod_like_worker.py', import.meta.url));
const chat = { model: 'm', messages: [{ role: 'user', content: 'hi' }] };

let t: TestGantry;
let runKey: string;
const workers: ChildProcess[] = [];

beforeAll(async () => {
  t = await startTestGantry({ jobTakeWaitMs: 1_000 });
  runKey = await t.createKey(['run']);
});
afterAll(async () => {
  for (const proc of workers) {
    if (proc.exitCode !== null || proc.signalCode !== null) continue;
    const exited = new Promise((resolve) => proc.once('exit', resolve));
    proc.kill('SIGTERM');
    await exited;
  }
  await t?.close();
});

/** A new endpoint served by one runpod-python stand-in running `handler`. */
async function endpointWith(handler: string): Promise<string> {
  const id = uniqueId('oai-err');
  await t.createEndpoint(id);
  const base = Object.fromEntries(Object.entries(process.env).filter(([k]) => !k.startsWith('RUNPOD_')));
  workers.push(spawn('python3', ['-u', WORKER_SCRIPT, '--handler', handler], { env: { ...base, ...t.workerEnv(id) }, stdio: 'ignore' }));
  return id;
}

async function chatCompletion(endpointId: string, stream: boolean): Promise<{ status: number; text: string; jobId: string }> {
  const res = await fetch(`${t.url}/v2/${endpointId}/openai/v1/chat/completions`, {
    method: 'POST',
    headers: { authorization: `Bearer ${runKey}`, 'content-type': 'application/json' },
    body: JSON.stringify({ ...chat, stream }),
  });
  return { status: res.status, text: await res.text(), jobId: res.headers.get('x-request-id') ?? '' };
}

/** What only the worker's operator should read: a traceback names the worker's files. */
function expectNoTraceback(text: string): void {
  expect(text).not.toContain('Traceback');
  expect(text).not.toContain('runpod_like_worker.py');
  expect(text).not.toContain('hostname');
}

async function jobError(endpointId: string, jobId: string): Promise<string> {
  const status = await call(t.url, 'GET', `/v2/${endpointId}/status/${jobId}`, { key: runKey });
  expect(status.json).toMatchObject({ id: jobId, status: 'FAILED' });
  return status.json.error as string;
}

describe('a runpod-python worker error through the OpenAI routes', () => {
  it('a raising handler: 500 with its type and message; /status keeps the traceback', async () => {
    const ep = await endpointWith('fail');
    const answer = await chatCompletion(ep, false);
    expect(answer.status).toBe(500);
    expect(JSON.parse(answer.text)).toEqual({ error: { message: 'boom', type: 'RuntimeError', param: null, code: 'worker_error' } });
    expectNoTraceback(answer.text);
    const full = JSON.parse(await jobError(ep, answer.jobId)) as Record<string, string>;
    expect(full).toMatchObject({ error_type: "<class 'RuntimeError'>", error_message: 'boom' });
    expect(full.error_traceback).toContain('Traceback (most recent call last)');
    expect(full.error_traceback).toContain('runpod_like_worker.py');
  });

  it('a raising generator: the message before its traceback and the type its last line names, streamed or not', async () => {
    const ep = await endpointWith('stream_fail');
    const answer = await chatCompletion(ep, false);
    expect(answer.status).toBe(500);
    expect(JSON.parse(answer.text)).toEqual({ error: { message: 'stream broke', type: 'ValueError', param: null, code: 'worker_error' } });
    expectNoTraceback(answer.text);
    const full = await jobError(ep, answer.jobId);
    expect(full).toMatch(/^handler: stream broke \ntraceback: Traceback \(most recent call last\)/);
    expect(full).toContain('runpod_like_worker.py');

    // Streamed: the chunks went out, then the error as an in-stream event, then [DONE].
    const streamed = await chatCompletion(ep, true);
    expect(streamed.status).toBe(200);
    expect(streamed.text).toContain('data: {"error":{"message":"stream broke","type":"ValueError","param":null,"code":"worker_error"}}\n\ndata: [DONE]\n\n');
    expectNoTraceback(streamed.text);
    expect(await jobError(ep, streamed.jobId)).toContain('Traceback');
  });
});

describe('summariseWorkerError', () => {
  it('cuts a long message, keeps a plain one, and reads a module-qualified class', () => {
    const long = 'x'.repeat(ERROR_MESSAGE_LIMIT + 500);
    const cut = summariseWorkerError(long, undefined).message;
    expect(cut.startsWith('x'.repeat(ERROR_MESSAGE_LIMIT))).toBe(true);
    expect(cut.length).toBeLessThan(ERROR_MESSAGE_LIMIT + 60);
    expect(summariseWorkerError('CUDA out of memory', undefined)).toEqual({ message: 'CUDA out of memory', type: undefined });
    const info = { error_type: "<class 'torch.cuda.OutOfMemoryError'>", error_message: 'CUDA out of memory', error_traceback: 'Traceback …' };
    expect(summariseWorkerError(JSON.stringify(info), info)).toEqual({ message: 'CUDA out of memory', type: 'torch.cuda.OutOfMemoryError' });
  });
});
