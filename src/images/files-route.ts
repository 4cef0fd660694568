import { open, type FileHandle } from 'node:fs/promises';
import { extname, join } from 'node:path';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { AppError } from '../model/errors.js';
import type { Route } from '../http/route-table.js';
import type { FileStore, StoredFile } from '../store/file-store.js';
import { isValidObjectKey, verifyFileSignature } from './object-store.js';

const TYPES = new Map([
  ['.jpeg', 'image/jpeg'],
  ['.jpg', 'image/jpeg'],
  ['.png', 'image/png'],
]);

/** Bytes of a file read from the database at a time: what one download holds in memory. */
const SLICE_BYTES = 1 << 20;

/** Where the files served at /files are: the local folder, and (gateways sharing PostgreSQL) the database first. */
export interface FileSource {
  dir: string;
  signingKey: Buffer;
  now(): number;
  /** The files kept in the database (PostgreSQL without S3, docs/postgres.md); read before `dir`, which keeps files stored before. */
  stored?: Pick<FileStore, 'fileInfo' | 'readFile'>;
}

/**
 * `GET /files/<key>?expires=&sig=`: a file of the local object store or of the database, only
 * with a valid, unexpired signature (src/images/object-store.ts). 403 otherwise, 404 when gone.
 * No key: the signature is the credential (a fault is logged with the path, never the query).
 *
 * @example routes.add(createFileRoute({ dir: 'data/files', signingKey, now: Date.now }));
 */
export function createFileRoute(files: FileSource): Route {
  return {
    family: 'files',
    method: ['GET', 'HEAD'],
    path: '/files/{*rest}',
    auth: 'public',
    handle: ({ req, res, params, query }) => serveFile(files, req, res, params.rest!, query),
  };
}

async function serveFile(
  files: FileSource,
  req: IncomingMessage,
  res: ServerResponse,
  keySegments: string[],
  query: URLSearchParams,
): Promise<void> {
  const now = files.now();
  const method = req.method ?? 'GET';
  const key = keySegments.join('/');
  if (!isValidObjectKey(key)) throw new AppError('NOT_FOUND', 'No such file');
  if (!verifyFileSignature(files.signingKey, key, query.get('expires'), query.get('sig'), now)) {
    throw new AppError('FORBIDDEN', 'Invalid or expired file signature');
  }
  const stored = files.stored ? await files.stored.fileInfo(key) : undefined;
  if (stored) return serveStored(files.stored!, key, stored, method, res);
  const file = join(files.dir, ...keySegments);
  // Opened before anything is answered: a directory, or a file gone since it was signed, is a
  // 404; once open, the file can be deleted without cutting the answer short.
  const handle = await openRegularFile(file);
  if (!handle) throw new AppError('NOT_FOUND', 'No such file');
  res.writeHead(200, {
    'content-type': TYPES.get(extname(file).toLowerCase()) ?? 'application/octet-stream',
    'content-length': handle.size,
    'cache-control': 'private, max-age=3600',
  });
  if (method === 'HEAD') {
    await handle.fh.close();
    res.end();
    return;
  }
  // A read error once the answer has begun (an I/O error, a file that cannot be read) cuts the
  // connection, and is a fault: rejected, the listener logs it as `request failed` with the route and
  // the path (logs never carry a query, where `sig` is).
  await new Promise<void>((resolve, reject) => {
    const stream = handle.fh.createReadStream();
    stream.once('error', (err) => {
      res.destroy();
      reject(err);
    });
    res.once('close', () => {
      stream.destroy();
      resolve();
    });
    stream.pipe(res);
  });
}

/** The open file and its size; undefined when it does not exist or is not a regular file. */
async function openRegularFile(file: string): Promise<{ fh: FileHandle; size: number } | undefined> {
  let fh: FileHandle;
  try {
    fh = await open(file, 'r');
  } catch {
    return undefined;
  }
  try {
    const s = await fh.stat();
    if (s.isFile()) return { fh, size: s.size };
  } catch {
    // fall through: closed below
  }
  await fh.close();
  return undefined;
}

/**
 * A file kept in the database, a slice at a time (SLICE_BYTES), each slice written once the
 * last one drained. A file deleted or replaced while it is sent cuts the connection (the length
 * promised can no longer be kept).
 */
async function serveStored(files: Pick<FileStore, 'readFile'>, key: string, info: StoredFile, method: string, res: ServerResponse): Promise<void> {
  res.writeHead(200, {
    'content-type': TYPES.get(extname(key).toLowerCase()) ?? 'application/octet-stream',
    'content-length': info.size,
    'cache-control': 'private, max-age=3600',
  });
  if (method === 'HEAD') {
    res.end();
    return;
  }
  for (let offset = 0; offset < info.size && !res.destroyed; offset += SLICE_BYTES) {
    const part = await files.readFile({ key, createdAt: info.createdAt, offset, length: SLICE_BYTES });
    if (part === undefined || part.byteLength === 0) {
      res.destroy();
      return;
    }
    if (!res.write(part)) await new Promise<void>((resolve) => {
      const done = (): void => {
        res.off('drain', done);
        res.off('close', done);
        resolve();
      };
      res.once('drain', done);
      res.once('close', done);
    });
  }
  res.end();
}
