import type { IncomingMessage } from 'node:http';
import type { RegistryLogin } from '../../security/registry-credentials.js';
import { PullError } from '../driver.js';
import type { EngineClient } from './engine-client.js';

/**
 * Pulling an image onto one Docker host (`POST /images/create`), as `docker pull` does: the
 * registry's login goes in the `X-Registry-Auth` header, the engine answers with one JSON line
 * per event (layer by layer), which is read into a percentage of the layers' bytes.
 */


/** An image reference split as the engine's create call wants it. */
export interface ImageRef {
  /** `registry:5000/team/name` (without tag or digest). */
  repository: string;
  /** The tag, or the digest (`sha256:…`) when the reference has one; `latest` when it names neither. */
  tag: string;
  /** The registry's host (`registry:5000`), `docker.io` when the reference names none. */
  registry: string;
}

/**
 * Splits `[registry/]path[:tag][@digest]`. The first path component is a registry when it has a
 * `.` or a `:`, or is `localhost` (Docker's rule); a digest wins over a tag.
 *
 * @example parseImageRef('127.0.0.1:5000/team/echo:1') // { repository: '127.0.0.1:5000/team/echo', tag: '1', registry: '127.0.0.1:5000' }
 */
export function parseImageRef(image: string): ImageRef {
  const at = image.indexOf('@');
  const named = at < 0 ? image : image.slice(0, at);
  const digest = at < 0 ? null : image.slice(at + 1);
  const slash = named.lastIndexOf('/');
  const colon = named.lastIndexOf(':');
  const hasTag = colon > slash;
  const repository = hasTag ? named.slice(0, colon) : named;
  const first = repository.split('/')[0] ?? '';
  const registry = repository.includes('/') && (first.includes('.') || first.includes(':') || first === 'localhost') ? first : 'docker.io';
  return { repository, tag: digest ?? (hasTag ? named.slice(colon + 1) : 'latest'), registry };
}

/**
 * The `X-Registry-Auth` header of a pull: `{username, password, serveraddress}` as JSON in
 * URL-safe base64 with padding (the docker CLI's encoding, which every engine version decodes).
 */
