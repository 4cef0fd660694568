import type { IncomingMessage } from 'node:http';
import { AppError } from '../model/errors.js';
import type { Scope } from '../model/records.js';
import type { KeyService, Principal } from '../security/keys.js';

/**
 * Authenticates a request by its API key. Accepts `Authorization: Bearer KEY` and a raw
 * `Authorization: KEY` (runpod-python workers send the key raw). Missing, unknown and
 * insufficient keys are all 401 (spec, Authentication).
 *
 * @example const principal = await authorize(keys, req, 'run', 'echo');
 */
export function authorize(keys: Pick<KeyService, 'authorize'>, req: IncomingMessage, scope: Scope, endpointId?: string): Promise<Principal> {
  const header = req.headers.authorization;
  if (!header) throw new AppError('UNAUTHORIZED', 'Missing API key: send "Authorization: Bearer <key>"');
  const raw = header.startsWith('Bearer ') || header.startsWith('bearer ') ? header.slice(7).trim() : header.trim();
  return keys.authorize(raw, scope, endpointId);
}
