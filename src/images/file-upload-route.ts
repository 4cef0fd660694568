import type { Logger } from 'pino';
import { sendJson } from '../http/respond.js';
import type { Route } from '../http/route-table.js';
import { invalidBody, invalidParameter } from '../model/errors.js';
import type { FileStore } from '../store/file-store.js';
import { isValidObjectKey } from './object-store.js';

/** The largest upload body: a 1536² PNG that did not compress, in base64, with room to spare. */
export const FILE_UPLOAD_LIMIT = 16 * 1024 * 1024;

/** The types a file may be stored as, by the extension its name must have. */
const EXTENSIONS: Record<string, readonly string[]> = { 'image/png': ['.png'], 'image/jpeg': ['.jpeg', '.jpg'] };
const BASE64 = /^[A-Za-z0-9+/]*={0,2}$/;

/** What the upload route writes to and how far the files may grow. */
export interface FileUploadDeps {
  files: Pick<FileStore, 'putFile'>;
  /** GANTRY_IMAGE_FILES_MAX_BYTES: all files together; the oldest are deleted past it. */
  maxBytes: number;
  logger: Logger;
  now(): number;
}

/**
 * `PUT /v2/{endpoint}/files/<name>` with a worker key of the endpoint: an image worker stores a
 * file in the database where gateways share PostgreSQL without S3 (docs/postgres.md, "Files"),
 * under the key `<endpoint>/<name>`, so any gateway serves it at its signed /files URL and it
 * outlives the gateway that took it. Body `{"contentType": "image/png" | "image/jpeg", "data":
 * base64}`, at most FILE_UPLOAD_LIMIT; the name's extension must match the type. Answers
 * `{key, size}`. A worker key can write only under its own endpoint's names, and all files
 * together are bounded by `maxBytes`.
 *
 * @example routes.add(createFileUploadRoute({ files: store, maxBytes: 1e9, logger, now: Date.now }));
 */
export function createFileUploadRoute(deps: FileUploadDeps): Route {
  return {
    // A files route (not the worker protocol): it exists only where gateways share PostgreSQL without S3.
    family: 'files',
    method: 'PUT',
    path: '/v2/{endpoint}/files/{*rest}',
    auth: 'worker',
    needsEndpoint: true,
    bodyLimit: FILE_UPLOAD_LIMIT,
    async handle({ res, params, body, endpointId }) {
      const key = `${endpointId}/${params.rest!.join('/')}`;
      if (!isValidObjectKey(key)) throw invalidParameter('name', 'must be path segments of letters, digits, ".", "_" and "-"');
      const { contentType, bytes } = parseUpload(body, key);
      const { evicted } = await deps.files.putFile({ key, contentType, body: bytes, now: deps.now(), maxBytes: deps.maxBytes });
      if (evicted > 0) deps.logger.warn({ endpointId, evicted }, 'image files deleted before their links expired: GANTRY_IMAGE_FILES_MAX_BYTES reached');
      sendJson(res, 200, { key, size: bytes.byteLength });
    },
  };
}

/** The upload's type and bytes; 400 naming the field otherwise. */
function parseUpload(body: unknown, key: string): { contentType: string; bytes: Buffer } {
  if (typeof body !== 'object' || body === null || Array.isArray(body)) throw invalidBody('a JSON object {"contentType", "data"}');
  for (const field of Object.keys(body)) if (field !== 'contentType' && field !== 'data') throw invalidParameter(field, 'is not a field of a file upload');
  const { contentType, data } = body as { contentType?: unknown; data?: unknown };
  const extensions = typeof contentType === 'string' ? EXTENSIONS[contentType] : undefined;
  if (!extensions) throw invalidParameter('contentType', 'must be image/png or image/jpeg');
  if (!extensions.some((ext) => key.toLowerCase().endsWith(ext))) throw invalidParameter('name', `must end with ${extensions.join(' or ')} for ${contentType as string}`);
  if (typeof data !== 'string' || data.length === 0 || data.length % 4 !== 0 || !BASE64.test(data)) throw invalidParameter('data', 'must be the file in base64');
  return { contentType: contentType as string, bytes: Buffer.from(data, 'base64') };
}
