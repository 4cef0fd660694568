/**
 * LLM toy worker: a deterministic toy text generator, not a language model. It answers the
 * OpenAI routes of Gantry (docs/openai.md) the way RunPod's vLLM worker does, so clients, the
 * gateway and docs can be tried without a GPU or model weights:
 *
 *   input {"openai_route": "/v1/models"}                 → the model list (one model, MODEL_ID)
 *   input {"openai_route": "/v1/chat/completions", ...}  → a chat completion
 *   input {"openai_route": "/v1/completions", ...}       → a text completion
 *
 * The words come from a fixed vocabulary, picked by a PRNG seeded from the prompt (and the
 * request's `seed`): the same request gives the same text, streamed or not. `max_tokens`
 * (default 16, at most 512) bounds the words; a sentence ends at a full stop. Every answer
 * reports OpenAI `usage` (prompt words, generated words); with `"stream": true` the chat route
 * yields ready-made SSE text (`data: {...}\n\n` and `data: [DONE]`, like vLLM's raw output) and
 * the completion route yields chunk objects, with the usage chunk when
 * `stream_options.include_usage` is set. Errors: an unknown `model` answers vLLM's
 * ErrorResponse (404), a prompt containing `[toy:fail]` throws (the job FAILS).
 *
 * Environment: LLM_TOY_TOKEN_DELAY_MS paces generation (ms per word, default 0);
 * LLM_TOY_HOLD_FILE names a file while whose existence the generator holds before every word
 * after the first (a demo, or a test, can look at a stream mid-way).
 *
 *   npm run build
 *   node dist/src/cli/main.js worker dist/examples/llm-toy-worker.js \
 *     --url http://127.0.0.1:8080 --endpoint llm --key "$WORKER_KEY"
 */
import { existsSync } from 'node:fs';
import type { JobContext, WorkerJob } from '../src/sdk/worker.js';

/** The one model this worker serves. */
export const MODEL_ID = 'gantry-toy-llm';
/** Streamed jobs also end with every chunk as their output (RunPod's vLLM worker does the same). */
export const returnAggregateStream = true;

const VOCABULARY = [
  'the', 'a', 'quiet', 'gantry', 'moves', 'jobs', 'across', 'every', 'worker', 'and', 'queue', 'river',
  'light', 'stone', 'carries', 'small', 'bright', 'signal', 'through', 'long', 'night', 'under', 'green',
  'hills', 'where', 'engines', 'hum', 'softly', 'while', 'tokens', 'flow', 'like', 'water',
];
const DEFAULT_MAX_TOKENS = 16;
const MAX_TOKENS = 512;

type Body = Record<string, unknown>;
interface Generated {
  words: string[];
  finishReason: 'stop' | 'length';
  usage: { prompt_tokens: number; completion_tokens: number; total_tokens: number };
}

/**
 * Answers one OpenAI request: the answer object, an async generator of chunks when the
 * request asked for a stream, or vLLM's error object.
 *
 * @example
 * ```ts
 * import { startWorker } from 'gantry/worker';
 * import { handler } from './llm-toy-worker.js';
 * startWorker({ handler, returnAggregateStream: true });
 * ```
 */
export function handler(job: WorkerJob<{ openai_route?: string; openai_input?: Body | null } | undefined>, ctx: JobContext): unknown {
  const route = job.input?.openai_route;
  const body = job.input?.openai_input ?? {};
  if (route === '/v1/models') return { object: 'list', data: [{ id: MODEL_ID, object: 'model', created: 0, owned_by: 'gantry' }] };
  if (route !== '/v1/chat/completions' && route !== '/v1/completions') return errorResponse(`Invalid route: ${String(route)}`, 'NotFoundError', 404);
  if (body.model !== undefined && body.model !== MODEL_ID) return errorResponse(`The model \`${String(body.model)}\` does not exist.`, 'NotFoundError', 404);
  const chat = route === '/v1/chat/completions';
  const prompt = chat ? chatPrompt(body.messages) : String(Array.isArray(body.prompt) ? body.prompt.join(' ') : body.prompt ?? '');
  if (prompt.includes('[toy:fail]')) throw new Error('the toy generator was asked to fail ([toy:fail] in the prompt)');
  const generated = generate(prompt, body);
  const head = { id: `${chat ? 'chatcmpl' : 'cmpl'}-${job.id}`, created: Math.floor(Date.now() / 1000), model: MODEL_ID };
  if (body.stream === true) return chat ? streamChat(head, generated, body, ctx) : streamCompletion(head, generated, body, ctx);
  const text = generated.words.join('');
  const choice = chat
    ? { index: 0, message: { role: 'assistant', content: text }, logprobs: null, finish_reason: generated.finishReason }
    : { index: 0, text, logprobs: null, finish_reason: generated.finishReason };
  return { ...head, object: chat ? 'chat.completion' : 'text_completion', choices: [choice], usage: generated.usage };
}

export default handler;

