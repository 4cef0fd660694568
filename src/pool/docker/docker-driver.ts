import { randomBytes } from 'node:crypto';
import { hostname } from 'node:os';
import type { Logger } from 'pino';
import type { DockerConfig, DockerHostConfig } from '../../config/docker-config.js';
import type { Clock } from '../../util/clock.js';
import type { PoolHostInfo } from '../../jobs/pool-view.js';
import type { RegistryLogin } from '../../security/registry-credentials.js';
import type { ContainerStartSpec, PrepullSpec, PrepullTarget, StartProgress, WorkerDriver, WorkerOutput } from '../driver.js';
import { containerCreateBody, LABELS } from './container-spec.js';
import { ContainerWorker } from './container-worker.js';
import { DockerHosts, type DockerHost, type Reservation } from './docker-hosts.js';
import { EngineError } from './engine-client.js';
import { HostImages } from './host-images.js';
import type { HostLoad } from './placement.js';
import { couldRun } from './prepull-hosts.js';

/** What the Docker driver is given. */
export interface DockerDriverOptions {
  config: DockerConfig;
  /** The label value of this installation's containers (config.docker.instance). */
  instance: string;
  /** GANTRY_PUBLIC_URL: the gateway as workers reach it, when set. */
  publicUrl: string | null;
  /** The gateway's own URL, known once it listens (for containers on a local engine). */
  localUrl(): string;
  /** The login of a saved registry credential, for pulls (default: none is known). */
  registryLogin?(id: string): Promise<RegistryLogin | undefined>;
  logger: Logger;
  clock: Clock;
}

/** The Docker driver: a WorkerDriver for container specs, with its hosts' view. */
export interface DockerDriver extends WorkerDriver<ContainerStartSpec> {
  hosts(): PoolHostInfo[];
  loads(): HostLoad[];
  close(): void;
}

/** Time limit of listing a host's containers. */
const LIST_TIMEOUT_MS = 10_000;
const START_TIMEOUT_MS = 120_000;

/**
 * Where a container on `host` reaches the gateway: the host's gatewayUrl, GANTRY_PUBLIC_URL,
 * or (a local engine) the gateway's port on the host: `host.docker.internal` mapped to the
 * bridge's address (`host-gateway`) on Docker; `host.containers.internal`, which Podman adds
 * itself (Podman 4 has no `host-gateway`); the gateway's own URL on the host network.
 */
function gatewayUrlFor(host: DockerHostConfig, publicUrl: string | null, localUrl: string, podman: boolean): { url: string; alias: boolean } {
  if (host.gatewayUrl) return { url: host.gatewayUrl, alias: false };
  if (publicUrl) return { url: publicUrl, alias: false };
  if (host.network === 'host') return { url: localUrl, alias: false };
  const port = new URL(localUrl).port || '80';
  if (podman) return { url: `http://host.containers.internal:${port}`, alias: false };
  return { url: `http://host.docker.internal:${port}`, alias: true };
}

/** A unix socket, or TCP or SSH to a loopback address: the engine runs where the gateway does. */
function onThisMachine(host: DockerHostConfig): boolean {
  if (host.url.startsWith('unix:')) return true;
  const name = new URL(host.url).hostname;
  return name === 'localhost' || name === '[::1]' || /^127\./.test(name);
}

/**
 * Runs workers as containers on Docker (or Podman) hosts, through the Engine API. Each start
 * places the worker (DockerHosts.reserve: a host with the GPUs it asks for, preferring one
 * that holds the image), pulls the image there when the host lacks it (HostImages: with the
 * endpoint's registry credential, progress told as `pulling 43%`), creates the container
 * (containerCreateBody: env, labels, limits, device request) and starts it; the handle
 * follows its logs into the worker's log ring and waits for its exit, then removes it.
 *
 * @example
 * const driver = createDockerDriver({ config: config.docker, instance: 'a1b2', publicUrl: null, localUrl: () => url, logger, clock });
 * const worker = await driver.start({ workerId: 'sd-1a2b3c4d', endpointId: 'sd', image: 'acme/sd:1', env: {}, runpod, gpus: 1 }, output);
 * await worker.stop(30_000);
 */
