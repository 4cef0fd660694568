import type { ServerResponse } from 'node:http';
import type { Logger } from 'pino';
import { sendJson } from '../http/respond.js';
import { AppError } from '../model/errors.js';
import { isObject } from '../model/json.js';
import type { JobRecord } from '../model/records.js';

/** OpenAI's error body: what the official clients read into their error classes. */
export interface OpenAiErrorBody {
  error: { message: string; type: string; param: string | null; code: string };
}

/**
 * The job ran, may have run, or was stopped on purpose: the official clients, which retry 408,
 * 409, 429 and 5xx by themselves unless this header says false, must not send it again.
 */
export const NO_RETRY: Readonly<Record<string, string>> = { 'x-should-retry': 'false' };

/**
 * The answer to a request that the gateway's shutdown ends before its job did (the reason its
 * wait is aborted with): the job goes on, and the clients send the request again by themselves,
 * to a gateway that is up.
 */
export const GATEWAY_CLOSING = new AppError('GATEWAY_CLOSING', 'The gateway is shutting down before the job finished; send the request again', undefined, {
  'x-should-retry': 'true',
});

function typeFor(status: number): string {
  if (status === 401) return 'authentication_error';
  if (status === 403) return 'permission_error';
  if (status === 429) return 'rate_limit_error';
  if (status >= 500) return 'server_error';
  return 'invalid_request_error';
}

/**
 * An AppError in OpenAI's shape: `{"error": {message, type, param, code}}`, `param` the field
 * a 400 names, `code` Gantry's code in lower case, `type` the worker's own when it gave one.
 *
 * @example openAiErrorBody(new AppError('RATE_LIMITED', 'slow down')).error.type === 'rate_limit_error'
 */
export function openAiErrorBody(err: AppError): OpenAiErrorBody {
  const type = typeof err.extra?.type === 'string' ? err.extra.type : typeFor(err.status);
  const param = typeof err.extra?.field === 'string' ? err.extra.field : null;
  return { error: { message: err.message, type, param, code: err.code.toLowerCase() } };
}

/**
 * Answers an error in OpenAI's shape with the AppError's status and headers (Retry-After on
 * 429) over `headers`; anything else is a fault: 500 with `x-should-retry: false` (a job may
 * have been created), logged with its stack, no internals shown.
 */
export function sendOpenAiError(res: ServerResponse, err: unknown, logger: Logger, context: Record<string, unknown>, headers?: Readonly<Record<string, string>>): void {
  if (res.headersSent) {
    // Mid-stream the status is gone; the stream writer reports errors itself. Cut the stream.
    if (!(err instanceof AppError)) logger.error({ err, ...context }, 'openai stream failed');
    res.destroy();
    return;
  }
  if (err instanceof AppError) {
    sendJson(res, err.status, openAiErrorBody(err), headers ? { ...headers, ...err.headers } : err.headers);
    return;
  }
  logger.error({ err, ...context }, 'openai request failed');
  sendJson(res, 500, openAiErrorBody(new AppError('INTERNAL', 'Internal server error')), NO_RETRY);
}

/**
 * Why a finished job has no answer: FAILED (the worker's error: its status, message and type
 * when it sent an OpenAI or vLLM error object, else 500 with the message and type of
 * summariseWorkerError, never a traceback), TIMED_OUT (504) or CANCELLED (409).
 *
 * @example jobFailure({ ...job, status: 'FAILED', error: 'out of memory' }).status === 500
 */
export function jobFailure(job: JobRecord): AppError {
  if (job.status === 'TIMED_OUT') {
    return new AppError('JOB_TIMED_OUT', `Job ${job.id} timed out: ${job.error ?? 'no result within its time limits'}`, undefined, NO_RETRY);
  }
  if (job.status === 'CANCELLED') return new AppError('JOB_CANCELLED', `Job ${job.id} was cancelled`, undefined, NO_RETRY);
  const text = job.error ?? 'the worker failed without an error message';
  const parsed = parseJson(text);
  const known = workerError(parsed);
  if (known) return known;
  // The job's `error` (/status) keeps the whole text; the answer only what a client needs.
  const { message, type } = summariseWorkerError(text, parsed);
  return new AppError('WORKER_ERROR', message, type === undefined ? undefined : { type }, NO_RETRY);
}

