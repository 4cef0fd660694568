import type { Logger } from 'pino';
import { AppError } from '../model/errors.js';
import type { Clock } from '../util/clock.js';
import type { Store } from './store.js';

/**
 * What kind of passing fault a store call met: the disk is full, the database cannot be reached
 * (restarting, network), it is busy past its timeout (locks, too many connections), or an I/O
 * error. Such a call changed nothing it reports; the same call later may succeed.
 */
export type StoreFaultKind = 'disk-full' | 'unreachable' | 'busy' | 'io';

/** Node's error codes of a connection that failed or broke, and of a full disk or quota. */
const NODE_CODES = new Map<string, StoreFaultKind>([
  ['ENOSPC', 'disk-full'],
  ['EDQUOT', 'disk-full'],
  ['EIO', 'io'],
  ['ECONNREFUSED', 'unreachable'],
  ['ECONNRESET', 'unreachable'],
  ['ETIMEDOUT', 'unreachable'],
  ['EPIPE', 'unreachable'],
  ['EHOSTUNREACH', 'unreachable'],
  ['ENETUNREACH', 'unreachable'],
  ['ENOTFOUND', 'unreachable'],
  ['EAI_AGAIN', 'unreachable'],
]);

/** PostgreSQL SQLSTATEs of a passing fault (the rest, e.g. a constraint, are the caller's). */
const PG_STATES = new Map<string, StoreFaultKind>([
  ['53100', 'disk-full'], // disk_full
  ['53000', 'busy'], // insufficient_resources
  ['53200', 'busy'], // out_of_memory
  ['53300', 'busy'], // too_many_connections
  ['57P01', 'unreachable'], // admin_shutdown
  ['57P02', 'unreachable'], // crash_shutdown
  ['57P03', 'unreachable'], // cannot_connect_now (starting up)
  ['58030', 'io'], // io_error
  ['40001', 'busy'], // serialization_failure
  ['40P01', 'busy'], // deadlock_detected
]);

/** pg's errors without a code: a connection that ended, or a pool that found none in time. */
const PG_MESSAGES = [/^Connection terminated/, /timeout exceeded when trying to connect/, /Client has encountered a connection error/, /^Connection ended/];

/**
 * The kind of passing fault `err` is, or undefined for anything else (a bug, a constraint, bad
 * input): SQLite's SQLITE_FULL / BUSY / LOCKED / IOERR / CANTOPEN / READONLY, PostgreSQL's
 * connection, shutdown, resource and I/O states, and Node's ENOSPC and connection errors.
 *
 * @example storeFaultKind(Object.assign(new Error('database or disk is full'), { code: 'SQLITE_FULL' })) === 'disk-full'
 */
export function storeFaultKind(err: unknown): StoreFaultKind | undefined {
  if (!(err instanceof Error)) return undefined;
  const code = (err as { code?: unknown }).code;
  if (typeof code === 'string') {
    if (code.startsWith('SQLITE_')) return sqliteFault(code);
    const kind = NODE_CODES.get(code) ?? PG_STATES.get(code);
    if (kind) return kind;
    if (/^08[0-9A-Z]{3}$/.test(code)) return 'unreachable'; // connection_exception
    return undefined;
  }
  return PG_MESSAGES.some((m) => m.test(err.message)) ? 'unreachable' : undefined;
}

function sqliteFault(code: string): StoreFaultKind | undefined {
  if (code === 'SQLITE_FULL') return 'disk-full';
  if (code.startsWith('SQLITE_BUSY') || code.startsWith('SQLITE_LOCKED')) return 'busy';
  if (code.startsWith('SQLITE_IOERR') || code.startsWith('SQLITE_CANTOPEN') || code.startsWith('SQLITE_READONLY')) return 'io';
  return undefined;
}

/** Seconds a client is asked to wait before sending again after a store fault. */
export const STORE_RETRY_AFTER_S = 2;

/** What StoreHealth says of the store. */
export type StoreState = { failing: false } | { failing: true; kind: StoreFaultKind; since: number; faults: number };

/**
 * Fault episodes of one gateway's store. A call that meets a passing fault is answered with
 * STORE_UNAVAILABLE (503, Retry-After) instead of its driver's error; the first fault of an
 * episode is logged once (one line, not a stack per request), and while the episode lasts a
 * probe writes one row every `probeEveryMs` until a write commits again, which ends it (also
 * logged once, with how many calls failed and for how long).
 */
