import { spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import http from 'node:http';
import https from 'node:https';
import type { Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Duplex } from 'node:stream';
import type { DockerHostConfig } from '../../config/docker-config.js';

/**
 * A small client of the Docker Engine API (also spoken by Podman's Docker-compatible
 * service), over node:http: a unix socket, TCP with TLS (client certificates), or SSH (a
 * `docker system dial-stdio` on the remote end, as the docker CLI does). No dependency; the
 * driver needs a dozen calls. Every path is pinned to API 1.41 (Docker 20.10, Podman 4),
 * so newer engines answer the same way.
 */

const API = '/v1.41';
/** Longest JSON answer read; the engine is trusted, but a broken one must not fill memory. */
const MAX_BODY = 32 * 1024 * 1024;
const DEFAULT_TIMEOUT_MS = 30_000;

/** A call the engine answered with an error status (404 no such image, 409 conflict, …). */
export class EngineError extends Error {
  constructor(
    readonly status: number,
    message: string,
  ) {
    super(message);
    this.name = 'EngineError';
  }
}

/** Options of one call. */
export interface CallOptions {
  /** JSON request body. */
  body?: unknown;
  /** Time limit of the whole call (headers and body); 0: none (long-lived streams). */
  timeoutMs?: number;
  /** Ends the call (its connection) when aborted. */
  signal?: AbortSignal;
  /** Request headers besides the body's (a pull's `X-Registry-Auth`); never logged. */
  headers?: Record<string, string>;
}

/** One Docker host's engine API. */
export interface EngineClient {
  /**
   * One call; resolves with the decoded JSON body (undefined when there is none). Rejects
   * with an EngineError on an error status, and with the connection's error when the
   * engine does not answer in time.
   */
  call(method: string, path: string, options?: CallOptions): Promise<unknown>;
  /** A streaming call (logs, wait): the response once its headers are in (2xx only). */
  open(method: string, path: string, options?: CallOptions): Promise<http.IncomingMessage>;
  /** Ends idle connections; calls in flight go on. */
  close(): void;
}

interface Transport {
  request(options: http.RequestOptions): http.ClientRequest;
  close(): void;
}

function unixTransport(socketPath: string): Transport {
  const agent = new http.Agent({ keepAlive: true });
  return { request: (o) => http.request({ ...o, agent, socketPath }), close: () => agent.destroy() };
}

function tlsTransport(url: URL, host: DockerHostConfig): Transport {
  const tls = host.tls!;
  const read = (file: string, what: string): Buffer => {
    try {
      return readFileSync(file);
    } catch (err) {
      throw new Error(`Docker host ${host.name}: cannot read its TLS ${what} ${file}: ${(err as Error).message}`, { cause: err });
    }
  };
  const agent = new https.Agent({ keepAlive: true, ca: read(tls.ca, 'CA'), cert: read(tls.cert, 'certificate'), key: read(tls.key, 'key') });
  return {
    request: (o) => https.request({ ...o, agent, host: url.hostname.replace(/^\[|\]$/g, ''), port: Number(url.port) }),
    close: () => agent.destroy(),
  };
}

/**
 * SSH: each connection is `ssh … docker [--host unix://<path>] system dial-stdio`, whose
 * stdin/stdout carry the HTTP exchange. The connections of one host share one SSH session
 * (ControlMaster), so a long-lived stream per container costs a channel, not a login.
 */
function sshTransport(url: URL, sshConfig: string | null): Transport {
  const args = [...(sshConfig ? ['-F', sshConfig] : []), '-o', 'BatchMode=yes', '-o', 'ConnectTimeout=10', '-o', 'ServerAliveInterval=10'];
  args.push('-o', 'ControlMaster=auto', '-o', `ControlPath=${join(tmpdir(), 'gantry-ssh-%C')}`, '-o', 'ControlPersist=60');
  if (url.port) args.push('-p', url.port);
  args.push(`${url.username ? `${decodeURIComponent(url.username)}@` : ''}${url.hostname}`, '--', 'docker');
  if (url.pathname !== '' && url.pathname !== '/') args.push('--host', `unix://${url.pathname}`);
  args.push('system', 'dial-stdio');
  const createConnection = (): Socket => new SshStream(args) as unknown as Socket;
  // No agent: with createConnection alone, node:http makes one connection per request through it.
  return { request: (o) => http.request({ ...o, host: 'docker', createConnection }), close: () => {} };
}

/** The stdio of one `ssh … dial-stdio` process as a socket-like duplex stream. */
class SshStream extends Duplex {
  private readonly child;
  private stderr = '';

  constructor(args: string[]) {
    super();
    this.child = spawn('ssh', args, { stdio: ['pipe', 'pipe', 'pipe'] });
    this.child.stdout.on('data', (chunk: Buffer) => {
      if (!this.push(chunk)) this.child.stdout.pause();
    });
    this.child.stderr.setEncoding('utf8').on('data', (text: string) => (this.stderr = (this.stderr + text).slice(-2_000)));
    this.child.on('error', (err) => this.destroy(err));
    // The stream ends when ssh has exited, so a failed ssh is an error naming why, not a hang-up.
    this.child.on('close', (code) => {
      if (code !== 0 && code !== null) this.destroy(new Error(`ssh exited with code ${code}: ${this.stderr.trim() || 'no message'}`));
      else this.push(null);
    });
    this.child.stdin.on('error', () => {}); // reported through 'close'
  }

  override _read(): void {
    this.child.stdout.resume();
  }

  // A write to an ssh that has exited fails with EPIPE before its exit is seen: that is reported
  // through 'close' (its code and message), not as a broken pipe that says nothing of why.
  override _write(chunk: Buffer, _encoding: BufferEncoding, done: (err?: Error | null) => void): void {
    this.child.stdin.write(chunk, (err) => done(pipeClosed(err) ? null : err));
  }

  override _final(done: (err?: Error | null) => void): void {
    this.child.stdin.end(() => done());
  }

  override _destroy(err: Error | null, done: (err?: Error | null) => void): void {
    this.child.kill();
    done(err);
  }

  // What node:http may call on a socket.
  setTimeout(): this {
    return this;
  }
  setNoDelay(): this {
    return this;
  }
  setKeepAlive(): this {
    return this;
  }
  ref(): this {
    return this;
  }
  unref(): this {
    return this;
  }
}

function pipeClosed(err: Error | null | undefined): boolean {
  return (err as NodeJS.ErrnoException | null | undefined)?.code === 'EPIPE';
}

function transportFor(host: DockerHostConfig): Transport {
  const url = new URL(host.url);
  if (url.protocol === 'unix:') return unixTransport(url.pathname);
  if (url.protocol === 'tcp:') return tlsTransport(url, host);
  return sshTransport(url, host.sshConfig);
}

/** The engine's error text: its JSON `message`, else the body as text. */
function errorMessage(status: number, text: string): string {
  try {
    const json = JSON.parse(text) as { message?: unknown };
    if (typeof json.message === 'string') return json.message;
  } catch {
    // not JSON
  }
  return text.trim().slice(0, 500) || `HTTP ${status}`;
}

function readBody(res: http.IncomingMessage): Promise<string> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    res.on('data', (chunk: Buffer) => {
      size += chunk.length;
      if (size > MAX_BODY) res.destroy(new Error(`engine answer over ${MAX_BODY} bytes`));
      else chunks.push(chunk);
    });
    res.on('end', () => resolve(Buffer.concat(chunks).toString('utf8')));
    res.on('error', reject);
    res.on('aborted', () => reject(new Error('engine connection closed mid-answer')));
  });
}

