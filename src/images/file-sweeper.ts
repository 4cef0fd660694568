import { readdirSync, rmSync, statSync } from 'node:fs';
import { join } from 'node:path';

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
