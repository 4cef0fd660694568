import type { IncomingMessage } from 'node:http';
import { AppError, unauthorized } from '../model/errors.js';
import type { Scope } from '../model/records.js';
import type { KeyRefusal, KeyService, Principal } from '../security/keys.js';

/**
 * Authenticates a request by its API key. Accepts `Authorization: Bearer KEY` and a raw
 * `Authorization: KEY` (runpod-python workers send the key raw). Missing, unknown and
 * insufficient keys are all 401 (spec, Authentication): the one place a key's refusal becomes HTTP.
 *
 * @example const principal = await authorize(keys, req, 'run', 'echo');
 */
export async function authorize(keys: Pick<KeyService, 'authorize'>, req: IncomingMessage, scope: Scope, endpointId?: string): Promise<Principal> {
  const header = req.headers.authorization;
  if (!header) throw unauthorized('Missing API key: send "Authorization: Bearer <key>"');
  const raw = header.startsWith('Bearer ') || header.startsWith('bearer ') ? header.slice(7).trim() : header.trim();
  const outcome = await keys.authorize(raw, scope, endpointId);
  if (outcome.ok) return outcome.principal;
  throw keyRefused(outcome.refusal, scope, endpointId);
}

/** The 401 of a refused key. */
export function keyRefused(refusal: KeyRefusal, scope: Scope, endpointId?: string): AppError {
  switch (refusal) {
    case 'unknown-key':
      return unauthorized('Invalid API key');
    case 'lacks-scope':
      return new AppError('INSUFFICIENT_SCOPE', `API key lacks the "${scope}" scope`);
    case 'admin-limited-to-endpoints':
      return new AppError('INSUFFICIENT_SCOPE', 'An API key limited to endpoints cannot use the admin API');
    case 'not-on-endpoint':
      return new AppError('INSUFFICIENT_SCOPE', `API key is not allowed on endpoint ${endpointId ?? ''}`);
  }
}
