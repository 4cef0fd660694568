/**
 * Every error code Gantry answers with, its HTTP status, and when it is given. docs/api.md
 * lists the same table (a test holds the two together). A code is the stable part clients
 * branch on; the message is for people.
 */
export const ERROR_CODES = {
  INVALID_JSON: { status: 400, when: 'the body is not JSON' },
  INVALID_BODY: { status: 400, when: 'the body is JSON of the wrong shape' },
  INVALID_PARAMETER: { status: 400, when: 'a field, query value or path id is wrong; `field` names it' },
  JSON_TOO_DEEP: { status: 400, when: 'the body nests past 1000 levels' },
  INVALID_PATH: { status: 400, when: 'the path or query holds `%00` or malformed percent-encoding' },
  INCOMPLETE_BODY: { status: 400, when: 'the body ended before its declared length, or the client closed the connection before it was read' },
  INVALID_IDEMPOTENCY_KEY: { status: 400, when: 'the Idempotency-Key header is not 1 to 255 printable ASCII characters, or is sent twice' },
  UNAUTHORIZED: { status: 401, when: 'no key, an unknown key, or not signed in' },
  INSUFFICIENT_SCOPE: { status: 401, when: 'the key lacks the scope or the endpoint' },
  BUDGET_EXCEEDED: { status: 402, when: "the key's spend in its budget period reached its `budgetUsd`; `budgetUsd`, `budgetPeriod`, `spentUsd` and `resetsAt` say which budget and when it resets" },
  FORBIDDEN: { status: 403, when: 'a /files signature is wrong or expired' },
  CSRF_TOKEN_INVALID: { status: 403, when: 'a console call lacks its CSRF token' },
  NOT_FOUND: { status: 404, when: 'no route has this path' },
  ENDPOINT_NOT_FOUND: { status: 404, when: 'no endpoint has this id' },
  JOB_NOT_FOUND: { status: 404, when: 'no job of this endpoint has this id' },
  KEY_NOT_FOUND: { status: 404, when: 'no API key has this id' },
  WORKER_NOT_FOUND: { status: 404, when: 'no pool worker has this id' },
  REGISTRY_CREDENTIAL_NOT_FOUND: { status: 404, when: 'no registry credential has this id' },
  METHOD_NOT_ALLOWED: { status: 405, when: 'the route exists for other methods; `Allow` lists them' },
  BODY_TIMEOUT: { status: 408, when: 'the body was not received within GANTRY_BODY_READ_TIMEOUT_MS' },
  INVALID_STATE: { status: 409, when: 'the job is in a state the call does not apply to; `status` says which' },
  JOB_NOT_HELD: { status: 409, when: 'a worker posts for a job it does not hold' },
  ENDPOINT_EXISTS: { status: 409, when: 'an endpoint with this id exists' },
  WORKER_OF_OTHER_ENDPOINT: { status: 409, when: 'a worker id already serves another endpoint' },
  KEY_MANAGED: { status: 409, when: "revoking a key the gateway manages (a pool worker's own key) without `?force=true`" },
  NO_WEBHOOK: { status: 409, when: 'resending the webhook of a job submitted without one' },
  WEBHOOK_PENDING: { status: 409, when: "resending a job's webhook while a delivery of it is due or under way" },
  REGISTRY_CREDENTIAL_IN_USE: { status: 409, when: 'a registry credential still named by endpoints; `endpoints` lists them' },
  JOB_CANCELLED: { status: 409, when: 'an OpenAI request whose job was cancelled' },
  IDEMPOTENCY_KEY_REUSED: { status: 409, when: 'the Idempotency-Key made a job from another body or route; `id` names that job' },
  STREAM_NOT_REPLAYABLE: { status: 409, when: 'a streaming OpenAI request retried with its Idempotency-Key: the stream went to the first try; `id` names the job' },
  JOB_EXPIRED: { status: 410, when: 'the job can no longer be retried: its result expired' },
  PAYLOAD_TOO_LARGE: { status: 413, when: 'the body is larger than the route allows' },
  STREAM_BUFFER_FULL: { status: 413, when: "a worker's job-stream post would buffer more than GANTRY_STREAM_BUFFER_BYTES of the job's undelivered chunks; the run's stream is cut, its result still goes to job-done" },
  UNSUPPORTED_MEDIA_TYPE: { status: 415, when: 'console sign-in without a JSON body' },
  RATE_LIMITED: { status: 429, when: "the endpoint's requests per 10 s are used up; `Retry-After`" },
  TOO_MANY_CONCURRENT: { status: 429, when: "the endpoint's concurrent requests are used up; `Retry-After`" },
  TOO_MANY_JOBS: { status: 429, when: "the key has its `maxConcurrentJobs` jobs queued or running; `Retry-After`" },
  QUEUE_FULL: { status: 429, when: "the endpoint's queue holds too many jobs, or the key its share of them while other keys have jobs queued (the message says which); `Retry-After`" },
  TOO_MANY_CONNECTIONS: { status: 429, when: "the key holds half of the gateway's connection cap with requests in progress; `Retry-After`, and the connection is closed" },
  INVALID_WORKER_ID: { status: 429, when: 'job-take with a worker id Gantry cannot use; `Retry-After` (runpod-python backs off)' },
  WORKER_BACK_OFF: { status: 429, when: "a worker's job-take or job-stop while the store is unavailable; `Retry-After` (runpod-python waits 5 s after a 429, but asks again at once after a 5xx)" },
  TOO_MANY_SIGN_INS: { status: 429, when: "a wrong console sign-in past the address's free guesses, or a password from an address that must still wait; `Retry-After`, `retryAfterS`" },
  INTERNAL: { status: 500, when: 'a fault; logged, never detailed to the client' },
  WORKER_ERROR: { status: 500, when: "an OpenAI request's worker failed (its own status when it gave one)" },
  EMPTY_OUTPUT: { status: 502, when: 'an OpenAI request whose worker finished without output' },
  STREAM_RESTARTED: { status: 502, when: "in an OpenAI stream: the job's worker was lost after part of the answer went out and the job started again; the answer is incomplete, send the request again" },
  STREAM_TRUNCATED: { status: 502, when: "in an OpenAI stream: the job's stream was cut by GANTRY_STREAM_BUFFER_BYTES, so the answer is incomplete" },
  BODIES_IN_FLIGHT: { status: 503, when: 'the gateway reads GANTRY_BODY_BYTES_IN_FLIGHT of bodies already; `Retry-After`' },
  STORE_UNAVAILABLE: { status: 503, when: 'the store cannot be written or reached now (disk full, database restarting); `reason` says which; `Retry-After`' },
  DISK_SPACE_LOW: { status: 503, when: "new jobs while the data directory's free space is under GANTRY_DISK_MIN_FREE_BYTES (workers' results are still taken); `Retry-After`" },
  GATEWAY_CLOSING: { status: 503, when: 'the gateway shut down before an OpenAI request finished' },
  CONSOLE_NOT_BUILT: { status: 503, when: 'the console bundle is missing' },
  JOB_TIMED_OUT: { status: 504, when: "an OpenAI request's job timed out" },
  JOB_NOT_FINISHED: { status: 504, when: "an OpenAI request's job did not finish in time" },
} as const satisfies Record<string, { status: number; when: string }>;

