/**
 * `gantry keys create|list|delete`: API keys through the admin API. A new key is printed once;
 * the list never shows keys, only their ids, names, scopes and endpoints.
 */
import { SCOPES as SERVER_SCOPES } from '../security/keys.js';
import type { ApiKeyInfo, KeyLimits, Scope } from '../sdk/admin-client.js';
import { expectPositionals, parseFlags, parseInteger, parseList, UsageError } from './args.js';
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
  delete: {
    summary: 'delete a key: it stops working at once',
    usage: `usage: gantry keys delete ID [--force] [options]\n\n  --force    also a managed key (a pool worker's own: the worker is cut off mid-job)\n\n${ADMIN_CONNECTION_HELP}`,
    run: keysDelete,
  },
  limit: {
    summary: "set a key's budget and job cap",
    usage: `usage: gantry keys limit ID [--budget-usd USD --budget-period day|month] [--max-concurrent-jobs N] [options]

  --budget-usd USD            what the key may spend per period (at most 10 decimals); "none" removes it
  --budget-period P           day or month (UTC calendar), needed with a budget
  --max-concurrent-jobs N     jobs queued + running at once (1-1000000); "none" removes the cap

A key past its budget is refused with 402 BUDGET_EXCEEDED until the period resets; a key at
its cap with 429 TOO_MANY_JOBS. A flag left out keeps its value.

${ADMIN_CONNECTION_HELP}`,
    run: keysLimit,
  },
};

const KEYS_USAGE = `usage: gantry keys <create|list|delete|limit> [options]

${listSubcommands(keySubcommands, (n) => ({ create: 'create --name NAME --scopes S[,S] [--endpoints ID[,ID]]', delete: 'delete ID', limit: 'limit ID [--budget-usd USD --budget-period P] [--max-concurrent-jobs N]' })[n] ?? n)}

scopes: ${SCOPES.join(', ')}. Run 'gantry keys <subcommand> --help' for its options.`;

/** `gantry keys`, for the list of commands. */
export const keysCommand: Subcommand = {
  summary: 'create, list, limit and delete API keys (admin key)',
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
  else console.log(formatTable(['ID', 'NAME', 'SCOPES', 'ENDPOINTS', 'BUDGET (USD)', 'MAX JOBS', 'CREATED'], keys.map(keyRow)));
  return 0;
}

async function keysDelete(argv: string[]): Promise<number> {
  const { values, positionals } = parseFlags(argv, { ...ADMIN_OPTIONS, force: { type: 'boolean' } });
  const [id] = expectPositionals(positionals, ['ID']);
  const result = await connectAdmin(values).deleteKey(id, { force: values.force === true });
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
  const budget = key.budget ? `${key.budget.spentUsd} of ${key.budget.budgetUsd} per ${key.budget.budgetPeriod}` : '-';
  return [key.id, key.name, key.scopes.join(','), formatEndpointList(key.endpoints), budget, key.maxConcurrentJobs == null ? '-' : String(key.maxConcurrentJobs), formatTime(key.createdAt)];
}

async function keysLimit(argv: string[]): Promise<number> {
  const { values, positionals } = parseFlags(argv, { ...ADMIN_OPTIONS, 'budget-usd': { type: 'string' }, 'budget-period': { type: 'string' }, 'max-concurrent-jobs': { type: 'string' } });
  const [id] = expectPositionals(positionals, ['ID']);
  const limits: KeyLimits = {};
  const budget = values['budget-usd'];
  if (budget !== undefined) {
    if (budget !== 'none' && !/^\d+(\.\d{1,10})?$/.test(budget)) throw new UsageError(`--budget-usd must be USD with at most 10 decimals, or none, got '${budget}'`);
    limits.budgetUsd = budget === 'none' ? null : budget;
  }
  const period = values['budget-period'];
  if (period !== undefined) {
    if (period !== 'day' && period !== 'month') throw new UsageError(`--budget-period must be day or month, got '${period}'`);
    limits.budgetPeriod = period;
  }
  const cap = values['max-concurrent-jobs'];
  if (cap !== undefined) limits.maxConcurrentJobs = cap === 'none' ? null : parseInteger('--max-concurrent-jobs', cap, 1, 1_000_000);
  if (Object.keys(limits).length === 0) throw new UsageError('nothing to change: give --budget-usd, --budget-period or --max-concurrent-jobs');
  const key = await connectAdmin(values).setKeyLimits(id, limits);
  if (values.json) printJson(key);
  else {
    printFields([
      ['id', key.id],
      ['name', key.name],
      ['budget', key.budget ? `${key.budget.spentUsd} of ${key.budget.budgetUsd} USD per ${key.budget.budgetPeriod} (resets ${key.budget.resetsAt})` : 'none'],
      ['maxConcurrentJobs', key.maxConcurrentJobs == null ? 'none' : String(key.maxConcurrentJobs)],
    ]);
  }
  return 0;
}
