import type { LogLine, LogStream } from '../jobs/pool-view.js';
import type { WorkerLogFeed } from './log-writer.js';

/** Lines longer than this are cut (a worker printing a huge blob must not hold megabytes here). */
const MAX_LINE_CHARS = 4_000;

/** A pool worker's log ring (createWorkerLog). */
export interface WorkerLog {
  /** Appends a chunk of the worker's output; complete lines are kept, `\r\n` counts as one end. */
  write(stream: 'stdout' | 'stderr', chunk: string): void;
  /** A line of Gantry's own about this worker (started, exited, stopping). */
  note(line: string): void;
  /** Keeps any unfinished line (the process ended without a final newline). */
  flush(): void;
  /** The last `n` lines (all kept lines when n is larger; all when n is left out), oldest first. */
  tail(n?: number): LogLine[];
  /** The worker is gone for good: its feed to the store is ended (a last note of dropped lines). */
  end(): void;
}

/**
 * The last `capacity` lines a pool worker printed, across its restarts: a ring buffer, so a
 * chatty worker costs a bounded amount of memory. Output arrives in arbitrary chunks; a
 * partial line is held per stream until its newline (or `flush`, when the process ended).
 * Every complete line also goes to `feed`, the store's log writer (log-writer.ts); the ring
 * is what the pool quotes in a crash reason.
 *
 * @example
 * const log = createWorkerLog(100);
 * log.write('stderr', 'boom: missing model\n');
 * log.tail(1); // [{ at, stream: 'stderr', line: 'boom: missing model' }]
 */
export function createWorkerLog(capacity = 500, now: () => number = Date.now, feed?: WorkerLogFeed): WorkerLog {
  if (!Number.isInteger(capacity) || capacity < 1) throw new RangeError(`capacity must be a positive integer, got ${capacity}`);
  const ring: LogLine[] = [];
  let next = 0; // where the next line goes once the ring is full
  const partial: Record<'stdout' | 'stderr', string> = { stdout: '', stderr: '' };

  function push(stream: LogStream, line: string): void {
    const entry = { at: now(), stream, line: line.length > MAX_LINE_CHARS ? `${line.slice(0, MAX_LINE_CHARS)}…` : line };
    feed?.line(stream, entry.line, entry.at);
    if (ring.length < capacity) ring.push(entry);
    else {
      ring[next] = entry;
      next = (next + 1) % capacity;
    }
  }

  return {
    write(stream: 'stdout' | 'stderr', chunk: string): void {
      const text = partial[stream] + chunk;
      const lines = text.split('\n');
      partial[stream] = lines.pop() ?? '';
      if (partial[stream].length > MAX_LINE_CHARS) {
        lines.push(partial[stream]);
        partial[stream] = '';
      }
      for (const line of lines) push(stream, line.endsWith('\r') ? line.slice(0, -1) : line);
    },
    note(line: string): void {
      push('gantry', line);
    },
    flush(): void {
      for (const stream of ['stdout', 'stderr'] as const) {
        if (partial[stream] !== '') push(stream, partial[stream]);
        partial[stream] = '';
      }
    },
    tail(n = capacity): LogLine[] {
      const ordered = ring.length < capacity ? ring : [...ring.slice(next), ...ring.slice(0, next)];
      return n >= ordered.length ? [...ordered] : ordered.slice(ordered.length - Math.max(0, n));
    },
    end(): void {
      feed?.end();
    },
  };
}
