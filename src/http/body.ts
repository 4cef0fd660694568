import type { IncomingMessage } from 'node:http';
import { AppError } from '../errors.js';

export const MB = 1_000_000;

/**
 * Reads a request body of at most `limit` bytes and parses it as JSON, whatever the
 * Content-Type: runpod-python posts JSON as application/x-www-form-urlencoded. An empty body is
 * `{}` (clients POST cancel/purge-queue with a JSON content type and no body).
 * Too large → 413 (without reading the rest); not JSON → 400.
 */
export async function readJsonBody(req: IncomingMessage, limit: number): Promise<unknown> {
  const declared = Number(req.headers['content-length']);
  if (declared > limit) throw tooLarge(limit);
  const { chunks, size } = await new Promise<{ chunks: Buffer[]; size: number }>((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    const onData = (chunk: Buffer): void => {
      size += chunk.length;
      if (size > limit) {
        req.off('data', onData);
        req.pause();
        reject(tooLarge(limit));
        return;
      }
      chunks.push(chunk);
    };
    req.on('data', onData);
    req.once('end', () => resolve({ chunks, size }));
    req.once('error', reject);
    req.once('close', () => {
      if (!req.complete) reject(new AppError(400, 'INCOMPLETE_BODY', 'The request body ended early'));
    });
  });
  if (size === 0) return {};
  const text = chunks.length === 1 ? chunks[0]!.toString('utf8') : Buffer.concat(chunks, size).toString('utf8');
  if (text.trim() === '') return {};
  try {
    return JSON.parse(text) as unknown;
  } catch (err) {
    throw new AppError(400, 'INVALID_JSON', `Malformed JSON body: ${(err as Error).message}`);
  }
}

function tooLarge(limit: number): AppError {
  // The rest of the body is not read: close the connection after answering.
  return new AppError(413, 'PAYLOAD_TOO_LARGE', `Request body is larger than ${limit / MB} MB`, undefined, { connection: 'close' });
}
