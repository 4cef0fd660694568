import type { IncomingMessage } from 'node:http';
import { AppError } from '../model/errors.js';
import { MAX_JSON_DEPTH, nestedDeeperThan } from '../model/json.js';
import type { JsonThreads } from '../util/json-threads.js';
import { keyShare } from '../util/key-share.js';

export const MB = 1_000_000;

/** After a body is refused as too large, up to this many more bytes are read and dropped so the client reads the 413. */
const DRAIN_LIMIT = 64 * MB;

/**
 * The gateway's limits on reading bodies, shared by all its requests: a deadline per body and
 * a cap on the bytes of all bodies being read at once (memory the gateway holds for them).
 */
export interface BodyPolicy {
  /** A body not received within this many ms of the read's start is refused with 408. */
  readTimeoutMs: number;
  /** Bytes all bodies being read may hold together; past it a body is refused with 503. */
  bytesInFlight: number;
  /** Bodies of at least `minBytes` are parsed on these threads, off the event loop (default: all on the event loop). */
  offload?: { threads: JsonThreads; minBytes: number };
  /**
   * Bytes a second the gateway reads (and drops) of refused bodies, all together; one key's
   * drains get at most half. Default: as fast as they come.
   */
  drainBytesPerSecond?: number;
}

/**
 * Counts the bytes of bodies being read under one policy, in all and per API key: one key's
 * bodies may hold at most half of `bytesInFlight` (docs/security.md, "Shared limits"), so the
 * other half stays for the other keys whatever one key sends.
 */
export interface BodyBudget {
  readonly policy: BodyPolicy;
  /** Bytes of bodies being read now. */
  inFlight: number;
  /** Bytes of bodies being read now per key id ('' for requests without a key); a key leaves at 0. */
  readonly byKey: Map<string, number>;
  /** The pace of refused bodies' drains, all together and per key with a drain in progress or a bucket refilling (absent: unpaced). */
  readonly drains?: { all: ByteBucket; byKey: Map<string, { bucket: ByteBucket; draining: number }> };
}

/** @example const budget = createBodyBudget({ readTimeoutMs: 30_000, bytesInFlight: 512 * MB }); */
export function createBodyBudget(policy: BodyPolicy): BodyBudget {
  const rate = policy.drainBytesPerSecond;
  return { policy, inFlight: 0, byKey: new Map(), ...(rate ? { drains: { all: new ByteBucket(rate), byKey: new Map() } } : {}) };
}

/**
 * Bytes a second, with a second's worth at once: `take(n)` counts n bytes read and says how
 * many ms to wait before reading on (0: none). Readers sharing a bucket share its rate.
 */
export class ByteBucket {
  private tokens: number;
  private at = performance.now();

  /** @param perSecond the bucket's rate, bytes a second */
  constructor(readonly perSecond: number) {
    this.tokens = perSecond;
  }

  take(bytes: number): number {
    this.refill();
    this.tokens -= bytes;
    return this.tokens >= 0 ? 0 : Math.ceil((-this.tokens * 1000) / this.perSecond);
  }

  /** Whether a second's worth is there again (a reader starting now would not wait). */
  full(): boolean {
    this.refill();
    return this.tokens >= this.perSecond;
  }

  private refill(): void {
    const now = performance.now();
    this.tokens = Math.min(this.perSecond, this.tokens + ((now - this.at) * this.perSecond) / 1000);
    this.at = now;
  }
}

/** The most bytes of bodies one key may have in flight under `policy`: half the budget. */
export function keyBodyShare(policy: BodyPolicy): number {
  return Math.floor(policy.bytesInFlight / 2);
}

const BUDGET = Symbol('gantry.bodyBudget');
/** What one body read has counted into the budget, and under which key. */
type BodyCounter = { counted: number; keyId: string };
type WithBudget = IncomingMessage & { [BUDGET]?: BodyBudget };