/** vLLM's ErrorResponse, as its OpenAI server (and RunPod's worker) returns it. */
function errorResponse(message: string, type: string, code: number) {
  return { object: 'error', message, type, param: null, code };
}

function chatPrompt(messages: unknown): string {
  if (!Array.isArray(messages)) return '';
  return messages.map((m: { content?: unknown }) => (typeof m.content === 'string' ? m.content : JSON.stringify(m.content ?? ''))).join('\n');
}

/** The deterministic part: words picked by a PRNG seeded from the prompt and `seed`. */
function generate(prompt: string, body: Body): Generated {
  const asked = typeof body.max_tokens === 'number' ? body.max_tokens : typeof body.max_completion_tokens === 'number' ? body.max_completion_tokens : DEFAULT_MAX_TOKENS;
  const maxTokens = Math.max(1, Math.min(MAX_TOKENS, Math.floor(asked)));
  let state = (fnv1a(prompt) ^ (typeof body.seed === 'number' ? body.seed : 0)) >>> 0 || 1;
  const next = (): number => {
    // xorshift32
    state ^= state << 13;
    state ^= state >>> 17;
    state ^= state << 5;
    return (state >>> 0) / 0x1_0000_0000;
  };
  const words: string[] = [];
  let finishReason: Generated['finishReason'] = 'length';
  while (words.length < maxTokens) {
    const word = VOCABULARY[Math.floor(next() * VOCABULARY.length)]!;
    // After a few words, one in eight ends the sentence.
    const last = words.length >= 4 && next() < 0.125;
    words.push(`${words.length === 0 ? word[0]!.toUpperCase() + word.slice(1) : ` ${word}`}${last ? '.' : ''}`);
    if (last) {
      finishReason = 'stop';
      break;
    }
  }
  const promptTokens = prompt.split(/\s+/).filter(Boolean).length;
  return { words, finishReason, usage: { prompt_tokens: promptTokens, completion_tokens: words.length, total_tokens: promptTokens + words.length } };
}

function fnv1a(text: string): number {
  let hash = 0x811c9dc5;
  for (let i = 0; i < text.length; i++) hash = Math.imul(hash ^ text.charCodeAt(i), 0x01000193);
  return hash >>> 0;
}

type Head = { id: string; created: number; model: string };

/** Chat chunks as vLLM's raw output: SSE text, one `data:` event per chunk, then `data: [DONE]`. */
async function* streamChat(head: Head, generated: Generated, body: Body, ctx: JobContext): AsyncGenerator<string> {
  const sse = (chunk: object): string => `data: ${JSON.stringify(chunk)}\n\n`;
  const chunk = (delta: object, finish: string | null) => ({ ...head, object: 'chat.completion.chunk', choices: [{ index: 0, delta, logprobs: null, finish_reason: finish }] });
  yield sse(chunk({ role: 'assistant', content: '' }, null));
  for await (const word of paced(generated.words, ctx)) yield sse(chunk({ content: word }, null));
  yield sse(chunk({}, generated.finishReason));
  if (includeUsage(body)) yield sse({ ...head, object: 'chat.completion.chunk', choices: [], usage: generated.usage });
  yield 'data: [DONE]\n\n';
}

/** Completion chunks as objects (the gateway writes each as one event and adds `data: [DONE]`). */
async function* streamCompletion(head: Head, generated: Generated, body: Body, ctx: JobContext): AsyncGenerator<object> {
  const chunk = (text: string, finish: string | null) => ({ ...head, object: 'text_completion', choices: [{ index: 0, text, logprobs: null, finish_reason: finish }] });
  for await (const word of paced(generated.words, ctx)) yield chunk(word, null);
  yield chunk('', generated.finishReason);
  if (includeUsage(body)) yield { ...head, object: 'text_completion', choices: [], usage: generated.usage };
}

function includeUsage(body: Body): boolean {
  const options = body.stream_options as { include_usage?: unknown } | undefined;
  return options?.include_usage === true;
}

/** The words one at a time, at LLM_TOY_TOKEN_DELAY_MS, holding while LLM_TOY_HOLD_FILE exists; stops when the job is stopped. */
async function* paced(words: string[], ctx: JobContext): AsyncGenerator<string> {
  const delayMs = Number(process.env.LLM_TOY_TOKEN_DELAY_MS ?? 0);
  const holdFile = process.env.LLM_TOY_HOLD_FILE;
  for (const [i, word] of words.entries()) {
    if (i > 0) {
      if (delayMs > 0) await pause(delayMs, ctx.signal);
      while (holdFile && existsSync(holdFile) && !ctx.signal.aborted) await pause(10, ctx.signal);
    }
    if (ctx.signal.aborted) return;
    yield word;
  }
}

/** Waits `ms`, or less when the job is stopped. */
function pause(ms: number, signal: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    const timer = setTimeout(done, ms);
    signal.addEventListener('abort', done, { once: true });
    function done(): void {
      clearTimeout(timer);
      signal.removeEventListener('abort', done);
      resolve();
    }
  });
}
