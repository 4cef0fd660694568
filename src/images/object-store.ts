import { createHmac, timingSafeEqual } from 'node:crypto';
import { mkdir, rename, writeFile } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import type { S3Settings } from '../config/image-config.js';
import { presignGet, putObject } from './s3.js';

/**
 * Where generated images go: the gateway's local folder (`<dataDir>/files`, served at
 * `/files/<key>?expires=&sig=` with an HMAC signature) or an S3-compatible bucket (presigned
 * GET URL). Both return a URL that works for `ttlSeconds` (default 7 days).
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
      const expires = Math.floor(now() / 1000) + options.ttlSeconds;
      const path = key.split('/').map(encodeURIComponent).join('/');
      return `${options.baseUrl}/files/${path}?expires=${expires}&sig=${fileSignature(options.signingKey, key, expires)}`;
    },
  };
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
