import { Worker } from 'node:worker_threads';
import { jsonScanSource } from '../model/json-scan.js';
import { jsonKind, nestedDeeperThan, RawJson, type JsonKind } from '../model/json.js';

/** Why a body could not be used as JSON: not JSON at all, or nested deeper than allowed. */
export type JsonRefusal = { refused: 'invalid'; message: string } | { refused: 'too-deep' };

/** A parsed body, or why it was refused. */
export type JsonParse = { value: unknown } | JsonRefusal;

/**
 * A few worker threads that parse large JSON bodies off the event loop. The body's bytes are
 * moved to a thread (transferred, not copied). There the fields named in `raw` (top level of an
 * object body) come back as RawJson bytes, the rest as a structured clone: the field's bytes as
 * the client sent them, where one scan finds its text already as JSON.stringify writes it
 * (model/json-scan.ts) and valid UTF-8 — the body is then moved back, not copied — or else by
 * decoding, parsing, checking the depth and serialising the field again, encoded on the thread.
 * A 19 MB job input thus costs the event loop no parse and no copy: it never becomes a string
 * there unless something reads its text (docs/benchmarks.md, "Big bodies", "Round five").
 */
export interface JsonThreads {
  /**
   * Parses `bytes` on a thread: one buffer, or the chunks a body came in (joined on the thread,
   * so the event loop copies none of them). It takes them over: the caller must not use them
   * after (moved to the thread).
   */
  parse(bytes: Buffer | Buffer[], raw: readonly string[], maxDepth: number): Promise<JsonParse>;
  /** Bodies waiting for or in a thread. */
  pending(): number;
  /** Bodies the threads have parsed (or refused) since the start. */
  parsed(): number;
  /** Ends the threads; parses still pending reject. A second call does nothing. */
  close(): Promise<void>;
}

/**
 * The JSON threads' nice value (Linux; elsewhere they keep the process's). Parsing is work the
 * event loop can wait for; the event loop answering /healthz, /run and every worker cannot wait
 * for it. At nice 10 a busy thread gets about a tenth of the CPU a thread at 0 gets when they
 * want the same core, so a parse in progress gives way as soon as the event loop has work.
 */
export const THREAD_NICE = 10;

/** The thread's code, run with `eval`: the depth walk is the gateway's own function, not a copy of it. */
const THREAD_SOURCE = `
const { parentPort } = require('node:worker_threads');
const { isUtf8 } = require('node:buffer');
// Below the event loop: on Linux a thread has a nice value of its own (setpriority on its id).
try {
  const tid = Number(require('node:fs').readlinkSync('/proc/thread-self').split('/').pop());
  require('node:os').setPriority(tid, ${THREAD_NICE});
} catch {}
const nestedDeeperThan = ${nestedDeeperThan.toString()};
const jsonKind = ${jsonKind.toString()};
${jsonScanSource()}
// The raw fields' texts as UTF-8 bytes: [name, start, end, kind] in one new buffer.
function encodeTexts(texts) {
  const utf8 = Buffer.allocUnsafeSlow(texts.reduce((n, [, text]) => n + Buffer.byteLength(text), 0));
  let at = 0;
  const raw = texts.map(([name, text, kind]) => {
    const start = at;
    at += utf8.write(text, at);
    return [name, start, at, kind];
  });
  return { utf8, raw };
}
// Chunks as received are joined here, into memory shared with the event loop: the raw fields go
// back as views of it, copied by no one and counted once on the event loop's heap.
function joinShared(chunks) {
  const joined = Buffer.from(new SharedArrayBuffer(chunks.reduce((n, chunk) => n + chunk.byteLength, 0)));
  let at = 0;
  for (const chunk of chunks) {
    joined.set(chunk, at);
    at += chunk.byteLength;
  }
  return joined;
}
parentPort.on('message', ({ id, bytes: sent, chunks, raw, maxDepth }) => {
  const bytes = chunks ? joinShared(chunks) : sent;
  const body = Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  const scanned = raw.length > 0 ? scanRawFields(bytes, raw, maxDepth) : null;
  if (scanned) {
    // The fields as the client sent them: where they lie in the body (joined here in shared
    // memory, or moved back), unless one is not valid UTF-8 (its text then has U+FFFD where
    // decoding replaced bytes, as before).
    if (scanned.raw.every(([, start, end]) => isUtf8(body.subarray(start, end)))) {
      if (chunks) return parentPort.postMessage({ id, value: scanned.value, raw: scanned.raw, utf8: bytes });
      return parentPort.postMessage({ id, value: scanned.value, raw: scanned.raw, utf8: bytes }, [bytes.buffer]);
    }
    const { utf8, raw: ranges } = encodeTexts(scanned.raw.map(([name, start, end, kind]) => [name, body.toString('utf8', start, end), kind]));
    return parentPort.postMessage({ id, value: scanned.value, raw: ranges, utf8 }, [utf8.buffer]);
  }
  let value;
  try {
    const text = body.toString('utf8');
    if (text.trim() === '') return parentPort.postMessage({ id, value: {}, raw: [] });
    value = JSON.parse(text);
  } catch (err) {
    return parentPort.postMessage({ id, refused: 'invalid', message: String(err && err.message) });
  }
  if (nestedDeeperThan(value, maxDepth)) return parentPort.postMessage({ id, refused: 'too-deep' });
  const texts = [];
  if (value !== null && typeof value === 'object' && !Array.isArray(value)) {
    for (const name of raw) {
      if (!Object.prototype.hasOwnProperty.call(value, name)) continue;
      texts.push([name, JSON.stringify(value[name]), jsonKind(value[name])]);
      delete value[name];
    }
  }
  if (texts.length === 0) return parentPort.postMessage({ id, value, raw: [] });
  const { utf8, raw: ranges } = encodeTexts(texts);
  parentPort.postMessage({ id, value, raw: ranges, utf8 }, [utf8.buffer]);
});
`;

