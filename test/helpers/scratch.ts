// Scratch folders for tests: made in the temp directory (the run's folder, see
// global-processes.ts) and removed when the test process ends, whatever the test did.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

const made: string[] = [];

/** A new empty folder `gantry-<label>-XXXXXX`, removed when this test process exits. */
export function scratchDir(label = 'test'): string {
  const dir = mkdtempSync(join(tmpdir(), `gantry-${label}-`));
  made.push(dir);
  return dir;
}

process.on('exit', () => {
  for (const dir of made) rmSync(dir, { recursive: true, force: true });
});
