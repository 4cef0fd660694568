// Debian's nginx run by a test with the shipped deploy/nginx.conf: its own prefix in a temp
// folder, a self-signed certificate made with openssl, free ports for 80 and 443, and the
// upstream servers the test names in place of the file's one gateway. Nothing else of the
// configuration is changed, so the tests hold the shipped file.
import { execFileSync, spawnSync } from 'node:child_process';
import { chmodSync, existsSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { request } from 'node:https';
import { connect } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { freePort } from './ports.js';
import { spawnOwned } from './processes.js';

export const NGINX = '/usr/sbin/nginx';
export const NGINX_CONF = fileURLToPath(new URL('../../deploy/nginx.conf', import.meta.url));
export const hasNginx = existsSync(NGINX) && spawnSync('openssl', ['version']).status === 0;

export interface Nginx {
  /** https://127.0.0.1:<port> */
  url: string;
  httpUrl: string;
  /** The self-signed certificate (PEM), for the client's `ca`. */
  ca: string;
  dir: string;
  stop(): Promise<void>;
}

/** The shipped configuration with this run's paths, ports and upstreams. */
export function nginxConf(dir: string, ports: { http: number; https: number }, upstreams: string[]): string {
  let conf = readFileSync(NGINX_CONF, 'utf8');
  const swap = (from: RegExp, to: string): void => {
    if (!from.test(conf)) throw new Error(`deploy/nginx.conf has no ${String(from)}`);
    conf = conf.replace(from, to);
  };
  swap(/^pid .*;$/m, `pid ${dir}/nginx.pid;`);
  swap(/^error_log \S+/m, `error_log ${dir}/error.log`);
  swap(/^(\s*)access_log .*;$/m, `$1access_log ${dir}/access.log;\n$1client_body_temp_path ${dir}/body;\n$1proxy_temp_path ${dir}/proxy;\n$1fastcgi_temp_path ${dir}/fastcgi;\n$1uwsgi_temp_path ${dir}/uwsgi;\n$1scgi_temp_path ${dir}/scgi;`);
  swap(/^(\s*)server 127\.0\.0\.1:8080 (.*);$/m, upstreams.map((u) => `$1server ${u} $2;`).join('\n'));
  swap(/^\s*listen \[::\]:80;\n/m, '');
  swap(/^\s*listen \[::\]:443 ssl http2;\n/m, '');
  swap(/listen 80;/, `listen 127.0.0.1:${ports.http};`);
  swap(/listen 443 ssl http2;/, `listen 127.0.0.1:${ports.https} ssl http2;`);
  swap(/\/etc\/nginx\/tls\/gantry\.crt/, `${dir}/gantry.crt`);
  swap(/\/etc\/nginx\/tls\/gantry\.key/, `${dir}/gantry.key`);
  return conf;
}

/** Resolves once `port` accepts connections (cap 30 s). */
async function listening(port: number): Promise<void> {
  const deadline = Date.now() + 30_000;
  for (;;) {
    const ok = await new Promise<boolean>((resolve) => {
      const s = connect(port, '127.0.0.1', () => (s.destroy(), resolve(true)));
      s.once('error', () => resolve(false));
    });
    if (ok) return;
    if (Date.now() > deadline) throw new Error(`nginx did not listen on ${port} within 30 s`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

/**
 * Starts nginx with deploy/nginx.conf in front of `upstreams` (host:port each).
 *
 * @example const proxy = await startNginx(['127.0.0.1:8080']); await proxy.stop();
 */
export async function startNginx(upstreams: string[]): Promise<Nginx> {
  const dir = mkdtempSync(join(tmpdir(), 'gantry-nginx-'));
  chmodSync(dir, 0o755); // nginx's workers (not root) read the certificate and write temp files here
  execFileSync('openssl', ['req', '-x509', '-newkey', 'rsa:2048', '-nodes', '-days', '1', '-subj', '/CN=127.0.0.1', '-addext', 'subjectAltName=IP:127.0.0.1', '-keyout', join(dir, 'gantry.key'), '-out', join(dir, 'gantry.crt')], { stdio: 'pipe' });
  chmodSync(join(dir, 'gantry.key'), 0o644);
  const ports = { http: await freePort(), https: await freePort() };
  const conf = join(dir, 'nginx.conf');
  writeFileSync(conf, nginxConf(dir, ports, upstreams));
  const check = spawnSync(NGINX, ['-t', '-p', dir, '-c', conf], { encoding: 'utf8' });
  if (check.status !== 0) throw new Error(`nginx -t refused the configuration: ${check.stderr}`);
  const proc = spawnOwned(NGINX, ['-p', dir, '-c', conf, '-g', 'daemon off;'], { stdio: ['ignore', 'ignore', 'pipe'] });
  const exited = new Promise<void>((resolve) => proc.once('exit', () => resolve()));
  await Promise.race([listening(ports.https), exited.then(() => Promise.reject(new Error(`nginx exited: ${readFileSync(join(dir, 'error.log'), 'utf8')}`)))]);
  return {
    url: `https://127.0.0.1:${ports.https}`,
    httpUrl: `http://127.0.0.1:${ports.http}`,
    ca: readFileSync(join(dir, 'gantry.crt'), 'utf8'),
    dir,
    async stop() {
      proc.kill('SIGQUIT');
      await exited;
    },
  };
}

export interface Chunked {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  text: string;
}

/**
 * One HTTPS request through the proxy (trusting its certificate); `onChunk` sees each piece of
 * the answer as it arrives.
 */
export function httpsCall(
  proxy: Pick<Nginx, 'url' | 'ca'>,
  method: string,
  path: string,
  options: { headers?: Record<string, string>; body?: string | Buffer; onChunk?: (text: string) => void } = {},
): Promise<Chunked> {
  return new Promise((resolve, reject) => {
    const req = request(`${proxy.url}${path}`, { method, ca: proxy.ca, headers: { ...(options.body === undefined ? {} : { 'content-type': 'application/json' }), ...options.headers } }, (res) => {
      let text = '';
      res.setEncoding('utf8');
      res.on('data', (chunk: string) => {
        text += chunk;
        options.onChunk?.(chunk);
      });
      res.on('end', () => resolve({ status: res.statusCode ?? 0, headers: res.headers, text }));
      res.on('error', reject);
    });
    req.on('error', reject);
    req.end(options.body);
  });
}
