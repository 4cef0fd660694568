import { createReadStream } from 'node:fs';
import { stat } from 'node:fs/promises';
import { extname, join } from 'node:path';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { AppError } from '../errors.js';
import { isValidObjectKey, verifyFileSignature } from '../images/object-store.js';

const TYPES: Record<string, string> = { '.jpeg': 'image/jpeg', '.jpg': 'image/jpeg', '.png': 'image/png' };

/**
 * `GET /files/<key>?expires=&sig=`: a file of the local object store, only with a valid,
 * unexpired signature (src/images/object-store.ts). 403 otherwise, 404 when gone.
 */
export async function handleFileRoute(
  files: { dir: string; signingKey: Buffer },
  req: IncomingMessage,
  res: ServerResponse,
  keySegments: string[],
  query: URLSearchParams,
  now: number,
): Promise<void> {
  const method = req.method ?? 'GET';
  if (method !== 'GET' && method !== 'HEAD') throw new AppError(405, 'METHOD_NOT_ALLOWED', `${method} is not allowed on /files`, undefined, { allow: 'GET, HEAD' });
  const key = keySegments.join('/');
  if (!isValidObjectKey(key)) throw new AppError(404, 'NOT_FOUND', 'No such file');
  if (!verifyFileSignature(files.signingKey, key, query.get('expires'), query.get('sig'), now)) {
    throw new AppError(403, 'FORBIDDEN', 'Invalid or expired file signature');
  }
  const file = join(files.dir, ...keySegments);
  let size: number;
  try {
    size = (await stat(file)).size;
  } catch {
    throw new AppError(404, 'NOT_FOUND', 'No such file');
  }
  res.writeHead(200, {
    'content-type': TYPES[extname(file).toLowerCase()] ?? 'application/octet-stream',
    'content-length': size,
    'cache-control': 'private, max-age=3600',
  });
  if (method === 'HEAD') {
    res.end();
    return;
  }
  await new Promise<void>((resolve, reject) => {
    const stream = createReadStream(file);
    stream.once('error', reject);
    res.once('close', () => resolve());
    stream.pipe(res);
  });
}