/** Makes `budget` govern every body read of `req` (the request listener calls this per request). */
export function governBody(req: IncomingMessage, budget: BodyBudget): void {
  (req as WithBudget)[BUDGET] = budget;
}

/**
 * Reads a request body of at most `limit` bytes and parses it as JSON, whatever the
 * Content-Type: runpod-python posts JSON as application/x-www-form-urlencoded. An empty body is
 * `{}` (clients POST cancel/purge-queue with a JSON content type and no body).
 * Too large → 413, after reading and dropping the rest (up to a bound) so the client can read
 * the answer; not JSON → 400; nested too deep → 400; not in within the deadline → 408; the
 * gateway's bytes in flight full → 503 with Retry-After.
 *
 * A body of the policy's `offload.minBytes` or more is parsed on a JSON thread, and its
 * top-level fields named in `raw` come back as RawJson text (model/json.ts); a smaller body is
 * parsed here and its fields are plain values. Callers read such fields with `jsonText`.
 */
export async function readJsonBody(req: IncomingMessage, limit: number, raw: readonly string[] = NO_RAW, keyId = ''): Promise<unknown> {
  const budget = (req as WithBudget)[BUDGET];
  const declared = Number(req.headers['content-length']);
  const withinMs = budget?.policy.readTimeoutMs;
  if (declared > limit) {
    await drain(req, declared <= DRAIN_LIMIT ? withinMs : 0, budget, keyId);
    throw tooLarge(limit);
  }
  const counter = { counted: 0, keyId };
  try {
    if (budget && declared > 0) {
      const refused = reserve(budget, counter, declared);
      if (refused) {
        await drain(req, withinMs, budget, keyId);
        throw refused;
      }
    }
    const offload = budget?.policy.offload;
    // A body that will be parsed on a JSON thread is kept as the chunks it came in: the thread
    // joins them, and the event loop copies none of its bytes (docs/benchmarks.md "Round five").
    const asChunks = offload !== undefined && declared >= offload.minBytes;
    const bytes = await receive(req, limit, budget, counter, asChunks ? 0 : declared);
    const size = Array.isArray(bytes) ? bytes.reduce((n, chunk) => n + chunk.length, 0) : bytes.length;
    if (offload && size >= offload.minBytes) return await parseOffLoop(offload.threads, bytes, raw);
    return parse(Array.isArray(bytes) ? Buffer.concat(bytes, size) : bytes);
  } finally {
    if (budget && counter.counted > 0) {
      budget.inFlight -= counter.counted;
      const left = (budget.byKey.get(keyId) ?? 0) - counter.counted;
      if (left > 0) budget.byKey.set(keyId, left);
      else budget.byKey.delete(keyId);
    }
  }
}

/** Counts `bytes` more in; returns the 503 to answer instead when the gateway's bodies in flight would pass the cap. */
function reserve(budget: BodyBudget, counter: BodyCounter, bytes: number): AppError | undefined {
  const mb = (n: number): number => Math.round(n / MB);
  const refuse = (message: string): AppError => new AppError('BODIES_IN_FLIGHT', message, undefined, { 'retry-after': '1', connection: 'close' });
  if (budget.inFlight + bytes > budget.policy.bytesInFlight) {
    return refuse(`The gateway is reading ${mb(budget.inFlight)} MB of request bodies (limit ${mb(budget.policy.bytesInFlight)} MB): retry later`);
  }
  const own = budget.byKey.get(counter.keyId) ?? 0;
  if (own + bytes > keyBodyShare(budget.policy)) {
    return refuse(`The gateway is reading ${mb(own)} MB of request bodies of this key (limit ${mb(keyBodyShare(budget.policy))} MB a key, half the gateway's): retry later`);
  }
  budget.inFlight += bytes;
  budget.byKey.set(counter.keyId, own + bytes);
  counter.counted += bytes;
  return undefined;
}

const NO_RAW: readonly string[] = [];
/** Bodies declared this large are received into one buffer; smaller ones (most, often one chunk) as chunks. */
const ONE_BUFFER_MIN = 64 * 1024;