export function registryAuthHeader(login: RegistryLogin, registry: string): string {
  const json = JSON.stringify({ username: login.username, password: login.password, serveraddress: registry === 'docker.io' ? 'https://index.docker.io/v1/' : registry });
  return Buffer.from(json, 'utf8').toString('base64').replace(/\+/g, '-').replace(/\//g, '_');
}

/** One line of the engine's pull stream (the fields read of it). */
export interface PullEvent {
  id?: string;
  status?: string;
  progressDetail?: { current?: number; total?: number };
  error?: string;
  errorDetail?: { message?: string };
}

/** Layer statuses after which its bytes are all downloaded. */
const LAYER_DONE = new Set(['Verifying Checksum', 'Download complete', 'Extracting', 'Pull complete']);

/**
 * The progress of one pull by layer bytes: each layer's size once the engine says it (its first
 * `Downloading` line), its bytes downloaded, all of them once it is verified or extracted.
 * Layers the host already has (`Already exists`) count for nothing.
 *
 * @example const p = createPullProgress(); p.add({ id: 'l1', status: 'Downloading', progressDetail: { current: 43, total: 100 } }); p.percent() // 43
 */
export function createPullProgress(): { add(event: PullEvent): void; percent(): number | null } {
  const layers = new Map<string, { current: number; total: number }>();
  return {
    add(event) {
      if (event.id === undefined || event.status === undefined) return;
      const layer = layers.get(event.id);
      const total = event.progressDetail?.total;
      if (event.status === 'Downloading' && typeof total === 'number' && total > 0) {
        layers.set(event.id, { current: Math.min(total, Math.max(0, event.progressDetail?.current ?? 0)), total });
      } else if (layer && LAYER_DONE.has(event.status)) layer.current = layer.total;
    },
    percent() {
      let current = 0;
      let total = 0;
      for (const l of layers.values()) {
        current += l.current;
        total += l.total;
      }
      return total === 0 ? null : Math.floor((100 * current) / total);
    },
  };
}

/** A pull that sends nothing for this long is given up (a registry or engine that hangs). */
export const PULL_STALL_MS = 300_000;
/** Longest line of the pull stream read; the engine's lines are a few hundred bytes. */
const MAX_LINE = 64 * 1024;

/** What one pull is given. */
export interface PullRequest {
  engine: EngineClient;
  /** The host's name, for messages. */
  host: string;
  image: string;
  /** The registry's login; none for a public image. */
  login: RegistryLogin | undefined;
  /** Told `pulling 43%` (or `pulling` before a layer's size is known) as the percentage changes. */
  onProgress(description: string): void;
  /** Milliseconds without a line before the pull is given up (default PULL_STALL_MS). */
  stallMs?: number;
}

/**
 * Pulls `image` onto a host and resolves once the engine has it; rejects with a PullError naming
 * the host, the image and the registry's answer (an error status, or an `error` line mid-stream).
 *
 * @example await pullImage({ engine, host: 'b', image: '127.0.0.1:5000/team/echo:1', login, onProgress: (d) => console.log(d) });
 */
export async function pullImage(request: PullRequest): Promise<void> {
  const { engine, host, image } = request;
  const ref = parseImageRef(image);
  const failed = (answer: string): PullError => new PullError(`pulling ${image} on Docker host ${host} failed: ${answer}`);
  const query = `fromImage=${encodeURIComponent(ref.repository)}&tag=${encodeURIComponent(ref.tag)}`;
  const headers = request.login ? { 'x-registry-auth': registryAuthHeader(request.login, ref.registry) } : undefined;
  const stallMs = request.stallMs ?? PULL_STALL_MS;
  // No time limit on the whole pull (images run to many GB), only on silence: headers or lines.
  const stalled = new AbortController();
  let res: IncomingMessage | undefined;
  const stall = new StallTimer(stallMs, () => {
    stalled.abort();
    res?.destroy(new Error(`no word from the engine for ${stallMs} ms`));
  });
  try {
    try {
      res = await engine.open('POST', `/images/create?${query}`, { timeoutMs: 0, signal: stalled.signal, ...(headers ? { headers } : {}) });
    } catch (err) {
      throw failed(stalled.signal.aborted ? `no word from the engine for ${stallMs} ms` : err instanceof Error ? err.message : String(err));
    }
    const error = await readPullStream(res, request.onProgress, stall);
    if (error !== null) throw failed(error);
  } finally {
    stall.clear();
  }
}

/** Fires `then` once nothing happened for `ms`; each `touch` starts the wait again. */
class StallTimer {
  private timer: NodeJS.Timeout;
  constructor(
    readonly ms: number,
    private readonly then: () => void,
  ) {
    this.timer = setTimeout(then, ms);
  }
  touch(): void {
    clearTimeout(this.timer);
    this.timer = setTimeout(this.then, this.ms);
  }
  clear(): void {
    clearTimeout(this.timer);
  }
}

/** Reads the pull's JSON lines to the end; the first `error` line's message, or null when there was none. */
function readPullStream(res: IncomingMessage, onProgress: (description: string) => void, stall: StallTimer): Promise<string | null> {
  const progress = createPullProgress();
  let said = '';
  let buffered = '';
  let error: string | null = null;
  const line = (text: string): void => {
    if (text.trim() === '') return;
    let event: PullEvent;
    try {
      event = JSON.parse(text) as PullEvent;
    } catch {
      return; // not an event; the engine only writes JSON lines
    }
    if (event.error !== undefined || event.errorDetail?.message !== undefined) error ??= event.errorDetail?.message ?? event.error ?? 'unknown error';
    progress.add(event);
    const percent = progress.percent();
    const description = percent === null ? 'pulling' : `pulling ${percent}%`;
    if (description !== said) onProgress((said = description));
  };
  return new Promise((resolve) => {
    let ended = false;
    res.setEncoding('utf8');
    res.on('data', (chunk: string) => {
      stall.touch();
      buffered += chunk;
      let nl: number;
      while ((nl = buffered.indexOf('\n')) >= 0) {
        line(buffered.slice(0, nl));
        buffered = buffered.slice(nl + 1);
      }
      if (buffered.length > MAX_LINE) res.destroy(new Error(`a line of the pull stream over ${MAX_LINE} bytes`));
    });
    res.on('end', () => {
      ended = true;
      line(buffered);
    });
    let broke: string | null = null;
    res.on('error', (err) => (broke = err.message));
    // 'close' comes last whatever happened: a stream that did not end is a broken pull.
    res.on('close', () => resolve(error ?? (ended ? null : `the pull stream broke: ${broke ?? `no word from the engine for ${stall.ms} ms, or it closed the stream`}`)));
  });
}
