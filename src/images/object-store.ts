import { createHmac, timingSafeEqual } from 'node:crypto';
import { mkdir, rename, writeFile } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import type { S3Settings } from '../config/image-config.js';
import { presignGet, putObject } from './s3.js';

/**
 * Where generated images go: the gateway's local folder (`<dataDir>/files`, served at
 * `/files/<key>?expires=&sig=` with an HMAC signature), the database of gateways sharing
 * PostgreSQL (uploaded through the gateway, served at the same signed `/files` URL by every
 * gateway), or an S3-compatible bucket (presigned GET URL). Each returns a URL that works for
 * `ttlSeconds` (default 7 days).
 */
export interface ObjectStore {
  /** Stores `body` under `key` and returns a URL to fetch it. */
  put(key: string, body: Uint8Array, contentType: string): Promise<string>;
}

/** Object keys: path segments of letters, digits, `.`, `_`, `-` (no `..`, no empty segment). */
const KEY = /^(?:[A-Za-z0-9_-][A-Za-z0-9._-]*)(?:\/[A-Za-z0-9_-][A-Za-z0-9._-]*)*$/;

/** True for a safe object key: path segments of letters, digits, `.`, `_`, `-`, at most 512 characters. */
export function isValidObjectKey(key: string): boolean {
  return key.length <= 512 && KEY.test(key) && !key.split('/').some((s) => s === '..' || s === '.');
}

/** HMAC-SHA256 of `key` and its expiry (epoch seconds), base64url. */
export function fileSignature(signingKey: Buffer, key: string, expires: number): string {
  return createHmac('sha256', signingKey).update(`${key}\n${expires}`).digest('base64url');
}

/**
 * True when `sig` signs `key` until `expires` and that time has not passed.
 *
 * @example verifyFileSignature(k, 'a/b.png', '1900000000', fileSignature(k, 'a/b.png', 1900000000), Date.now())
 */
export function verifyFileSignature(signingKey: Buffer, key: string, expires: string | null, sig: string | null, now: number): boolean {
  if (expires === null || sig === null || !/^\d{1,12}$/.test(expires)) return false;
  const at = Number(expires);
  if (at * 1000 < now) return false;
  const expected = Buffer.from(fileSignature(signingKey, key, at));
  const given = Buffer.from(sig);
  return expected.length === given.length && timingSafeEqual(expected, given);
}

/** The key that signs file URLs, derived from the gateway's secret key (never the key itself). */
export function deriveFileSigningKey(secretKey: Buffer): Buffer {
  return createHmac('sha256', secretKey).update('gantry/files/v1').digest();
}

/**
 * The gateway's local folder. `baseUrl` is how clients reach the gateway (GANTRY_PUBLIC_URL).
 *
 * @example createLocalObjectStore({ dir: 'data/files', baseUrl: 'http://127.0.0.1:8080', signingKey, ttlSeconds: 604800 })
 */
export function createLocalObjectStore(options: { dir: string; baseUrl: string; signingKey: Buffer; ttlSeconds: number; now?: () => number }): ObjectStore {
  const now = options.now ?? Date.now;
  return {
    async put(key, body) {
      if (!isValidObjectKey(key)) throw new Error(`invalid object key ${JSON.stringify(key)}`);
      const file = join(options.dir, ...key.split('/'));
      await mkdir(dirname(file), { recursive: true });
      const tmp = `${file}.tmp-${process.pid}`;
      await writeFile(tmp, body);
      await rename(tmp, file); // readers never see half a file
      return signedFileUrl(options, key, now());
    },
  };
}

/** The signed `/files` URL of `key`, valid `ttlSeconds` from `now`. */
function signedFileUrl(o: { baseUrl: string; signingKey: Buffer; ttlSeconds: number }, key: string, now: number): string {
  const expires = Math.floor(now / 1000) + o.ttlSeconds;
  const path = key.split('/').map(encodeURIComponent).join('/');
  return `${o.baseUrl}/files/${path}?expires=${expires}&sig=${fileSignature(o.signingKey, key, expires)}`;
}

/** What the gateway store needs: where to upload, with which key, and how to sign the URL. */
export interface GatewayObjectStoreOptions {
  /** `<gateway>/v2/<endpoint>/files`: the upload route (src/images/file-upload-route.ts). */
  uploadUrl: string;
  /** The endpoint the worker serves: its files' keys begin with it. */
  endpointId: string;
  /** The worker's own API key (RUNPOD_AI_API_KEY). */
  workerKey: string;
  baseUrl: string;
  signingKey: Buffer;
  ttlSeconds: number;
  now?: () => number;
  transport?: typeof fetch;
  /** Tries of one upload, a second apart, while the gateway answers 429/5xx or cannot be reached (default 3). */
  attempts?: number;
}

/**
 * The database of gateways sharing PostgreSQL, reached through the gateway that runs the worker:
 * `PUT <uploadUrl>/<name>` with `{contentType, data}` (base64) and the worker's key. The URL
 * is signed like the local store's; any gateway of the deployment serves it.
 *
 * @example createGatewayObjectStore({ uploadUrl: 'http://127.0.0.1:8080/v2/image-fast/files', endpointId: 'image-fast', workerKey, baseUrl, signingKey, ttlSeconds: 604800 })
 */
export function createGatewayObjectStore(options: GatewayObjectStoreOptions): ObjectStore {
  const now = options.now ?? Date.now;
  const transport = options.transport ?? fetch;
  const prefix = `${options.endpointId}/`;
  return {
    async put(key, body, contentType) {
      if (!isValidObjectKey(key) || !key.startsWith(prefix)) throw new Error(`invalid object key ${JSON.stringify(key)} for endpoint ${options.endpointId}`);
      const name = key.slice(prefix.length).split('/').map(encodeURIComponent).join('/');
      const request = { method: 'PUT', headers: { authorization: `Bearer ${options.workerKey}`, 'content-type': 'application/json' }, body: JSON.stringify({ contentType, data: Buffer.from(body).toString('base64') }) };
      await uploadWithRetries(() => transport(`${options.uploadUrl}/${name}`, request), options.attempts ?? 3);
      return signedFileUrl(options, key, now());
    },
  };
}

/** Sends an upload until it is taken; 429, 5xx and unreachable gateways are tried again a second later. */
async function uploadWithRetries(send: () => Promise<Response>, attempts: number): Promise<void> {
  for (let attempt = 1; ; attempt++) {
    let failure: string;
    try {
      const res = await send();
      if (res.ok) {
        await res.arrayBuffer();
        return;
      }
      failure = `${res.status} ${(await res.text()).slice(0, 300)}`;
      if (res.status !== 429 && res.status < 500) throw new Error(`image upload refused: ${failure}`);
    } catch (err) {
      if (err instanceof Error && err.message.startsWith('image upload refused')) throw err;
      failure = err instanceof Error ? err.message : String(err);
    }
    if (attempt >= attempts) throw new Error(`image upload failed after ${attempts} tries: ${failure}`);
    await new Promise((resolve) => setTimeout(resolve, 1_000));
  }
}

/** An S3-compatible bucket; the URL is a presigned GET. */
export function createS3ObjectStore(s3: S3Settings, ttlSeconds: number, transport: typeof fetch = fetch): ObjectStore {
  return {
    async put(key, body, contentType) {
      if (!isValidObjectKey(key)) throw new Error(`invalid object key ${JSON.stringify(key)}`);
      await putObject(s3, key, body, contentType, new Date(), transport);
      return presignGet(s3, key, ttlSeconds);
    },
  };
}