export function createDockerDriver(options: DockerDriverOptions): DockerDriver {
  for (const host of options.config.hosts) {
    if (!onThisMachine(host) && !host.gatewayUrl && !options.publicUrl) {
      throw new Error(`Docker host ${host.name} (${host.url}) is not on this machine: give it a gatewayUrl in GANTRY_DOCKER_HOSTS, or set GANTRY_PUBLIC_URL, so its containers can reach the gateway`);
    }
  }
  return new Driver(options);
}

class Driver implements DockerDriver {
  readonly kind = 'docker';
  /** Containers of this driver that have not exited, by full id. */
  private readonly live = new Map<string, ContainerWorker>();
  private readonly fleet: DockerHosts;
  private readonly gateway = `${hostname()} pid ${process.pid}`;
  private readonly logger: Logger;
  /** Which images each host holds, and the pulls onto them. */
  readonly images: HostImages;

  constructor(private readonly options: DockerDriverOptions) {
    const { config, logger } = options;
    this.logger = logger;
    this.images = new HostImages({ registryLogin: options.registryLogin ?? (() => Promise.resolve(undefined)), logger });
    this.fleet = new DockerHosts({
      hosts: config.hosts,
      quiet: config.defaultHost,
      pingIntervalMs: config.pingIntervalMs,
      downAfterMs: config.downAfterMs,
      onRecovered: (host) => void this.removeLeftovers(host, 0).catch((err: unknown) => logger.error({ err, host: host.config.name }, 'removing the lost containers of a recovered Docker host failed')),
      onUp: (host) => void this.images.learn(host).catch((err: unknown) => logger.warn({ err, host: host.config.name }, 'could not list the images of a Docker host')),
      logger,
      clock: options.clock,
    });
  }

  async start(spec: ContainerStartSpec, output: WorkerOutput, progress?: StartProgress): Promise<ContainerWorker> {
    this.fleet.startMonitor();
    const gpus = spec.gpus ?? 0;
    const reservation = this.fleet.reserve(spec.workerId, typeof gpus === 'number' ? { count: gpus, types: spec.gpuTypes, image: spec.image } : { ids: gpus, image: spec.image });
    try {
      return await this.createAndStart(spec, reservation, output, progress);
    } catch (err) {
      reservation.release();
      throw err;
    }
  }

  async reapOrphans(graceMs: number): Promise<number> {
    const counts = await Promise.all(
      this.fleet.list.map((host) =>
        this.removeLeftovers(host, graceMs).catch((err: unknown) => {
          if (!this.options.config.defaultHost) this.logger.warn({ err, host: host.config.name }, 'could not look for leftover containers on a Docker host');
          return 0;
        }),
      ),
    );
    return counts.reduce((a, b) => a + b, 0);
  }

  hosts(): PoolHostInfo[] {
    return this.fleet.views();
  }

  prepullTargets(spec: PrepullSpec): PrepullTarget[] {
    this.fleet.startMonitor();
    const want = { image: spec.image, ...(spec.registryCredentials ? { registryCredentials: spec.registryCredentials } : {}) };
    return this.fleet.list
      .filter((host) => host.state === 'up' && !host.images.has(spec.image) && couldRun(host.config, spec))
      .map((host) => ({ host: host.config.name, pull: async () => void (await this.images.ensure(host, want)) }));
  }

  loads(): HostLoad[] {
    return this.fleet.loads();
  }

  close(): void {
    this.fleet.close();
  }

