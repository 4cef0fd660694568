import { createHash } from 'node:crypto';
import { RawJson } from '../model/json.js';
import type { SubmitRequest } from './policy.js';

/**
 * A submission's Idempotency-Key as the store holds it (docs/api.md, Idempotency-Key): never
 * the key or the body, two SHA-256 digests.
 */
export interface IdempotencyKey {
  /** Digest of (API key id, endpoint, key): a key is one caller's on one endpoint. */
  keyDigest: string;
  /** Digest of the request: the route and every field of the body that shapes the job. */
  requestDigest: string;
}

/** The submitting routes: a key used on one is another request on the others. */
export type SubmitOperation = 'run' | 'runsync' | 'openai';

/**
 * The digests of one submission under `key`. The key's scope is the caller's API key and the
 * endpoint, so no one reaches another caller's job by guessing its key. The request digest
 * covers the route, `input` (as stored), `webhook`, `policy` and `s3Config` without its
 * `accessSecret` (a digest of a weak secret could be guessed offline from the stored value).
 *
 * @example idempotencyKeyOf({ key: 'order-17', keyId: 'k1', endpointId: 'echo', operation: 'run', request }).keyDigest.length === 64
 */
export function idempotencyKeyOf(a: { key: string; keyId: string | null; endpointId: string; operation: SubmitOperation; request: SubmitRequest }): IdempotencyKey {
  // NUL between parts: none of them can contain one, so no two scopes hash alike.
  const keyDigest = createHash('sha256').update(`${a.keyId ?? ''}\0${a.endpointId}\0${a.key}`).digest('hex');
  const { request: r } = a;
  const s3 = r.s3Config === null ? null : [r.s3Config.accessId, r.s3Config.bucketName, r.s3Config.endpointUrl];
  const requestDigest = createHash('sha256')
    .update(`${a.operation}\0`)
    // The input by itself: up to 20 MB that is not copied into another string first (a RawJson's
    // bytes are its text's UTF-8, what hashing the text would hash).
    .update(r.inputJson instanceof RawJson ? r.inputJson.utf8 : r.inputJson)
    .update(`\0${JSON.stringify([r.webhook, r.executionTimeoutMs, r.lowPriority, r.ttlMs, s3])}`)
    .digest('hex');
  return { keyDigest, requestDigest };
}
