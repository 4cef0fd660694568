/**
 * `gantry registry-credentials create|list|delete`: the registry logins endpoints pull their
 * images with (`worker.registryCredentials`), through the admin API. The password is read from
 * stdin (`--password-stdin`, as `docker login` does) or `--password`; it is never printed.
 */
import { readFileSync } from 'node:fs';
import type { RegistryCredentialInfo } from '../sdk/admin-client.js';
import { expectPositionals, parseFlags, UsageError } from './args.js';
import { ADMIN_CONNECTION_HELP, ADMIN_OPTIONS, connectAdmin } from './connection.js';
import { formatTable, formatTime, printFields, printJson } from './output.js';
import { dispatch, listSubcommands, type Subcommand } from './subcommands.js';

const subcommands: Record<string, Subcommand> = {
  create: {
    summary: 'save a registry login; prints its id for worker.registryCredentials',
    usage: `usage: gantry registry-credentials create --name NAME --username USER (--password-stdin | --password PASSWORD) [options]

  --name NAME          what the login is for (1–128 characters)
  --username USER      the registry's user name
  --password-stdin     read the password (or access token) from stdin: keeps it out of the
                       shell's history and the process list
  --password PASSWORD  the password on the command line (seen by other users of this machine)

The password is sealed at rest and never shown again. Name the printed id in an endpoint's
worker settings: {"image": "registry.example.com/team/app:1", "registryCredentials": "rc_…"}.

${ADMIN_CONNECTION_HELP}`,
    run: create,
  },
  list: { summary: 'list registry logins (never their passwords)', usage: `usage: gantry registry-credentials list [options]\n\n${ADMIN_CONNECTION_HELP}`, run: list },
  delete: {
    summary: 'delete a registry login (refused while an endpoint names it)',
    usage: `usage: gantry registry-credentials delete ID [options]\n\n${ADMIN_CONNECTION_HELP}`,
    run: remove,
  },
};

const USAGE = `usage: gantry registry-credentials <create|list|delete> [options]

${listSubcommands(subcommands, (n) => ({ create: 'create --name NAME --username USER --password-stdin', delete: 'delete ID' })[n] ?? n)}

Run 'gantry registry-credentials <subcommand> --help' for its options.`;

/** `gantry registry-credentials`, for the list of commands. */
export const registryCredentialsCommand: Subcommand = {
  summary: 'save, list and delete the registry logins images are pulled with (admin key)',
  usage: USAGE,
  run: (argv) => dispatch('gantry registry-credentials', USAGE, subcommands, argv),
};

/** The password: stdin's first line (--password-stdin) or --password; exactly one of them. */
function passwordOf(values: { password?: string; 'password-stdin'?: boolean }): string {
  if (values['password-stdin'] && values.password !== undefined) throw new UsageError('give --password-stdin or --password, not both');
  let password: string;
  if (values['password-stdin']) password = readFileSync(0, 'utf8').replace(/\r?\n$/, '');
  else if (values.password !== undefined) password = values.password;
  else throw new UsageError('--password-stdin or --password is required');
  if (password === '') throw new UsageError('the password is empty');
  return password;
}

async function create(argv: string[]): Promise<number> {
  const { values, positionals } = parseFlags(argv, { ...ADMIN_OPTIONS, name: { type: 'string' }, username: { type: 'string' }, password: { type: 'string' }, 'password-stdin': { type: 'boolean' } });
  expectPositionals(positionals, []);
  const name = values.name?.trim();
  if (!name) throw new UsageError('--name is required');
  if (!values.username) throw new UsageError('--username is required');
  const created = await connectAdmin(values).createRegistryCredential({ name, username: values.username, password: passwordOf(values) });
  if (values.json) printJson(created);
  else
    printFields([
      ['id', created.id],
      ['name', created.name],
    ]);
  return 0;
}

async function list(argv: string[]): Promise<number> {
  const { values, positionals } = parseFlags(argv, ADMIN_OPTIONS);
  expectPositionals(positionals, []);
  const credentials = await connectAdmin(values).listRegistryCredentials();
  if (values.json) printJson(credentials);
  else if (credentials.length === 0) console.log('no registry credentials');
  else console.log(formatTable(['ID', 'NAME', 'USERNAME', 'CREATED'], credentials.map(row)));
  return 0;
}

async function remove(argv: string[]): Promise<number> {
  const { values, positionals } = parseFlags(argv, ADMIN_OPTIONS);
  const [id] = expectPositionals(positionals, ['ID']);
  const result = await connectAdmin(values).deleteRegistryCredential(id);
  if (values.json) printJson(result);
  else console.log(`deleted registry credential ${id}`);
  return 0;
}

function row(c: RegistryCredentialInfo): string[] {
  return [c.id, c.name, c.username, formatTime(c.createdAt)];
}