/** The most of a worker's error message an OpenAI error body carries (the job's `error` keeps it all). */
export const ERROR_MESSAGE_LIMIT = 1_000;
const TRACEBACK = 'Traceback (most recent call last):';

/**
 * A worker's error text without what only its operator should read: runpod-python's error
 * object (`{"error_type": "<class 'X'>", "error_message", "error_traceback", "hostname",
 * "worker_id", ...}`, a raising handler) gives its message and type; a text with a Python
 * traceback (`handler: <message> \ntraceback: Traceback …`, a raising generator) gives what
 * precedes the traceback and the type its last line names. The message is cut at
 * ERROR_MESSAGE_LIMIT characters.
 *
 * @example summariseWorkerError('handler: bad \ntraceback: Traceback (most recent call last):\nValueError: bad', undefined) // { message: 'bad', type: 'ValueError' }
 */
export function summariseWorkerError(text: string, parsed: unknown): { message: string; type: string | undefined } {
  if (isObject(parsed) && typeof parsed.error_message === 'string') {
    return { message: bounded(parsed.error_message), type: pythonClass(parsed.error_type) };
  }
  const at = text.indexOf(TRACEBACK);
  if (at < 0) return { message: bounded(text), type: undefined };
  const before = text.slice(0, at).replace(/^handler: /, '').replace(/\s*traceback:\s*$/, '').trim();
  // The traceback's last line names the exception: `ValueError: stream broke`.
  const last = text.slice(at).trimEnd().split('\n').pop()?.trim() ?? '';
  const raised = /^([A-Za-z_][\w.]*)(?::\s*(.*))?$/.exec(last);
  return { message: bounded(before || raised?.[2] || 'the worker raised an exception'), type: raised?.[1] };
}

/** `<class 'torch.OutOfMemoryError'>` → `torch.OutOfMemoryError`; a bare class name as it is; anything else undefined. */
function pythonClass(value: unknown): string | undefined {
  if (typeof value !== 'string') return undefined;
  const name = /^<class '([^']+)'>$/.exec(value)?.[1] ?? value;
  return /^[A-Za-z_][\w.]{0,199}$/.test(name) ? name : undefined;
}

function bounded(message: string): string {
  return message.length <= ERROR_MESSAGE_LIMIT ? message : `${message.slice(0, ERROR_MESSAGE_LIMIT)}… (cut; the job's error holds all of it)`;
}

/**
 * An error a worker answered with as its output or a stream chunk: vLLM's ErrorResponse
 * `{"object":"error","message","type","code":400}` or OpenAI's `{"error":{"message",...}}`.
 * Its numeric `code` (400–599) becomes the HTTP status, else 500. Undefined for anything else.
 *
 * @example workerError({ object: 'error', message: 'no such model', type: 'NotFoundError', code: 404 })?.status === 404
 */
export function workerError(value: unknown): AppError | undefined {
  if (!isObject(value)) return undefined;
  const detail = value.object === 'error' ? value : isObject(value.error) ? value.error : undefined;
  if (!detail || typeof detail.message !== 'string') return undefined;
  const code = typeof detail.code === 'number' ? detail.code : Number(detail.code);
  const status = Number.isInteger(code) && code >= 400 && code <= 599 ? code : 500;
  const extra: Record<string, unknown> = {};
  if (typeof detail.type === 'string') extra.type = detail.type;
  if (typeof detail.param === 'string') extra.field = detail.param;
  return new AppError('WORKER_ERROR', detail.message, extra, NO_RETRY, status);
}

function parseJson(text: string): unknown {
  if (!text.startsWith('{')) return undefined;
  try {
    return JSON.parse(text) as unknown;
  } catch {
    return undefined;
  }
}
