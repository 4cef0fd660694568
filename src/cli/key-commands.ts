/**
 * `gantry keys create|list|delete`: API keys through the admin API. A new key is printed once;
 * the list never shows keys, only their ids, names, scopes and endpoints.
 */
import { SCOPES as SERVER_SCOPES } from '../security/keys.js';
import type { ApiKeyInfo, Scope } from '../sdk/admin-client.js';
import { expectPositionals, parseFlags, parseList, UsageError } from './args.js';
import { ADMIN_CONNECTION_HELP, ADMIN_OPTIONS, connectAdmin } from './connection.js';
import { formatEndpointList, formatTable, formatTime, printFields, printJson } from './output.js';
import { dispatch, listSubcommands, type Subcommand } from './subcommands.js';

/** The scopes the server knows (security/keys.ts), not a copy. */
const SCOPES: readonly Scope[] = SERVER_SCOPES;

const keySubcommands: Record<string, Subcommand> = {
  create: {
    summary: 'create a key; it is printed once',
    usage: `usage: gantry keys create --name NAME --scopes S[,S] [--endpoints ID[,ID]] [options]

  --name NAME          what the key is for (1–128 characters)
  --scopes S[,S]       any of ${SCOPES.join(', ')} (admin includes run and read)
  --endpoints ID[,ID]  limit the key to these endpoints (default: all)

The key is printed once; only its hash is stored.

${ADMIN_CONNECTION_HELP}`,
    run: keysCreate,
  },
  list: { summary: 'list keys (never the keys themselves)', usage: `usage: gantry keys list [options]\n\n${ADMIN_CONNECTION_HELP}`, run: keysList },
  delete: { summary: 'delete a key: it stops working at once', usage: `usage: gantry keys delete ID [options]\n\n${ADMIN_CONNECTION_HELP}`, run: keysDelete },
};

const KEYS_USAGE = `usage: gantry keys <create|list|delete> [options]

${listSubcommands(keySubcommands, (n) => ({ create: 'create --name NAME --scopes S[,S] [--endpoints ID[,ID]]', delete: 'delete ID' })[n] ?? n)}

scopes: ${SCOPES.join(', ')}. Run 'gantry keys <subcommand> --help' for its options.`;

/** `gantry keys`, for the list of commands. */
export const keysCommand: Subcommand = {
  summary: 'create, list and delete API keys (admin key)',
  usage: KEYS_USAGE,
  run: (argv) => dispatch('gantry keys', KEYS_USAGE, keySubcommands, argv),
};

async function keysCreate(argv: string[]): Promise<number> {
  const { values, positionals } = parseFlags(argv, { ...ADMIN_OPTIONS, name: { type: 'string' }, scopes: { type: 'string' }, endpoints: { type: 'string' } });
  expectPositionals(positionals, []);
  const name = values.name?.trim();
  if (!name) throw new UsageError('--name is required');
  if (name.length > 128) throw new UsageError('--name must be at most 128 characters');
  if (values.scopes === undefined) throw new UsageError(`--scopes is required (any of ${SCOPES.join(', ')})`);
  const scopes = parseScopes(values.scopes);
  let endpoints: string[] | undefined;
  if (values.endpoints !== undefined) {
    endpoints = parseList(values.endpoints);
    if (endpoints.length === 0) throw new UsageError('--endpoints needs at least one endpoint id');
  }
  const created = await connectAdmin(values).createKey({ name, scopes, ...(endpoints ? { endpoints } : {}) });
  if (values.json) {
    printJson(created);
  } else {
    printFields([
      ['id', created.id],
      ['name', created.name],
      ['scopes', created.scopes.join(',')],
      ['endpoints', formatEndpointList(created.endpoints)],
      ['key', created.key],
    ]);
    console.error('The key is shown only now; store it somewhere safe.');
  }
  return 0;
}

async function keysList(argv: string[]): Promise<number> {
  const { values, positionals } = parseFlags(argv, ADMIN_OPTIONS);
  expectPositionals(positionals, []);
  const keys = await connectAdmin(values).listKeys();
  if (values.json) printJson(keys);
  else if (keys.length === 0) console.log('no keys');
  else console.log(formatTable(['ID', 'NAME', 'SCOPES', 'ENDPOINTS', 'CREATED'], keys.map(keyRow)));
  return 0;
}

async function keysDelete(argv: string[]): Promise<number> {
  const { values, positionals } = parseFlags(argv, ADMIN_OPTIONS);
  const [id] = expectPositionals(positionals, ['ID']);
  const result = await connectAdmin(values).deleteKey(id);
  if (values.json) printJson(result);
  else console.log(`deleted key ${id}`);
  return 0;
}

function parseScopes(value: string): Scope[] {
  const scopes = parseList(value);
  if (scopes.length === 0) throw new UsageError(`--scopes needs at least one of ${SCOPES.join(', ')}`);
  for (const scope of scopes) {
    if (!(SCOPES as readonly string[]).includes(scope)) throw new UsageError(`unknown scope '${scope}' (scopes: ${SCOPES.join(', ')})`);
  }
  return [...new Set(scopes)] as Scope[];
}

function keyRow(key: ApiKeyInfo): string[] {
  return [key.id, key.name, key.scopes.join(','), formatEndpointList(key.endpoints), formatTime(key.createdAt)];
}