export interface StoreHealth {
  /** The error a failed store call should reject with: STORE_UNAVAILABLE for a passing fault (counted in the episode), `err` itself otherwise. */
  fault(err: unknown): unknown;
  state(): StoreState;
  /** Stops the probe (shutdown). */
  stop(): void;
}

/** What StoreHealth needs: a write that commits or throws, a logger, a clock. */
export interface StoreHealthOptions {
  /** One small write on the store itself (not a guarded one): whether writes commit now. */
  probe(): Promise<void>;
  logger: Pick<Logger, 'error' | 'info'>;
  clock: Clock;
  /** Time between probes while an episode lasts (default 1 s). */
  probeEveryMs?: number;
}

/** @example const health = createStoreHealth({ probe: () => store.probeWrite(Date.now()), logger, clock }); const store2 = guardStore(store, health); */
export function createStoreHealth(options: StoreHealthOptions): StoreHealth {
  const everyMs = options.probeEveryMs ?? 1_000;
  let episode: { kind: StoreFaultKind; since: number; faults: number; code: string | undefined } | undefined;
  let cancel: (() => void) | undefined;
  let stopped = false;

  const probeLater = (): void => {
    if (stopped || cancel) return;
    cancel = options.clock.after(everyMs, () => {
      cancel = undefined;
      options.probe().then(
        () => {
          if (!episode) return;
          options.logger.info({ kind: episode.kind, faults: episode.faults, ms: options.clock.now() - episode.since }, 'store available again');
          episode = undefined;
        },
        () => probeLater(),
      );
    });
  };

  return {
    fault(err) {
      const kind = storeFaultKind(err);
      if (kind === undefined) return err;
      if (episode) episode.faults++;
      else {
        const code = (err as { code?: unknown }).code;
        episode = { kind, since: options.clock.now(), faults: 1, code: typeof code === 'string' ? code : undefined };
        // One line for the episode: what failed, never a stack per request.
        options.logger.error({ kind, code: episode.code, message: (err as Error).message }, 'store unavailable: answering 503 with Retry-After until a write commits again');
      }
      probeLater();
      return unavailable(kind);
    },
    state: () => (episode ? { failing: true, kind: episode.kind, since: episode.since, faults: episode.faults } : { failing: false }),
    stop() {
      stopped = true;
      cancel?.();
      cancel = undefined;
    },
  };
}

const WHY: Record<StoreFaultKind, string> = {
  'disk-full': 'its disk is full',
  unreachable: 'the database cannot be reached',
  busy: 'the database is busy',
  io: 'the database met an I/O error',
};

/** 503 STORE_UNAVAILABLE with Retry-After: the call changed nothing and may be sent again. */
function unavailable(kind: StoreFaultKind): AppError {
  return new AppError('STORE_UNAVAILABLE', `The gateway cannot use its store now (${WHY[kind]}); send the request again later`, { reason: kind }, { 'retry-after': String(STORE_RETRY_AFTER_S) });
}

/**
 * The store with every call's passing fault answered through `health` (STORE_UNAVAILABLE
 * instead of the driver's error); `kind`, `migrate` and `close` are passed through. A call that
 * succeeds costs one promise reaction more.
 *
 * @example const guarded = guardStore(store, health);
 */
export function guardStore(store: Store, health: Pick<StoreHealth, 'fault'>): Store {
  const guarded: Record<string, unknown> = { kind: store.kind };
  const onFault = (err: unknown): never => {
    throw health.fault(err);
  };
  for (const name of methodNames(store)) {
    const method = (store as unknown as Record<string, (arg?: unknown) => Promise<unknown>>)[name]!;
    // Every store method takes one argument: an id or an object of named arguments.
    guarded[name] = name === 'migrate' || name === 'close' ? method.bind(store) : (arg?: unknown) => method.call(store, arg).catch(onFault);
  }
  return guarded as unknown as Store;
}

/** The store's methods: own ones (a composed store) and inherited ones (a class), once each. */
function methodNames(store: Store): string[] {
  const names = new Set<string>();
  for (let o: object | null = store; o !== null && o !== Object.prototype; o = Object.getPrototypeOf(o) as object | null) {
    for (const name of Object.getOwnPropertyNames(o)) {
      if (name !== 'constructor' && typeof (store as unknown as Record<string, unknown>)[name] === 'function') names.add(name);
    }
  }
  return [...names];
}
