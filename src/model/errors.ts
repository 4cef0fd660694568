/**
 * The one error type that crosses into HTTP: a stable machine `code`, the HTTP `status` and a
 * message meant for people. src/http/respond.ts is the one place that turns it into
 * `{"error": message, "code": code}` (plus `extra` fields such as a job's id and status).
 *
 * @example throw new AppError(400, 'INVALID_PARAMETER', 'Invalid parameter: policy.ttl must be at least 10000');
 */
export class AppError extends Error {
  constructor(
    readonly status: number,
    readonly code: string,
    message: string,
    readonly extra?: Record<string, unknown>,
    readonly headers?: Record<string, string>,
  ) {
    super(message);
    this.name = 'AppError';
  }
}

/** 400 naming the offending field: `Invalid parameter: <field> <problem>`. */
export function invalidParameter(field: string, problem: string): AppError {
  return new AppError(400, 'INVALID_PARAMETER', `Invalid parameter: ${field} ${problem}`, { field });
}
