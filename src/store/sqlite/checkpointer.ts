import { createRequire } from 'node:module';
import { Worker } from 'node:worker_threads';

/**
 * Moves WAL checkpoints off the event loop. SQLite's automatic checkpoint runs inside whichever
 * COMMIT crosses the threshold, fsyncs included, so one unlucky request pays for it (runsync p99
 * went from ~8 ms to ~4.5 ms without it, docs/benchmarks.md). Instead the gateway's connection
 * sets `wal_autocheckpoint = 0` and this worker thread, on its own connection, runs a PASSIVE
 * checkpoint every `intervalMs`: it never blocks writers, and once it has copied every frame the
 * next writer starts the WAL over from its beginning.
 *
 * Under sustained writes that moment never comes: each new transaction finds frames not yet
 * copied, the WAL never restarts and grows without bound (issue 15: 362 MB after a 300k drain).
 * So when the WAL file is larger than `walLimitBytes` after the PASSIVE step, the thread runs a
 * TRUNCATE checkpoint: it takes the write lock only for the few frames written since the PASSIVE
 * copy (and an fsync), then empties the file. Below the limit nothing blocks a writer.
 */
export interface Checkpointer {
  /** One checkpoint step now, on the thread (PASSIVE, then TRUNCATE past the limit); what it did. */
  runNow(): Promise<CheckpointStep>;
  stop(): Promise<void>;
}

/** What one checkpoint step did. */
export interface CheckpointStep {
  /** TRUNCATE when the WAL was past the limit after the PASSIVE copy. */
  mode: 'PASSIVE' | 'TRUNCATE';
  /** SQLite could not finish the checkpoint (a writer or reader was in the way); retried next step. */
  busy: boolean;
  /** Size of the WAL file after the step. */
  walBytes: number;
}

/** How the checkpoint thread runs. */
export interface CheckpointerOptions {
  /** Time between steps; 0: only on runNow (tests). Default 50 ms. */
  intervalMs?: number;
  /** WAL size past which a step truncates the WAL. Default DEFAULT_WAL_LIMIT_BYTES. */
  walLimitBytes?: number;
  /** Hears what a checkpoint or the thread reports (nothing by default: a failed step is retried). */
  onError?: (message: string) => void;
}

/** The WAL size past which the checkpointer truncates it (and the connection's journal_size_limit). */
export const DEFAULT_WAL_LIMIT_BYTES = 32 * 1024 * 1024;

const WORKER_SOURCE = `
const { workerData, parentPort } = require('node:worker_threads');
const { statSync } = require('node:fs');
const Database = require(workerData.driver);
const db = new Database(workerData.file);
db.pragma('busy_timeout = 1000');
const walSize = () => { try { return statSync(workerData.file + '-wal').size; } catch { return 0; } };
function step() {
  const passive = db.pragma('wal_checkpoint(PASSIVE)')[0];
  if (walSize() <= workerData.walLimitBytes) return { mode: 'PASSIVE', busy: passive.busy === 1, walBytes: walSize() };
  const truncate = db.pragma('wal_checkpoint(TRUNCATE)')[0];
  return { mode: 'TRUNCATE', busy: truncate.busy === 1, walBytes: walSize() };
}
const timer = workerData.intervalMs > 0 ? setInterval(() => {
  try { step(); } catch (err) { parentPort.postMessage({ error: String(err && err.message || err) }); }
}, workerData.intervalMs) : undefined;
parentPort.on('message', (message) => {
  if (message.run !== undefined) {
    try { parentPort.postMessage({ run: message.run, step: step() }); }
    catch (err) { parentPort.postMessage({ run: message.run, error: String(err && err.message || err) }); }
    return;
  }
  clearInterval(timer); db.close(); parentPort.close();
});
`;

interface ThreadMessage {
  run?: number;
  step?: CheckpointStep;
  error?: string;
}

/**
 * Starts the checkpoint thread on `file` (see Checkpointer).
 *
 * @example const checkpointer = startCheckpointer('data/gantry.db'); await checkpointer.stop();
 */
export function startCheckpointer(file: string, options: CheckpointerOptions = {}): Checkpointer {
  const { intervalMs = 50, walLimitBytes = DEFAULT_WAL_LIMIT_BYTES, onError = () => {} } = options;
  const driver = createRequire(import.meta.url).resolve('better-sqlite3');
  const worker = new Worker(WORKER_SOURCE, { eval: true, workerData: { file, intervalMs, walLimitBytes, driver } });
  const runs = new Map<number, { resolve: (step: CheckpointStep) => void; reject: (err: Error) => void }>();
  let nextRun = 0;
  worker.on('message', (message: ThreadMessage) => {
    const run = message.run === undefined ? undefined : runs.get(message.run);
    if (message.run !== undefined) runs.delete(message.run);
    if (run && message.step) run.resolve(message.step);
    else if (run) run.reject(new Error(message.error ?? 'checkpoint failed'));
    else if (message.error !== undefined) onError(message.error);
  });
  worker.on('error', (err) => onError(err.message));
  worker.unref();
  let stopping: Promise<void> | undefined;
  return {
    runNow() {
      const run = ++nextRun;
      return new Promise<CheckpointStep>((resolve, reject) => {
        runs.set(run, { resolve, reject });
        worker.postMessage({ run });
      });
    },
    stop() {
      stopping ??= new Promise<void>((resolve) => {
        // Referenced again while stopping: otherwise a process with nothing else to do could
        // exit before the thread's 'exit' event settles this promise.
        worker.ref();
        worker.once('exit', () => resolve());
        worker.postMessage('stop');
      });
      return stopping;
    },
  };
}