/**
 * Receives the body, counting bytes beyond those already counted into the budget. A body
 * refused on the way (too large, budget full) is drained before the promise rejects. With a
 * declared length (`oneBuffer`) the bytes go straight into one buffer of that size (one copy of
 * the body, not chunks and then their concatenation); without, a body of several chunks comes
 * as those chunks (its length checked against the declared one, if any).
 */
function receive(req: IncomingMessage, limit: number, budget: BodyBudget | undefined, counter: BodyCounter, oneBuffer: number): Promise<Buffer | Buffer[]> {
  const declared = Number(req.headers['content-length']);
  return new Promise<Buffer | Buffer[]>((resolve, reject) => {
    const whole = oneBuffer >= ONE_BUFFER_MIN ? Buffer.allocUnsafeSlow(oneBuffer) : undefined;
    const chunks: Buffer[] = [];
    let size = 0;
    let settled = false;
    const settle = (err: unknown, drainFirst: boolean): void => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      req.off('data', onData);
      if (drainFirst) void drain(req, budget?.policy.readTimeoutMs, budget, counter.keyId).then(() => reject(err));
      else reject(err);
    };
    const timer = budget ? setTimeout(() => settle(timedOut(budget.policy.readTimeoutMs), false), budget.policy.readTimeoutMs) : undefined;
    const onData = (chunk: Buffer): void => {
      size += chunk.length;
      if (size > limit) return settle(tooLarge(limit), true);
      const refused = budget && size > counter.counted ? reserve(budget, counter, size - counter.counted) : undefined;
      if (refused) return settle(refused, true);
      if (whole && size <= whole.length) chunk.copy(whole, size - chunk.length);
      else chunks.push(chunk);
    };
    req.on('data', onData);
    req.once('end', () => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      // Node's parser ends a body at its Content-Length: fewer bytes are a body cut short.
      if (declared > 0 && size !== declared) reject(new AppError('INCOMPLETE_BODY', 'The request body ended early'));
      else if (whole) resolve(whole);
      else resolve(chunks.length === 1 ? chunks[0]! : chunks);
    });
    req.once('error', (err) => settle(err, false));
    req.once('close', () => {
      if (!req.complete) settle(new AppError('INCOMPLETE_BODY', 'The request body ended early'), false);
    });
    // The client closed its connection before the body was read (a client that timed out while
    // the gateway was paused or busy): the stream was destroyed, its 'close' has passed, and it
    // will emit nothing more. Without this the read waited forever and its bytes stayed counted.
    if (req.destroyed && !req.readableEnded) settle(new AppError('INCOMPLETE_BODY', 'The client closed the connection before its body was read'), false);
  });
}

/** Parses a received body: empty → `{}`; not JSON → 400; nested past MAX_JSON_DEPTH → 400. */
function parse(bytes: Buffer): unknown {
  if (bytes.length === 0) return {};
  const text = bytes.toString('utf8');
  if (text.trim() === '') return {};
  let value: unknown;
  try {
    value = JSON.parse(text) as unknown;
  } catch (err) {
    throw invalidJson((err as Error).message);
  }
  // A body shorter than twice the limit cannot nest past it: small bodies skip the walk.
  if (bytes.length > 2 * MAX_JSON_DEPTH && nestedDeeperThan(value, MAX_JSON_DEPTH)) throw tooDeep();
  return value;
}

/** Parses a large body on a JSON thread: the same answers as `parse`; a thread that failed is a 503 to retry. */
async function parseOffLoop(threads: JsonThreads, bytes: Buffer | Buffer[], raw: readonly string[]): Promise<unknown> {
  let result;
  try {
    result = await threads.parse(bytes, raw, MAX_JSON_DEPTH);
  } catch {
    throw new AppError('BODIES_IN_FLIGHT', 'The gateway could not parse the request body now: retry later', undefined, { 'retry-after': '1', connection: 'close' });
  }
  if ('value' in result) return result.value;
  if (result.refused === 'too-deep') throw tooDeep();
  throw invalidJson(result.message);
}

