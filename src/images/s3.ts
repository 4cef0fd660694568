import { createHash, createHmac } from 'node:crypto';
import type { S3Settings } from '../config/image-config.js';

/**
 * A small AWS Signature V4 client for S3-compatible stores (AWS, MinIO, R2, s3rver): a signed
 * PUT of one object and a presigned GET URL. Path-style addressing (`endpoint/bucket/key`),
 * which every S3-compatible server accepts.
 */

function sha256Hex(data: string | Uint8Array): string {
  return createHash('sha256').update(data).digest('hex');
}

function hmac(key: string | Buffer, data: string): Buffer {
  return createHmac('sha256', key).update(data).digest();
}

/** RFC 3986 encoding as SigV4 wants it (unreserved characters kept). */
function encode(text: string): string {
  return encodeURIComponent(text).replace(/[!'()*]/g, (c) => `%${c.charCodeAt(0).toString(16).toUpperCase()}`);
}

function amzDates(now: Date): { amzDate: string; day: string } {
  const amzDate = now.toISOString().replace(/[-:]/g, '').replace(/\.\d{3}/, '');
  return { amzDate, day: amzDate.slice(0, 8) };
}

function objectUrl(s3: S3Settings, key: string): URL {
  const base = new URL(s3.endpoint);
  const prefix = base.pathname.replace(/\/+$/, '');
  const path = `${prefix}/${encode(s3.bucket)}/${key.split('/').map(encode).join('/')}`;
  return new URL(`${base.protocol}//${base.host}${path}`);
}

function signature(creds: Pick<S3Settings, 'secretAccessKey' | 'region'>, day: string, stringToSign: string): string {
  let key = hmac(`AWS4${creds.secretAccessKey}`, day);
  key = hmac(key, creds.region);
  key = hmac(key, 's3');
  key = hmac(key, 'aws4_request');
  return createHmac('sha256', key).update(stringToSign).digest('hex');
}

function stringToSign(amzDate: string, scope: string, canonicalRequest: string): string {
  return ['AWS4-HMAC-SHA256', amzDate, scope, sha256Hex(canonicalRequest)].join('\n');
}

type Credentials = Pick<S3Settings, 'accessKeyId' | 'secretAccessKey' | 'region'>;

/**
 * The `authorization` header of a request signed in the header (SigV4, service s3). Every
 * header given is signed; `host` is added from the URL.
 *
 * @example signHeaders(creds, 'PUT', url, { 'x-amz-content-sha256': hash, 'x-amz-date': '20240101T000000Z' }, hash)
 */
export function signHeaders(creds: Credentials, method: string, url: URL, headers: Record<string, string>, payloadHash: string): string {
  const all: Record<string, string> = { host: url.host };
  for (const [name, value] of Object.entries(headers)) all[name.toLowerCase()] = value.trim();
  const amzDate = all['x-amz-date'];
  if (!amzDate) throw new Error('signHeaders needs an x-amz-date header');
  const day = amzDate.slice(0, 8);
  const names = Object.keys(all).sort();
  const canonicalHeaders = names.map((n) => `${n}:${all[n]}\n`).join('');
  const canonical = [method, url.pathname, canonicalQuery(url.searchParams), canonicalHeaders, names.join(';'), payloadHash].join('\n');
  const scope = `${day}/${creds.region}/s3/aws4_request`;
  const sig = signature(creds, day, stringToSign(amzDate, scope, canonical));
  return `AWS4-HMAC-SHA256 Credential=${creds.accessKeyId}/${scope},SignedHeaders=${names.join(';')},Signature=${sig}`;
}

function canonicalQuery(params: URLSearchParams): string {
  return [...params]
    .map(([k, v]) => `${encode(k)}=${encode(v)}`)
    .sort()
    .join('&');
}

/**
 * Uploads one object with a SigV4-signed PUT; throws with the HTTP status on failure (never the
 * server's answer: a job's error must not carry what some address replied, docs/security.md).
 *
 * @example await putObject(s3, 'image-quality/job-1.jpeg', bytes, 'image/jpeg');
 */
export async function putObject(s3: S3Settings, key: string, body: Uint8Array, contentType: string, now = new Date(), transport: typeof fetch = fetch): Promise<void> {
  const url = objectUrl(s3, key);
  const payloadHash = sha256Hex(body);
  const headers = { 'content-type': contentType, 'x-amz-content-sha256': payloadHash, 'x-amz-date': amzDates(now).amzDate };
  const res = await transport(url, {
    method: 'PUT',
    body,
    headers: { ...headers, authorization: signHeaders(s3, 'PUT', url, headers, payloadHash) },
    signal: AbortSignal.timeout(60_000),
  });
  await res.body?.cancel();
  if (!res.ok) throw new Error(`S3 PUT ${url.origin}/${s3.bucket}/${key} failed: HTTP ${res.status}`);
}

/**
 * A presigned GET URL of an object URL, valid for `expiresSeconds` (at most 7 days, SigV4's limit).
 *
 * @example presignUrl(creds, new URL('https://bucket.s3.amazonaws.com/a.png'), 3600)
 */
export function presignUrl(creds: Credentials, url: URL, expiresSeconds: number, now = new Date()): string {
  const { amzDate, day } = amzDates(now);
  const scope = `${day}/${creds.region}/s3/aws4_request`;
  const params = new URLSearchParams([
    ['X-Amz-Algorithm', 'AWS4-HMAC-SHA256'],
    ['X-Amz-Credential', `${creds.accessKeyId}/${scope}`],
    ['X-Amz-Date', amzDate],
    ['X-Amz-Expires', String(Math.min(Math.max(1, Math.floor(expiresSeconds)), 604_800))],
    ['X-Amz-SignedHeaders', 'host'],
  ]);
  const query = canonicalQuery(params);
  const canonical = ['GET', url.pathname, query, `host:${url.host}`, '', 'host', 'UNSIGNED-PAYLOAD'].join('\n');
  const sig = signature(creds, day, stringToSign(amzDate, scope, canonical));
  return `${url.origin}${url.pathname}?${query}&X-Amz-Signature=${sig}`;
}

/** A presigned GET URL of an object of the bucket (path-style). */
export function presignGet(s3: S3Settings, key: string, expiresSeconds: number, now = new Date()): string {
  return presignUrl(s3, objectUrl(s3, key), expiresSeconds, now);
}

/**
 * The S3 settings of a job's `s3Config` (RunPod's field names). The region is read from an AWS
 * endpoint host (`s3.eu-west-1.amazonaws.com`), else us-east-1.
 */
export function s3FromJobConfig(config: { accessId?: unknown; accessSecret?: unknown; bucketName?: unknown; endpointUrl?: unknown }): S3Settings {
  const { accessId, accessSecret, bucketName, endpointUrl } = config;
  if (typeof accessId !== 'string' || typeof accessSecret !== 'string' || typeof bucketName !== 'string' || typeof endpointUrl !== 'string') {
    throw new Error('s3Config needs accessId, accessSecret, bucketName and endpointUrl');
  }
  const region = /s3[.-]([a-z0-9-]+)\.amazonaws\.com/.exec(new URL(endpointUrl).host)?.[1] ?? 'us-east-1';
  return { endpoint: endpointUrl.replace(/\/+$/, ''), bucket: bucketName, accessKeyId: accessId, secretAccessKey: accessSecret, region };
}
