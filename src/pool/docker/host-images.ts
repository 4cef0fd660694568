import type { Logger } from 'pino';
import type { RegistryLogin } from '../../security/registry-credentials.js';
import type { DockerHost } from './docker-hosts.js';
import { EngineError } from './engine-client.js';
import { PullError } from '../driver.js';
import { pullImage } from './image-pull.js';

/** What the image keeper is given. */
export interface HostImagesOptions {
  /** The login of a saved registry credential (undefined: it was deleted). */
  registryLogin(id: string): Promise<RegistryLogin | undefined>;
  logger: Logger;
  /** Milliseconds without a word from the engine before a pull is given up (default PULL_STALL_MS). */
  pullStallMs?: number;
}

/** What a host is asked to hold: the image as an endpoint names it, and the credential to pull it with. */
export interface ImageWant {
  image: string;
  /** A saved registry credential's id (`worker.registryCredentials`); none for a public image or a local one. */
  registryCredentials?: string;
}

/** One pull in flight on one host: shared by every start (and the prepull) that needs it meanwhile. */
interface Pull {
  done: Promise<void>;
  listeners: Set<(description: string) => void>;
  last: string;
}

const INSPECT_TIMEOUT_MS = 10_000;
const LIST_TIMEOUT_MS = 30_000;

/**
 * Which images each Docker host holds, and pulls onto a host that lacks one (docs/scaling.md,
 * "Images from registries"). A host's `images` set is what placement prefers; it is filled from
 * the host's own list when it first answers, and kept by every inspect and pull. An image is
 * pulled only when the host lacks it (a tag is not pulled again, `:latest` included): push a new
 * tag, or name a digest, to roll out a new build. Two starts on one host needing one image share
 * one pull.
 */
export class HostImages {
  private readonly pulls = new Map<string, Pull>();

  constructor(private readonly options: HostImagesOptions) {}

  /**
   * Makes sure `host` holds the image: inspected first, pulled when missing. `onProgress` hears
   * `pulling 43%` while a pull runs. Rejects with a PullError naming the host, the image and the
   * registry's answer.
   */
  async ensure(host: DockerHost, want: ImageWant, onProgress?: (description: string) => void): Promise<'present' | 'pulled'> {
    if (await this.holds(host, want.image)) return 'present';
    await this.pull(host, want, onProgress);
    return 'pulled';
  }

  /** Whether the host holds the image now (GET /images/{name}/json, the name as the docker CLI sends it: endpoint-settings.ts checked it); kept in its `images`. */
  async holds(host: DockerHost, image: string): Promise<boolean> {
    try {
      await host.engine.call('GET', `/images/${image}/json`, { timeoutMs: INSPECT_TIMEOUT_MS });
      host.images.add(image);
      return true;
    } catch (err) {
      if (!(err instanceof EngineError && err.status === 404)) throw err;
      host.images.delete(image);
      return false;
    }
  }

  /** Reads the host's images into its `images` (tags and digests; `name:latest` also as `name`). */
  async learn(host: DockerHost): Promise<void> {
    const list = (await host.engine.call('GET', '/images/json', { timeoutMs: LIST_TIMEOUT_MS })) as { RepoTags?: string[] | null; RepoDigests?: string[] | null }[];
    for (const image of list) {
      for (const name of [...(image.RepoTags ?? []), ...(image.RepoDigests ?? [])]) {
        if (name.startsWith('<none>')) continue;
        host.images.add(name);
        if (name.endsWith(':latest')) host.images.add(name.slice(0, -':latest'.length));
      }
    }
  }

  /** Pulls the image onto the host, joining a pull of it already running there. */
  private pull(host: DockerHost, want: ImageWant, onProgress?: (description: string) => void): Promise<void> {
    const key = `${host.config.name}\n${want.image}`;
    let pull = this.pulls.get(key);
    if (!pull) {
      const listeners = new Set<(description: string) => void>();
      const started: Pull = { listeners, last: 'pulling', done: Promise.resolve() };
      started.done = this.runPull(host, want, (description) => {
        started.last = description;
        for (const listener of listeners) listener(description);
      }).finally(() => this.pulls.delete(key));
      this.pulls.set(key, started);
      pull = started;
    }
    if (onProgress) {
      pull.listeners.add(onProgress);
      onProgress(pull.last);
    }
    const joined = pull;
    return joined.done.finally(() => {
      if (onProgress) joined.listeners.delete(onProgress);
    });
  }

  private async runPull(host: DockerHost, want: ImageWant, onProgress: (description: string) => void): Promise<void> {
    let login: RegistryLogin | undefined;
    if (want.registryCredentials !== undefined) {
      login = await this.options.registryLogin(want.registryCredentials);
      if (!login) throw new PullError(`pulling ${want.image} on Docker host ${host.config.name} failed: registry credential ${want.registryCredentials} no longer exists`);
    }
    const began = Date.now();
    this.options.logger.info({ host: host.config.name, image: want.image, registryCredentials: want.registryCredentials }, 'pulling an image');
    await pullImage({ engine: host.engine, host: host.config.name, image: want.image, login, onProgress, ...(this.options.pullStallMs ? { stallMs: this.options.pullStallMs } : {}) });
    host.images.add(want.image);
    this.options.logger.info({ host: host.config.name, image: want.image, ms: Date.now() - began }, 'image pulled');
  }
}