  /** Our containers on a host that no live handle of this driver owns: stopped (SIGTERM, then SIGKILL after `graceMs`) and removed. */
  private async removeLeftovers(host: DockerHost, graceMs: number): Promise<number> {
    const { instance } = this.options;
    const filters = encodeURIComponent(JSON.stringify({ label: [`${LABELS.instance}=${instance}`] }));
    const list = (await host.engine.call('GET', `/containers/json?all=1&filters=${filters}`, { timeoutMs: LIST_TIMEOUT_MS })) as { Id: string; State?: string; Labels?: Record<string, string> }[];
    const leftovers = list.filter((c) => c.Labels?.[LABELS.instance] === instance && !this.live.has(c.Id));
    for (const c of leftovers) {
      this.logger.warn({ host: host.config.name, container: c.Id.slice(0, 12), workerId: c.Labels?.[LABELS.worker] }, 'stopping a worker container this gateway no longer runs');
      void this.stopAndRemove(host, c.Id, c.State === 'running' ? graceMs : 0);
    }
    return leftovers.length;
  }

  private async stopAndRemove(host: DockerHost, id: string, graceMs: number): Promise<void> {
    try {
      if (graceMs > 0) {
        await host.engine.call('POST', `/containers/${id}/kill?signal=SIGTERM`).catch(() => undefined);
        await host.engine.call('POST', `/containers/${id}/wait`, { timeoutMs: graceMs }).catch(() => undefined);
      }
      await host.engine.call('DELETE', `/containers/${id}?force=1&v=1`);
    } catch (err) {
      if (!(err instanceof EngineError && err.status === 404)) this.logger.error({ err, host: host.config.name, container: id.slice(0, 12) }, 'could not remove a leftover container');
    }
  }

  private async createAndStart(spec: ContainerStartSpec, reservation: Reservation, output: WorkerOutput, progress?: StartProgress): Promise<ContainerWorker> {
    const { host, deviceIds } = reservation;
    let engine: string;
    try {
      engine = await this.fleet.engineOf(host);
    } catch (err) {
      throw new Error(`Docker host ${host.config.name} does not say which engine it runs (GET /version): ${(err as Error).message}`, { cause: err });
    }
    const podman = /podman/i.test(engine);
    if (podman && deviceIds.length > 0) {
      // Podman's Docker-compatible API (4.x) accepts DeviceRequests and silently drops them: refuse rather than run a GPU worker without its GPU.
      throw new Error(`Docker host ${host.config.name} runs ${engine}, whose Docker-compatible API ignores GPU requests: list it without gpus, or use Docker with the NVIDIA Container Toolkit there`);
    }
    await this.images.ensure(host, { image: spec.image, ...(spec.registryCredentials ? { registryCredentials: spec.registryCredentials } : {}) }, progress);
    const target = gatewayUrlFor(host.config, this.options.publicUrl, this.options.localUrl(), podman);
    const body = containerCreateBody(spec, { host: host.config, deviceIds, gatewayUrl: target.url, hostGatewayAlias: target.alias, instance: this.options.instance, gateway: this.gateway });
    const name = `gantry-${spec.workerId}-${randomBytes(3).toString('hex')}`;
    let id: string;
    try {
      id = ((await host.engine.call('POST', `/containers/create?name=${encodeURIComponent(name)}`, { body })) as { Id: string }).Id;
    } catch (err) {
      if (err instanceof EngineError && err.status === 404) {
        host.images.delete(spec.image);
        throw new Error(`image ${spec.image} went from Docker host ${host.config.name} between its pull and the container's creation`, { cause: err });
      }
      throw new Error(`Docker host ${host.config.name}: creating the container failed: ${(err as Error).message}`, { cause: err });
    }
    try {
      await host.engine.call('POST', `/containers/${id}/start`, { timeoutMs: START_TIMEOUT_MS });
    } catch (err) {
      await host.engine.call('DELETE', `/containers/${id}?force=1&v=1`).catch(() => undefined);
      throw new Error(`Docker host ${host.config.name}: the container did not start: ${(err as Error).message}`, { cause: err });
    }
    const worker = new ContainerWorker({ id, host, deviceIds, output, checkHost: () => this.fleet.checkNow(host), release: () => reservation.release(), logger: this.logger });
    this.live.set(id, worker);
    // Still ours until removed: the leftover sweep leaves an exited container being removed alone.
    void worker.removed.then(() => this.live.delete(id));
    if (!reservation.attach(worker)) worker.lost(`Docker host ${host.config.name} was marked down while the container started`);
    return worker;
  }
}