interface Reply {
  id: number;
  value?: unknown;
  /** Each raw field: [name, start, end, kind] of its text's UTF-8 bytes in `utf8`. */
  raw?: [string, number, number, JsonKind][];
  /** The bytes the raw fields lie in: the body the thread joined from chunks (shared), the body moved back, or their texts encoded on the thread. */
  utf8?: Uint8Array;
  refused?: 'invalid' | 'too-deep';
  message?: string;
}

interface Pending {
  resolve(result: JsonParse): void;
  reject(err: Error): void;
}

interface Thread {
  worker: Worker;
  busy: number;
}

/**
 * Starts `threads` parse threads (each started on its first use).
 *
 * @example const json = createJsonThreads(2); const r = await json.parse(Buffer.from('{"input":{}}'), ['input'], 1000);
 */
export function createJsonThreads(threads: number): JsonThreads {
  const pool: (Thread | undefined)[] = Array.from({ length: Math.max(1, threads) }, () => undefined);
  const waiting = new Map<number, Pending & { thread: Thread }>();
  let nextId = 0;
  let answered = 0;
  let closed = false;

  const start = (slot: number): Thread => (pool[slot] = startThread(waiting, () => (pool[slot] = undefined), () => answered++));

  const leastBusy = (): Thread => {
    let best: Thread | undefined;
    for (let i = 0; i < pool.length; i++) {
      const thread = pool[i] ?? start(i);
      if (!best || thread.busy < best.busy) best = thread;
    }
    return best!;
  };

  return {
    parse(bytes, raw, maxDepth) {
      if (closed) return Promise.reject(new Error('JSON threads are closed'));
      const thread = leastBusy();
      const id = ++nextId;
      const send = (message: object, transfer: ArrayBuffer[]): Promise<JsonParse> =>
        new Promise<JsonParse>((resolve, reject) => {
          waiting.set(id, { resolve, reject, thread });
          thread.busy++;
          thread.worker.ref();
          thread.worker.postMessage(message, transfer);
        }).finally(() => {
          if (thread.busy === 0) thread.worker.unref();
        });
      if (Array.isArray(bytes)) {
        const chunks = bytes.map(movable);
        return send({ id, chunks, raw, maxDepth }, chunks.map((chunk) => chunk.buffer as ArrayBuffer));
      }
      // Moved (and moved back), not copied, where it owns its memory whole.
      const sent = movable(bytes);
      return send({ id, bytes: sent, raw, maxDepth }, [sent.buffer as ArrayBuffer]);
    },
    pending: () => waiting.size,
    parsed: () => answered,
    async close() {
      if (closed) return;
      closed = true;
      await Promise.all(pool.map((thread) => thread?.worker.terminate()));
    },
  };
}

/** `bytes` as they are when they own their memory whole, else a copy that does (a shared or pooled buffer cannot be moved): what can be transferred. */
function movable(bytes: Buffer): Buffer {
  return bytes.byteOffset === 0 && bytes.buffer.byteLength === bytes.byteLength && !(bytes.buffer instanceof SharedArrayBuffer) ? bytes : ownCopy(bytes);
}

/** A copy of `bytes` in memory of its own (allocUnsafeSlow never takes from the shared pool), so it can be transferred. */
function ownCopy(bytes: Buffer): Buffer {
  const copy = Buffer.allocUnsafeSlow(bytes.length);
  bytes.copy(copy);
  return copy;
}

/** Starts one thread: its answers settle their parses in `waiting`; when it dies, `gone` runs and its pending parses reject. */
function startThread(waiting: Map<number, Pending & { thread: Thread }>, gone: () => void, answered: () => void): Thread {
  const worker = new Worker(THREAD_SOURCE, { eval: true });
  const thread: Thread = { worker, busy: 0 };
  // Idle threads do not keep the process alive; a parse in progress holds its own promise.
  worker.unref();
  worker.on('message', (reply: Reply) => {
    const entry = waiting.get(reply.id);
    if (!entry) return;
    waiting.delete(reply.id);
    thread.busy--;
    answered();
    entry.resolve(resultOf(reply));
  });
  // A thread that dies (out of memory on a hostile body) fails its pending parses and is started again on the next use.
  const fail = (err: Error): void => {
    gone();
    for (const [id, entry] of waiting) {
      if (entry.thread !== thread) continue;
      waiting.delete(id);
      entry.reject(err);
    }
  };
  worker.on('error', fail);
  worker.on('exit', (code) => fail(new Error(`JSON thread exited with code ${code}`)));
  return thread;
}

/** The parse of a reply. */
function resultOf(reply: Reply): JsonParse {
  if (reply.refused === 'too-deep') return { refused: 'too-deep' };
  if (reply.refused === 'invalid') return { refused: 'invalid', message: reply.message ?? 'not JSON' };
  const value = reply.value as Record<string, unknown>;
  // A reply with raw fields always brings the bytes they lie in.
  const utf8 = reply.utf8!;
  for (const [name, start, end, kind] of reply.raw ?? []) value[name] = new RawJson(Buffer.from(utf8.buffer, utf8.byteOffset + start, end - start), kind);
  return { value };
}