/**
 * Creates the client of one host. Reads the TLS files of a tcp:// host at once (a missing
 * file fails the gateway's start, naming the host).
 *
 * @example
 * const engine = createEngineClient({ name: 'a', url: 'unix:///var/run/docker.sock', gpus: [], gpuTypes: [], tls: null, gatewayUrl: null, network: 'bridge', sshConfig: null });
 * await engine.call('GET', '/_ping');
 */
export function createEngineClient(host: DockerHostConfig): EngineClient {
  const transport = transportFor(host);

  function open(method: string, path: string, options: CallOptions = {}): Promise<http.IncomingMessage> {
    const timeoutMs = options.timeoutMs ?? DEFAULT_TIMEOUT_MS;
    const payload = options.body === undefined ? undefined : Buffer.from(JSON.stringify(options.body));
    return new Promise((resolve, reject) => {
      const req = transport.request({
        method,
        path: `${API}${path}`,
        headers: { ...options.headers, ...(payload ? { 'content-type': 'application/json', 'content-length': payload.length } : {}) },
      });
      const timer = timeoutMs > 0 ? setTimeout(() => req.destroy(new Error(`no answer from Docker host ${host.name} within ${timeoutMs} ms`)), timeoutMs) : undefined;
      timer?.unref();
      const abort = (): void => void req.destroy(new Error('call aborted'));
      if (options.signal?.aborted) abort();
      options.signal?.addEventListener('abort', abort, { once: true });
      req.on('close', () => options.signal?.removeEventListener('abort', abort));
      req.on('error', (err) => {
        clearTimeout(timer);
        reject(err);
      });
      req.on('response', (res) => {
        const status = res.statusCode ?? 0;
        if (status >= 200 && status < 300) {
          // The timer keeps running until the body is read (call) or is cleared by the caller's stream end.
          res.on('close', () => clearTimeout(timer));
          resolve(res);
          return;
        }
        readBody(res).then(
          (text) => {
            clearTimeout(timer);
            reject(new EngineError(status, errorMessage(status, text)));
          },
          (err: unknown) => {
            clearTimeout(timer);
            reject(err as Error);
          },
        );
      });
      req.end(payload);
    });
  }

  return {
    open,
    async call(method, path, options) {
      const res = await open(method, path, options);
      const text = await readBody(res);
      if (text === '') return undefined;
      try {
        return JSON.parse(text) as unknown;
      } catch {
        return text;
      }
    },
    close: () => transport.close(),
  };
}
