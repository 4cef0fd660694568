import { pino, type DestinationStream, type Logger } from 'pino';
import { PinoPretty } from 'pino-pretty';
import { AppError } from '../model/errors.js';
import { currentRequestId } from './request-context.js';

/** How log lines are written: JSON lines, or one readable line each (pino-pretty). */
export type LogFormat = 'json' | 'pretty';

/**
 * GANTRY_LOG_FORMAT: `json`, `pretty`, or `auto`/unset — pretty when stdout is a terminal,
 * JSON otherwise (a file, a pipe, a log collector). Throws naming the variable on a bad value.
 *
 * @example logFormatFrom({ GANTRY_LOG_FORMAT: 'json' }, true) // 'json'
 */
export function logFormatFrom(env: NodeJS.ProcessEnv, stdoutIsTerminal: boolean): LogFormat {
  const value = env.GANTRY_LOG_FORMAT;
  if (value === undefined || value === '' || value === 'auto') return stdoutIsTerminal ? 'pretty' : 'json';
  if (value === 'json' || value === 'pretty') return value;
  throw new Error(`Invalid GANTRY_LOG_FORMAT=${JSON.stringify(value)}: expected json, pretty or auto`);
}

/** pino's level number of debug: finer levels keep every line. */
const DEBUG = 20;

/**
 * A line about a call that failed because the store is unavailable (`err` is STORE_UNAVAILABLE)
 * is left out below debug level: the store's fault episode is logged once when it begins and
 * once when it ends (src/store/store-faults.ts), not once per failed call of every background
 * loop.
 */
function leaveOutStoreFaults(this: Logger, args: Parameters<Logger['info']>, method: (...args: unknown[]) => void): void {
  const first = args[0] as { err?: unknown } | undefined;
  if (first?.err instanceof AppError && first.err.code === 'STORE_UNAVAILABLE' && this.levelVal > DEBUG) return;
  method.apply(this, args);
}

/**
 * The gateway's logger: pino at `level`, JSON lines on stdout, or readable lines (time, level,
 * message, fields) when `format` is pretty. Fields such as requestId, jobId, workerId and
 * endpointId are kept in both; at debug level every line written for a request gets its
 * requestId (src/util/request-context.ts). Lines about calls refused by a store fault episode are
 * left out below debug level (leaveOutStoreFaults).
 *
 * @example const logger = createLogger({ level: 'info', format: logFormatFrom(process.env, Boolean(process.stdout.isTTY)) });
 */
export function createLogger(options: { level: string; format: LogFormat; destination?: DestinationStream }): Logger {
  // The request a line is written for, when the request listener runs it as one (debug level).
  const mixin = (): object => {
    const requestId = currentRequestId();
    return requestId === undefined ? {} : { requestId };
  };
  const base = { level: options.level, base: { service: 'gantry' }, mixin, hooks: { logMethod: leaveOutStoreFaults } };
  if (options.format === 'json') return options.destination ? pino(base, options.destination) : pino(base);
  const pretty = PinoPretty({
    colorize: options.destination === undefined && Boolean(process.stdout.isTTY),
    translateTime: 'SYS:HH:MM:ss.l',
    ignore: 'pid,hostname,service',
    // Written synchronously: a line is on the terminal before the process can exit.
    sync: true,
    ...(options.destination ? { destination: options.destination } : {}),
  });
  return pino(base, pretty);
}