function invalidJson(message: string): AppError {
  return new AppError('INVALID_JSON', `Malformed JSON body: ${message}`);
}

function tooDeep(): AppError {
  return new AppError('JSON_TOO_DEEP', `JSON body nested deeper than ${MAX_JSON_DEPTH} levels`);
}

/**
 * Reads and drops the rest of a refused body (at most DRAIN_LIMIT bytes, within `withinMs`), so
 * that the client has sent it all and reads the answer instead of a broken pipe. Resolves when
 * the body has ended or the bound is reached (the answer closes the connection either way).
 *
 * Under a budget with a drain rate the reading is paced: the drains of all refused bodies
 * together read at most that rate, one key's at most half, and a drain over its pace stops
 * reading until its turn (the client's upload waits in TCP, costing nobody CPU). A client that
 * sends body after body past its refusals so waits for each answer instead of making the
 * gateway read gigabytes it drops (docs/security.md, "Shared limits").
 */
function drain(req: IncomingMessage, withinMs = 30_000, budget?: BodyBudget, keyId = ''): Promise<void> {
  if (req.complete || withinMs <= 0) return Promise.resolve();
  return new Promise<void>((resolve) => {
    const pace = budget?.drains ? drainPace(budget.drains, keyId) : undefined;
    let dropped = 0;
    let finished = false;
    let paused: NodeJS.Timeout | undefined;
    const done = (): void => {
      if (finished) return;
      finished = true;
      clearTimeout(timer);
      clearTimeout(paused);
      req.off('data', onData);
      pace?.end();
      req.pause();
      resolve();
    };
    const onData = (chunk: Buffer): void => {
      dropped += chunk.length;
      if (dropped > DRAIN_LIMIT) return done();
      const waitMs = pace?.take(chunk.length) ?? 0;
      if (waitMs > 0 && !paused) {
        req.pause();
        paused = setTimeout(() => {
          paused = undefined;
          if (!finished) req.resume();
        }, waitMs);
      }
    };
    const timer = setTimeout(done, withinMs);
    req.on('data', onData);
    req.once('end', done);
    req.once('close', done);
    req.resume();
  });
}

/** Keys' drain buckets kept before idle ones are swept (one with a drain in progress, or still refilling, is kept). */
const DRAIN_KEYS_SWEPT_PAST = 64;

/**
 * One drain's pace: the gateway's bucket and its key's. A key's bucket outlives its drains
 * until it has refilled, so that refused bodies sent one after another share it as concurrent
 * ones do; idle full buckets are swept once more than DRAIN_KEYS_SWEPT_PAST keys have one.
 */
function drainPace(drains: NonNullable<BodyBudget['drains']>, keyId: string): { take(bytes: number): number; end(): void } {
  let own = drains.byKey.get(keyId);
  if (!own) {
    if (drains.byKey.size >= DRAIN_KEYS_SWEPT_PAST) {
      for (const [id, entry] of drains.byKey) if (entry.draining === 0 && entry.bucket.full()) drains.byKey.delete(id);
    }
    drains.byKey.set(keyId, (own = { bucket: new ByteBucket(keyShare(drains.all.perSecond)), draining: 0 }));
  }
  own.draining++;
  const key = own;
  return {
    take: (bytes) => Math.max(drains.all.take(bytes), key.bucket.take(bytes)),
    end: () => void key.draining--,
  };
}

function tooLarge(limit: number): AppError {
  return new AppError('PAYLOAD_TOO_LARGE', `Request body is larger than ${limit / MB} MB`, undefined, { connection: 'close' });
}

function timedOut(ms: number): AppError {
  return new AppError('BODY_TIMEOUT', `The request body was not received within ${ms / 1000} s`, undefined, { connection: 'close' });
}
