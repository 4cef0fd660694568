/**
 * Where the CLI's commands connect and with which key: --url / GANTRY_URL, and --admin-key /
 * GANTRY_ADMIN_KEY for the admin API or --key / GANTRY_API_KEY for the job API (an admin key
 * does too). Keys are never printed, not even in errors.
 */
import { AdminApiError, createAdminClient, type AdminClient } from '../sdk/admin-client.js';
import { createClient, GantryApiError, type GantryClient } from '../sdk/client.js';
import { UsageError } from './args.js';

/** The gateway the CLI talks to when neither --url nor GANTRY_URL says otherwise. */
export const DEFAULT_URL = 'http://localhost:8080';

/** The flags every command that calls the server takes. */
export const COMMON_OPTIONS = {
  url: { type: 'string' },
  json: { type: 'boolean' },
  help: { type: 'boolean', short: 'h' },
} as const;

/** The admin commands' flags: COMMON_OPTIONS and the admin key. */
export const ADMIN_OPTIONS = { ...COMMON_OPTIONS, 'admin-key': { type: 'string' } } as const;

/** The job commands' flags: COMMON_OPTIONS and the API key. */
export const JOB_OPTIONS = { ...COMMON_OPTIONS, key: { type: 'string' } } as const;

/** Help lines of ADMIN_OPTIONS. */
export const ADMIN_CONNECTION_HELP = `connection:
  --url URL            gateway address (env GANTRY_URL, default ${DEFAULT_URL})
  --admin-key KEY      a key with the admin scope (env GANTRY_ADMIN_KEY)
  --json               print the server's answer as JSON
  -h, --help           show this help`;

/** Help lines of JOB_OPTIONS. */
export const JOB_CONNECTION_HELP = `connection:
  --url URL            gateway address (env GANTRY_URL, default ${DEFAULT_URL})
  --key KEY            an API key with the run scope, or read for status, stream and health
                       (env GANTRY_API_KEY, else GANTRY_ADMIN_KEY)
  --json               print JSON for scripts instead of text for people
  -h, --help           show this help`;

/** The gateway URL from --url or GANTRY_URL, checked. */
function gatewayUrl(values: { url?: string }): string {
  const url = values.url ?? (process.env.GANTRY_URL || DEFAULT_URL);
  let parsed: URL;
  try {
    parsed = new URL(url);
  } catch {
    throw new UsageError(`--url / GANTRY_URL is not a URL: '${url}'`);
  }
  if (parsed.protocol !== 'http:' && parsed.protocol !== 'https:') throw new UsageError(`--url / GANTRY_URL must be http(s), got '${parsed.protocol}'`);
  return url;
}

/** The admin client from --url/--admin-key or GANTRY_URL/GANTRY_ADMIN_KEY. */
export function connectAdmin(values: { url?: string; 'admin-key'?: string }): AdminClient {
  const url = gatewayUrl(values);
  const adminKey = values['admin-key'] ?? process.env.GANTRY_ADMIN_KEY;
  if (!adminKey) throw new UsageError('no admin key: pass --admin-key or set GANTRY_ADMIN_KEY');
  return createAdminClient({ url, adminKey });
}

/** The job API client from --url/--key or GANTRY_URL/GANTRY_API_KEY (GANTRY_ADMIN_KEY as a fallback). */
export function connectJobs(values: { url?: string; key?: string }, longPollMs?: number): GantryClient {
  const url = gatewayUrl(values);
  const apiKey = values.key ?? (process.env.GANTRY_API_KEY || process.env.GANTRY_ADMIN_KEY);
  if (!apiKey) throw new UsageError('no API key: pass --key or set GANTRY_API_KEY (or GANTRY_ADMIN_KEY)');
  return createClient({ url, apiKey, ...(longPollMs === undefined ? {} : { longPollMs }) });
}

/** True for the errors a command reports as "the server refused or could not be reached" (exit 1). */
export function isServerError(err: unknown): err is AdminApiError | GantryApiError {
  return err instanceof AdminApiError || err instanceof GantryApiError;
}
