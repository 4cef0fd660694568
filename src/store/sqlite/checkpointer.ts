import { createRequire } from 'node:module';
import { Worker } from 'node:worker_threads';

/**
 * Moves WAL checkpoints off the event loop. SQLite's automatic checkpoint runs inside whichever
 * COMMIT crosses the threshold, fsyncs included, so one unlucky request pays for it (runsync p99
 * went from ~8 ms to ~4.5 ms without it, docs/benchmarks.md). Instead the gateway's connection
 * sets `wal_autocheckpoint = 0` and this worker thread, on its own connection, runs a PASSIVE
 * checkpoint every `intervalMs`: it never blocks writers, and once it has copied every frame the
 * next writer starts the WAL over from its beginning, so the file stays small.
 */
export interface Checkpointer {
  stop(): Promise<void>;
}

const WORKER_SOURCE = `
const { workerData, parentPort } = require('node:worker_threads');
const Database = require(workerData.driver);
const db = new Database(workerData.file);
db.pragma('busy_timeout = 1000');
const timer = setInterval(() => {
  try { db.pragma('wal_checkpoint(PASSIVE)'); } catch (err) { parentPort.postMessage(String(err && err.message || err)); }
}, workerData.intervalMs);
parentPort.on('message', () => { clearInterval(timer); db.close(); parentPort.close(); });
`;

export function startCheckpointer(file: string, intervalMs = 50, onError: (message: string) => void = () => {}): Checkpointer {
  const driver = createRequire(import.meta.url).resolve('better-sqlite3');
  const worker = new Worker(WORKER_SOURCE, { eval: true, workerData: { file, intervalMs, driver } });
  worker.on('message', (message: string) => onError(message));
  worker.on('error', (err) => onError(err.message));
  worker.unref();
  let stopping: Promise<void> | undefined;
  return {
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
