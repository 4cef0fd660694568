import { createHash } from 'node:crypto';
import { hostname } from 'node:os';
import { isAbsolute, resolve } from 'node:path';

/**
 * Settings of the Docker driver of the worker pool (docs/configuration.md, docs/scaling.md):
 * the Docker hosts workers may run on, how their health is watched, and the label value that
 * ties containers to this installation. A bad value fails at start-up naming the variable.
 */

/** TLS files of a `tcp://` host (paths, read when the gateway starts). */
export interface DockerTlsFiles {
  ca: string;
  cert: string;
  key: string;
}

/** One Docker (or Podman) engine the pool may start containers on. */
export interface DockerHostConfig {
  /** Name in placement, logs and the admin API. */
  name: string;
  /** `unix:///path/docker.sock`, `tcp://host:port` (always with `tls`), or `ssh://[user@]host[:port][/socket/path]`. */
  url: string;
  /** The host's GPU device ids: `gpus: n` in the settings means ids "0".."n-1". */
  gpus: string[];
  /**
   * The model of each device, in the order of `gpus` (`{"L4": 2, "A100-80GB": 4}` in the
   * settings: ids 0-1 are L4, 2-5 A100-80GB); "" where the settings name no model.
   */
  gpuTypes: string[];
  tls: DockerTlsFiles | null;
  /** The gateway's base URL as containers on this host reach it; null: the default (docs/scaling.md). */
  gatewayUrl: string | null;
  /** Docker network of the containers (`bridge` unless set; `host` shares the host's network). */
  network: string;
  /** An ssh_config file for an ssh:// host (`ssh -F`): its key, known_hosts, jump host…; null: the user's own. */
  sshConfig: string | null;
}

/** Settings of the Docker driver (GANTRY_DOCKER_*). */
export interface DockerConfig {
  /** GANTRY_DOCKER_HOSTS; unset: one host `local` at DOCKER_HOST or the default socket, without GPUs. */
  hosts: DockerHostConfig[];
  /** True when the host list is that default (it is then quiet while no engine answers there). */
  defaultHost: boolean;
  /** How often each host is pinged (GANTRY_DOCKER_PING_MS). */
  pingIntervalMs: number;
  /** A host that has not answered for this long is down; its workers' jobs are requeued (GANTRY_DOCKER_DOWN_AFTER_MS). */
  downAfterMs: number;
  /**
   * The `io.gantry.instance` label of this installation's containers (GANTRY_DOCKER_INSTANCE;
   * else derived from DATABASE_URL, or from this machine's name and the data folder). Only
   * containers with this label are ever stopped as leftovers.
   */
  instance: string | null;
}

export const DOCKER_DEFAULTS: DockerConfig = {
  hosts: [{ name: 'local', url: 'unix:///var/run/docker.sock', gpus: [], gpuTypes: [], tls: null, gatewayUrl: null, network: 'bridge', sshConfig: null }],
  defaultHost: true,
  pingIntervalMs: 5_000,
  downAfterMs: 15_000,
  instance: null,
};

const NAME = /^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$/;
const GPU_ID = /^[A-Za-z0-9][A-Za-z0-9_.:-]{0,127}$/;
const MAX_HOSTS = 256;
const MAX_GPUS = 64;
const HOST_FIELDS = ['name', 'url', 'gpus', 'tls', 'gatewayUrl', 'network', 'sshConfig'];

/** A bad host list: `field` is the path inside it (`[1].url`), empty for the list itself. */
class HostsError extends Error {
  constructor(field: string, problem: string) {
    super(field === '' ? `Invalid GANTRY_DOCKER_HOSTS: ${problem}` : `Invalid GANTRY_DOCKER_HOSTS${field} ${problem}`);
  }
}

const fail = (field: string, problem: string): never => {
  throw new HostsError(field, problem);
};