/** A code of ERROR_CODES. */
export type ErrorCode = keyof typeof ERROR_CODES;

/**
 * The one error type that crosses into HTTP: a `code` of ERROR_CODES, its HTTP `status`, and a
 * message meant for people. src/http/respond.ts is the one place that turns it into
 * `{"error": message, "code": code}` (plus `extra` fields such as a job's id and status).
 * Build it with a factory below where one fits.
 *
 * @example throw new AppError('INVALID_PARAMETER', 'Invalid parameter: policy.ttl must be at least 10000', { field: 'policy.ttl' });
 */
export class AppError extends Error {
  readonly status: number;

  constructor(
    readonly code: ErrorCode,
    message: string,
    readonly extra?: Record<string, unknown>,
    readonly headers?: Record<string, string>,
    /** Only for WORKER_ERROR, whose status is the worker's own. */
    status?: number,
  ) {
    super(message);
    this.name = 'AppError';
    this.status = status ?? ERROR_CODES[code].status;
  }
}

/** 400 naming the offending field: `Invalid parameter: <field> <problem>`. */
export function invalidParameter(field: string, problem: string): AppError {
  return new AppError('INVALID_PARAMETER', `Invalid parameter: ${field} ${problem}`, { field });
}

/** 400: a body that is JSON but not the object the route expects (`what` says what it expects). */
export function invalidBody(what: string): AppError {
  return new AppError('INVALID_BODY', `Invalid request body: expected ${what}`);
}

/** 404: no route has this path (or this path under a route family). */
export function routeNotFound(message = 'No such route'): AppError {
  return new AppError('NOT_FOUND', message);
}

/** 405 with `Allow`: the path exists for `allowed` methods only. */
export function methodNotAllowed(method: string, allowed: readonly string[], where = 'here'): AppError {
  return new AppError('METHOD_NOT_ALLOWED', `${method} is not allowed ${where} (use ${allowed.join(' or ')})`, undefined, { allow: allowed.join(', ') });
}

/** 404: no endpoint has this id. */
export function endpointNotFound(id: string): AppError {
  return new AppError('ENDPOINT_NOT_FOUND', `Endpoint ${id} not found`, { id });
}

/** 404: no job of the endpoint has this id. */
export function jobNotFound(id: string): AppError {
  return new AppError('JOB_NOT_FOUND', `Job ${id} not found`, { id });
}

/** 401: no key, or one that is not stored. */
export function unauthorized(message = 'Invalid API key'): AppError {
  return new AppError('UNAUTHORIZED', message);
}

/** 429 with `Retry-After: seconds`, for the 429 codes. */
export function throttled(code: 'RATE_LIMITED' | 'TOO_MANY_CONCURRENT' | 'QUEUE_FULL' | 'TOO_MANY_SIGN_INS', message: string, retryAfterS: number): AppError {
  return new AppError(code, message, undefined, { 'retry-after': String(retryAfterS) });
}
