import { mkdirSync } from 'node:fs';
import { open, readdir, readFile, rm, stat } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import { RawJson, type JsonTextOrBytes } from '../../model/json.js';

/**
 * Large job inputs on SQLite, kept as files beside the database instead of in `job_inputs`
 * (issue 22, item 3; docs/benchmarks.md "Big bodies"). better-sqlite3 is synchronous: a 19 MB input
 * bound at insert, written to the WAL at commit and read back page by page at the claim held the
 * event loop 100–150 ms each, so every other request waited behind every big one. A file is
 * written and read by libuv's thread pool, and the event loop holds none of it.
 *
 * An input of at least INPUT_FILE_MIN_CHARS characters is written to `job-inputs/<job id>.json`
 * before its job's rows are inserted, and its `job_inputs` row holds the empty string
 * (INPUT_IN_FILE, never a JSON text), so the row commits only once the file is whole. Nothing
 * deletes a file when its job goes (expiry, purge, endpoint deletion: the rows cascade); the
 * sweep does, for files whose row is gone, so there is one deleter and no job loses its input to
 * a race. A file being written is never swept (the ids in flight are known, and a file younger
 * than SWEEP_MIN_AGE_MS is left alone). `gantry backup` puts each file's text into the copy's row,
 * so a backup is one self-contained file (backup.ts).
 *
 * PostgreSQL keeps every input in its table: its writes do not hold the event loop, and several
 * gateways must all read them.
 */
export interface InputFiles {
  /** Whether the input of job `id` goes to a file: large enough, and an id that is a plain file name. */
  wanted(id: string, inputJson: JsonTextOrBytes): boolean;
  /**
   * Writes the input of job `id` (a RawJson's bytes as they are, in one write; a string encoded
   * a piece at a time); until `settled(id)`, the sweep leaves it alone.
   */
  write(id: string, inputJson: JsonTextOrBytes): Promise<void>;
  /** The insert of job `id` ended (committed or not); `keep: false` deletes the file at once. */
  settled(id: string, keep: boolean): Promise<void>;
  /** The input of job `id`, from its file: its UTF-8 bytes. */
  read(id: string): Promise<Buffer>;
  /** Deletes the files whose job no longer holds its input in a file (`inFile(id)` false); the count deleted. */
  sweep(inFile: (id: string) => boolean): Promise<number>;
}

/**
 * Inputs of this many characters (UTF-8 bytes for a RawJson) or more go to a file (1 MiB: the
 * per-job cost of a file is ~50 µs).
 */
export const INPUT_FILE_MIN_CHARS = 1 << 20;
/** What `job_inputs.input_json` holds for an input kept in a file: no JSON text is empty. */
export const INPUT_IN_FILE = '';
/**
 * A file is written this many characters at a time: each piece is encoded on the event loop
 * (~1 ms), and other requests run between two pieces instead of waiting for all of them.
 */
const WRITE_PIECE_CHARS = 1 << 20;
/** How often the gateway sweeps the folder. */
export const SWEEP_EVERY_MS = 60_000;
/** A file younger than this is never swept, whatever its row says (a write whose row is a moment away). */
export const SWEEP_MIN_AGE_MS = 60_000;
/** Job ids the gateway makes (uuidv7, `sync-` + uuidv7): any other id keeps its input in the table, so no name can leave the folder. */
const FILE_ID = /^[A-Za-z0-9-]{1,64}$/;
/** Files looked at per sweep at most: one sweep's work is bounded however many inputs wait. */
const SWEEP_MAX_FILES = 10_000;

/** The folder of the input files of the database `file`. */
export function inputFilesDirOf(file: string): string {
  return join(dirname(file), 'job-inputs');
}

/** Input files in `dir` (created now, when missing). */
export function createInputFiles(dir: string, now: () => number = Date.now): InputFiles {
  mkdirSync(dir, { recursive: true });
  const inFlight = new Set<string>();
  const pathOf = (id: string): string => join(dir, `${id}.json`);
  return {
    wanted: (id, inputJson) => (inputJson instanceof RawJson ? inputJson.bytes : typeof inputJson === 'string' ? inputJson.length : 0) >= INPUT_FILE_MIN_CHARS && FILE_ID.test(id),
    async write(id, inputJson) {
      inFlight.add(id);
      try {
        if (inputJson instanceof RawJson) await writeWhole(pathOf(id), inputJson.utf8);
        else await writeInPieces(pathOf(id), inputJson);
      } catch (err) {
        inFlight.delete(id);
        await rm(pathOf(id), { force: true });
        throw err;
      }
    },
    async settled(id, keep) {
      inFlight.delete(id);
      if (!keep) await rm(pathOf(id), { force: true });
    },
    read: (id) => readFile(pathOf(id)),
    async sweep(inFile) {
      let deleted = 0;
      // Past SWEEP_MAX_FILES, a window from a random place: every file is met in some sweep.
      const all = await readdir(dir);
      const from = Math.floor(Math.random() * all.length);
      const names = all.length <= SWEEP_MAX_FILES ? all : all.slice(from, from + SWEEP_MAX_FILES).concat(all.slice(0, Math.max(0, from + SWEEP_MAX_FILES - all.length)));
      for (const name of names) {
        if (!name.endsWith('.json')) continue;
        const id = name.slice(0, -'.json'.length);
        if (!FILE_ID.test(id) || inFlight.has(id) || inFile(id)) continue;
        const path = join(dir, name);
        const info = await stat(path).catch(() => undefined);
        if (!info || now() - info.mtimeMs < SWEEP_MIN_AGE_MS || inFlight.has(id) || inFile(id)) continue;
        await rm(path, { force: true });
        deleted += 1;
      }
      return deleted;
    },
  };
}

/** Writes `text` as UTF-8 to a new file at `path`, WRITE_PIECE_CHARS at a time. */
async function writeInPieces(path: string, text: string): Promise<void> {
  const file = await open(path, 'w');
  try {
    for (let at = 0; at < text.length; ) {
      let end = Math.min(at + WRITE_PIECE_CHARS, text.length);
      // Never between the two halves of a surrogate pair: each piece is encoded on its own.
      if (end < text.length && isHighSurrogate(text.charCodeAt(end - 1))) end -= 1;
      await file.write(text.slice(at, end), null, 'utf8');
      at = end;
    }
  } finally {
    await file.close();
  }
}

/**
 * Writes `bytes` to a new file at `path` in as few writes as the kernel takes (one, for a file):
 * nothing to encode on the event loop, and one trip through libuv's pool instead of the 512 kB
 * pieces of fs.writeFile.
 */
async function writeWhole(path: string, bytes: Buffer): Promise<void> {
  const file = await open(path, 'w');
  try {
    for (let at = 0; at < bytes.length; ) at += (await file.write(bytes, at, bytes.length - at)).bytesWritten;
  } finally {
    await file.close();
  }
}

function isHighSurrogate(code: number): boolean {
  return code >= 0xd800 && code <= 0xdbff;
}