/** Checks a host's engine URL: unix (absolute path), tcp (host and port), ssh (host, optional user and port). */
function parseEngineUrl(field: string, raw: unknown): string {
  if (typeof raw !== 'string' || raw === '') return fail(field, 'must be a unix://, tcp:// or ssh:// URL');
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    return fail(field, `is not a URL: ${JSON.stringify(raw)}`);
  }
  if (url.protocol === 'unix:') {
    if (url.host !== '' || !isAbsolute(url.pathname)) fail(field, 'must be unix:///absolute/path/to/docker.sock');
  } else if (url.protocol === 'tcp:' || url.protocol === 'ssh:') {
    if (url.hostname === '') fail(field, 'needs a host name');
    if (url.password !== '') fail(field, 'must not carry a password (use an SSH key)');
    if (url.protocol === 'tcp:' && url.port === '') fail(field, 'needs a port (tcp://host:2376)');
    // ssh://host/path names the engine's socket on that host (as the docker CLI reads it).
    const pathOk = url.pathname === '' || url.pathname === '/' || url.protocol === 'ssh:';
    if (!pathOk || url.search !== '' || url.hash !== '') fail(field, 'must be only scheme, host and port (ssh: and a socket path)');
  } else {
    fail(field, `has scheme ${url.protocol} (expected unix:, tcp: or ssh:)`);
  }
  return raw.replace(/\/+$/, '');
}

/** A GPU model's name as hosts declare it and endpoints ask for it (`L4`, `A100-80GB`, `RTX 4090`). */
export const GPU_TYPE = /^[A-Za-z0-9][A-Za-z0-9 _.+-]{0,63}$/;

/** A count or a list of device ids: the ids. */
function deviceIds(field: string, raw: unknown, first: number): string[] {
  if (typeof raw === 'number') {
    if (!Number.isInteger(raw) || raw < 0 || raw > MAX_GPUS) fail(field, `must be an integer from 0 to ${MAX_GPUS} or a list of device ids`);
    return Array.from({ length: raw }, (_, i) => String(first + i));
  }
  if (!Array.isArray(raw) || raw.length > MAX_GPUS) return fail(field, `must be an integer from 0 to ${MAX_GPUS} or a list of device ids`);
  for (const id of raw) if (typeof id !== 'string' || !GPU_ID.test(id)) fail(field, `has an invalid device id ${JSON.stringify(id)}`);
  return raw as string[];
}

/**
 * A host's `gpus`: a count or device ids (no model named), or per model a count or ids:
 * `{"L4": 2, "A100-80GB": ["GPU-1f2e", "GPU-3c4d"]}` (counted ids follow each other from 0).
 */
function parseGpus(field: string, raw: unknown): { gpus: string[]; gpuTypes: string[] } {
  if (raw === undefined) return { gpus: [], gpuTypes: [] };
  let gpus: string[];
  let gpuTypes: string[];
  if (typeof raw === 'object' && raw !== null && !Array.isArray(raw)) {
    gpus = [];
    gpuTypes = [];
    for (const [type, value] of Object.entries(raw as Record<string, unknown>)) {
      if (!GPU_TYPE.test(type)) fail(field, `has an invalid GPU model name ${JSON.stringify(type)} (letters, digits, space, _ . + -; up to 64)`);
      const ids = deviceIds(`${field}.${type}`, value, gpus.length);
      gpus.push(...ids);
      gpuTypes.push(...ids.map(() => type));
    }
  } else {
    gpus = deviceIds(field, raw, 0);
    gpuTypes = gpus.map(() => '');
  }
  if (gpus.length > MAX_GPUS) fail(field, `has more than ${MAX_GPUS} devices`);
  if (new Set(gpus).size !== gpus.length) fail(field, 'lists a device id twice');
  return { gpus, gpuTypes };
}

