import { readdirSync, rmSync, statSync } from 'node:fs';
import { join } from 'node:path';
import type { FileStore } from '../store/file-store.js';

/**
 * Deletes local image files older than `maxAgeMs` under `dir` (the object store's folder): their
 * signed URLs have expired, so nothing can fetch them any more. Returns how many were deleted.
 * Empty folders are left in place (one per endpoint, reused).
 *
 * @example sweepExpiredFiles('data/files', 7 * 86_400_000, Date.now())
 */
export function sweepExpiredFiles(dir: string, maxAgeMs: number, now: number): number {
  let deleted = 0;
  let entries;
  try {
    entries = readdirSync(dir, { withFileTypes: true });
  } catch {
    return 0; // no folder yet: nothing stored
  }
  for (const entry of entries) {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) deleted += sweepExpiredFiles(path, maxAgeMs, now);
    else if (entry.isFile() && now - statSync(path).mtimeMs > maxAgeMs) {
      rmSync(path, { force: true });
      deleted++;
    }
  }
  return deleted;
}

/** Runs the sweep every `everyMs` (default hourly) until the returned function is called. */
export function startFileSweeper(dir: string, maxAgeMs: number, onSwept: (deleted: number) => void, everyMs = 3_600_000): () => void {
  const timer = setInterval(() => {
    const deleted = sweepExpiredFiles(dir, maxAgeMs, Date.now());
    if (deleted > 0) onSwept(deleted);
  }, everyMs);
  timer.unref();
  return () => clearInterval(timer);
}

/** Files deleted from the database in one statement; a sweep repeats it until fewer go. */
const SWEEP_BATCH = 1_000;

/**
 * Deletes the files kept in the database that were stored before `before`, SWEEP_BATCH at a
 * time until none is left. Returns how many were deleted.
 *
 * @example await sweepStoredFiles(store, Date.now() - 7 * 86_400_000)
 */
export async function sweepStoredFiles(files: Pick<FileStore, 'deleteFilesBefore'>, before: number): Promise<number> {
  let deleted = 0;
  for (let n = SWEEP_BATCH; n === SWEEP_BATCH; deleted += n) n = await files.deleteFilesBefore({ before, limit: SWEEP_BATCH });
  return deleted;
}

/**
 * The same retention for the files kept in the database (gateways sharing PostgreSQL without
 * S3): every `everyMs` (default hourly) the files stored more than `maxAgeMs` ago are deleted,
 * a batch at a time. Every gateway runs it; a file is deleted once whichever runs first.
 * Returns the function that stops it.
 *
 * @example const stop = startStoredFileSweeper(store, 7 * 86_400_000, (n) => log.info({ n }), (err) => log.error({ err }), Date.now);
 */
export function startStoredFileSweeper(
  files: Pick<FileStore, 'deleteFilesBefore'>,
  maxAgeMs: number,
  onSwept: (deleted: number) => void,
  onError: (err: unknown) => void,
  now: () => number,
  everyMs = 3_600_000,
): () => void {
  let running = false;
  const sweep = async (): Promise<void> => {
    const deleted = await sweepStoredFiles(files, now() - maxAgeMs);
    if (deleted > 0) onSwept(deleted);
  };
  const timer = setInterval(() => {
    if (running) return;
    running = true;
    sweep().then(
      () => (running = false),
      (err: unknown) => {
        running = false;
        onError(err);
      },
    );
  }, everyMs);
  timer.unref();
  return () => clearInterval(timer);
}