function parseTls(field: string, raw: unknown): DockerTlsFiles {
  if (typeof raw !== 'object' || raw === null || Array.isArray(raw)) return fail(field, 'must be {ca, cert, key}: paths of PEM files');
  const tls = raw as Record<string, unknown>;
  for (const key of Object.keys(tls)) if (!['ca', 'cert', 'key'].includes(key)) fail(`${field}.${key}`, 'is not a known field (expected ca, cert, key)');
  for (const key of ['ca', 'cert', 'key']) {
    if (typeof tls[key] !== 'string' || tls[key] === '') fail(`${field}.${key}`, 'must be the path of a PEM file');
  }
  return { ca: resolve(tls.ca as string), cert: resolve(tls.cert as string), key: resolve(tls.key as string) };
}

function parseHttpUrl(field: string, raw: unknown): string {
  let url: URL | null = null;
  try {
    url = typeof raw === 'string' ? new URL(raw) : null;
  } catch {
    // reported below
  }
  if (url === null || (url.protocol !== 'http:' && url.protocol !== 'https:')) return fail(field, 'must be an http:// or https:// URL');
  return (raw as string).replace(/\/+$/, '');
}

function parseHost(raw: unknown, i: number): DockerHostConfig {
  const at = `[${i}]`;
  if (typeof raw !== 'object' || raw === null || Array.isArray(raw)) return fail(at, 'must be an object {name, url, gpus?, tls?, gatewayUrl?, network?, sshConfig?}');
  const o = raw as Record<string, unknown>;
  for (const key of Object.keys(o)) if (!HOST_FIELDS.includes(key)) fail(`${at}.${key}`, `is not a known field (expected ${HOST_FIELDS.join(', ')})`);
  if (typeof o.name !== 'string' || !NAME.test(o.name)) fail(`${at}.name`, 'must be 1-64 letters, digits, _ . or -');
  const url = parseEngineUrl(`${at}.url`, o.url);
  const tcp = url.startsWith('tcp:');
  if (tcp && o.tls === undefined) fail(`${at}.tls`, 'is required for a tcp:// host: an engine API without TLS is root on that machine for anyone who reaches it');
  if (!tcp && o.tls !== undefined) fail(`${at}.tls`, 'applies to tcp:// hosts only');
  if (o.network !== undefined && (typeof o.network !== 'string' || !NAME.test(o.network))) fail(`${at}.network`, 'must be a Docker network name');
  if (o.sshConfig !== undefined && (!url.startsWith('ssh:') || typeof o.sshConfig !== 'string' || o.sshConfig === '')) fail(`${at}.sshConfig`, 'must be the path of an ssh_config file, for an ssh:// host');
  return {
    name: o.name as string,
    url,
    ...parseGpus(`${at}.gpus`, o.gpus),
    tls: tcp ? parseTls(`${at}.tls`, o.tls) : null,
    gatewayUrl: o.gatewayUrl === undefined ? null : parseHttpUrl(`${at}.gatewayUrl`, o.gatewayUrl),
    network: (o.network as string | undefined) ?? 'bridge',
    sshConfig: o.sshConfig === undefined ? null : resolve(o.sshConfig as string),
  };
}

/**
 * Parses GANTRY_DOCKER_HOSTS: a JSON array of hosts, e.g.
 * `[{"name":"gpu-a","url":"unix:///var/run/docker.sock","gpus":2},
 *   {"name":"gpu-b","url":"tcp://10.0.0.7:2376","gpus":4,"tls":{"ca":"ca.pem","cert":"cert.pem","key":"key.pem"}}]`.
 * Throws naming the host and field.
 *
 * @example parseDockerHosts('[{"name":"a","url":"unix:///var/run/docker.sock","gpus":2}]')[0].gpus // ['0', '1']
 */
export function parseDockerHosts(text: string): DockerHostConfig[] {
  let raw: unknown;
  try {
    raw = JSON.parse(text);
  } catch {
    throw new Error('Invalid GANTRY_DOCKER_HOSTS: expected a JSON array of {name, url, gpus?, tls?, gatewayUrl?, network?, sshConfig?}');
  }
  try {
    if (!Array.isArray(raw) || raw.length === 0 || raw.length > MAX_HOSTS) fail('', `must be a JSON array of 1 to ${MAX_HOSTS} hosts`);
    const hosts = (raw as unknown[]).map(parseHost);
    const names = new Set<string>();
    for (const [i, h] of hosts.entries()) {
      if (names.has(h.name)) fail(`[${i}].name`, `repeats ${JSON.stringify(h.name)}`);
      names.add(h.name);
    }
    return hosts;
  } catch (err) {
    if (err instanceof HostsError) throw new Error(err.message);
    throw err;
  }
}

function intVar(env: NodeJS.ProcessEnv, name: string, fallback: number, min: number, max: number): number {
  const raw = env[name];
  if (raw === undefined || raw === '') return fallback;
  const value = Number(raw);
  if (!Number.isInteger(value) || value < min || value > max) throw new Error(`Invalid ${name}=${JSON.stringify(raw)}: expected an integer from ${min} to ${max}`);
  return value;
}

/**
 * Reads GANTRY_DOCKER_HOSTS, GANTRY_DOCKER_PING_MS, GANTRY_DOCKER_DOWN_AFTER_MS and
 * GANTRY_DOCKER_INSTANCE (and DOCKER_HOST for the default host); throws naming the variable.
 *
 * @example loadDockerConfig({ GANTRY_DOCKER_HOSTS: '[{"name":"a","url":"unix:///run/docker.sock"}]' }).hosts[0].name === 'a'
 */
export function loadDockerConfig(env: NodeJS.ProcessEnv): DockerConfig {
  const config: DockerConfig = { ...DOCKER_DEFAULTS };
  if (env.GANTRY_DOCKER_HOSTS) {
    config.hosts = parseDockerHosts(env.GANTRY_DOCKER_HOSTS);
    config.defaultHost = false;
  } else if (env.DOCKER_HOST) {
    const url = env.DOCKER_HOST;
    if (!/^(unix|ssh):\/\//.test(url)) {
      throw new Error(`Invalid DOCKER_HOST=${JSON.stringify(url)} for Gantry's default Docker host: use unix:// or ssh://, or list hosts (with TLS files for tcp://) in GANTRY_DOCKER_HOSTS`);
    }
    config.hosts = parseDockerHosts(JSON.stringify([{ name: 'local', url }]));
  }
  config.pingIntervalMs = intVar(env, 'GANTRY_DOCKER_PING_MS', config.pingIntervalMs, 100, 600_000);
  config.downAfterMs = intVar(env, 'GANTRY_DOCKER_DOWN_AFTER_MS', config.downAfterMs, 200, 3_600_000);
  if (env.GANTRY_DOCKER_INSTANCE) {
    if (!NAME.test(env.GANTRY_DOCKER_INSTANCE)) throw new Error('Invalid GANTRY_DOCKER_INSTANCE: expected 1-64 letters, digits, _ . or -');
    config.instance = env.GANTRY_DOCKER_INSTANCE;
  }
  return config;
}

/**
 * The installation's label value when GANTRY_DOCKER_INSTANCE is unset: every gateway of one
 * installation shares its store, so it is derived from DATABASE_URL (without the password),
 * else from this machine's name and the absolute data folder (the SQLite file's home).
 *
 * @example dockerInstance({ DATABASE_URL: 'postgres://u:pw@db/gantry' }, './data') // '3f1c…' (16 hex), the same on every gateway
 */
export function dockerInstance(env: NodeJS.ProcessEnv, dataDir: string): string {
  let basis = `sqlite:${hostname()}:${resolve(dataDir)}`;
  if (env.DATABASE_URL) {
    try {
      const url = new URL(env.DATABASE_URL);
      url.password = '';
      basis = `postgres:${url.toString()}`;
    } catch {
      basis = `postgres:${env.DATABASE_URL}`;
    }
  }
  return createHash('sha256').update(basis).digest('hex').slice(0, 16);
}
