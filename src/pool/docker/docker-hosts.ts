import type { Logger } from 'pino';
import type { DockerHostConfig } from '../../config/docker-config.js';
import type { Clock } from '../../util/clock.js';
import type { PoolHostInfo } from '../../jobs/pool-view.js';
import { NoCapacityError } from '../driver.js';
import { createEngineClient, type EngineClient } from './engine-client.js';
import { modelLabel, placeWorker, type GpuAsk, type HostLoad } from './placement.js';

/** A container this gateway runs on a host: what it holds, and how to end it when the host is lost. */
export interface HostedWorker {
  deviceIds: string[];
  /** Called once when the host is marked down: the worker counts as gone (its jobs are requeued). */
  lost(detail: string): void;
}

/** One Docker host: its engine, health and the containers this gateway placed there. */
export interface DockerHost {
  readonly config: DockerHostConfig;
  readonly engine: EngineClient;
  state: 'up' | 'down' | 'unknown';
  lastSeenAt: number | null;
  /** Since when checks have failed without a pause; null while it answers. */
  failingSince: number | null;
  error: string | null;
  engineName: string | null;
  /** The engine's name, asked once it answers (Podman needs other settings than Docker). */
  identified: Promise<string> | null;
  readonly workers: Map<string, HostedWorker>;
  /** The images it holds (tags and digests as endpoints name them), as last listed or pulled. */
  readonly images: Set<string>;
  /**
   * Why its engine cannot pause containers (no cgroup freezer: e.g. Podman on cgroups v2
   * without the freezer controller, or rootless on cgroups v1), learnt from its first refusal;
   * null while not known to refuse. Flashboot's warm pool then stops idle workers there instead
   * (container-worker.ts). Forgotten when the host comes back after being down.
   */
  pauseRefused: string | null;
}

/** A host and devices held for a worker being started; `release` gives them back (start failed, or the worker ended). */
export interface Reservation {
  host: DockerHost;
  deviceIds: string[];
  /** Records the started worker under the reservation, so a lost host can end it; false when the host was lost meanwhile. */
  attach(worker: HostedWorker): boolean;
  release(): void;
}

/** What the host set is given. */
export interface DockerHostsOptions {
  hosts: DockerHostConfig[];
  /** Quiet about a host that never answered (the default host, where Docker may not be installed). */
  quiet: boolean;
  pingIntervalMs: number;
  downAfterMs: number;
  /** Called when a host that was down answers again (to remove what it still runs of ours). */
  onRecovered(host: DockerHost): void;
  /** Called when a host answers for the first time, or again after it was down (to list its images). */
  onUp?(host: DockerHost): void;
  logger: Logger;
  clock: Clock;
}

const errorText = (err: unknown): string => (err instanceof Error ? err.message : String(err));

/**
 * The Docker hosts of the pool: health checks, placement and the GPUs held on each.
 *
 * Health: every `pingIntervalMs` each host gets `GET /_ping`. A host that has not answered
 * for `downAfterMs` is marked **down**: every container of ours there counts as lost at once
 * (`lost`, so the pool requeues its jobs and revokes its key, and places a replacement
 * elsewhere), and its GPUs are freed. When it answers again it is up, and `onRecovered`
 * removes what it still runs of ours (those workers were replaced).
 */
export class DockerHosts {
  readonly list: DockerHost[];
  private readonly byName = new Map<string, DockerHost>();
  /** Each host's load as last given (loads() gives it again while nothing changed). */
  private readonly lastLoad = new WeakMap<DockerHost, HostLoad>();
  private cancelTimer: (() => void) | undefined;
  private monitoring = false;
  private checking: Promise<void> | undefined;
  private monitorSince = 0;

  constructor(private readonly options: DockerHostsOptions) {
    this.list = options.hosts.map((config) => ({
      config,
      engine: createEngineClient(config),
      state: 'unknown',
      lastSeenAt: null,
      failingSince: null,
      error: null,
      engineName: null,
      identified: null,
      workers: new Map(),
      images: new Set<string>(),
      pauseRefused: null,
    }));
    for (const host of this.list) this.byName.set(host.config.name, host);
  }

  get(name: string): DockerHost | undefined {
    return this.byName.get(name);
  }

  /** Starts the health checks (idempotent); the first runs at once. */
  startMonitor(): void {
    if (this.monitoring) return;
    this.monitoring = true;
    this.monitorSince = this.options.clock.now();
    this.tick();
  }

  /** Stops the health checks and ends idle connections. */
  close(): void {
    this.monitoring = false;
    this.cancelTimer?.();
    for (const host of this.list) host.engine.close();
  }

  /**
   * Picks a host for a worker (docs/scaling.md: bin-packing, then spreading) and holds the
   * devices for it. Throws NoCapacityError naming each host's state when none fits.
   */
  reserve(workerId: string, request: GpuAsk): Reservation {
    const placed = placeWorker(this.loads(), request);
    if ('refused' in placed) throw new NoCapacityError(placed.refused);
    const host = this.byName.get(placed.host)!;
    let current: HostedWorker = { deviceIds: placed.deviceIds, lost: () => {} };
    host.workers.set(workerId, current);
    return {
      host,
      deviceIds: placed.deviceIds,
      attach: (worker) => {
        if (host.workers.get(workerId) !== current) return false;
        host.workers.set(workerId, worker);
        current = worker;
        return true;
      },
      release: () => {
        if (host.workers.get(workerId) === current) host.workers.delete(workerId);
      },
    };
  }

  /**
   * What placement knows of each host. A host whose workers and state have not changed since
   * the last call gives the same (read-only) object again: the autoscaler asks every pass, and
   * a fleet of 10,000 GPUs rebuilt each time was megabytes of garbage beside the allocator.
   */
  loads(): HostLoad[] {
    return this.list.map((h) => {
      const up = h.state !== 'down';
      const last = this.lastLoad.get(h);
      if (last && last.up === up && sameHolders(last.holders!, h.workers)) return last;
      const load: HostLoad = {
        name: h.config.name,
        up,
        gpus: h.config.gpus,
        gpuTypes: h.config.gpuTypes,
        gpusInUse: new Set([...h.workers.values()].flatMap((w) => w.deviceIds)),
        workers: h.workers.size,
        images: h.images,
        holders: new Map([...h.workers].map(([id, w]) => [id, w.deviceIds])),
      };
      this.lastLoad.set(h, load);
      return load;
    });
  }

  /** The hosts as the admin API shows them. */
  views(): PoolHostInfo[] {
    return this.list.map((h) => {
      return {
        name: h.config.name,
        url: h.config.url,
        state: h.state,
        gpus: h.config.gpus.length,
        gpusInUse: [...h.workers.values()].reduce((n, w) => n + w.deviceIds.length, 0),
        gpuTypes: gpuTypeCounts(h),
        workers: h.workers.size,
        error: h.state === 'up' ? null : h.error,
        lastSeenAt: h.lastSeenAt,
        engine: h.engineName,
      };
    });
  }

  /**
   * The engine's name (`Docker Engine 20.10.24`, `Podman Engine 4.3.1`), asked once (GET
   * /version). Rejects while it cannot be asked: containers are only created once it is known.
   */
  engineOf(host: DockerHost): Promise<string> {
    host.identified ??= engineName(host.engine).then(
      (name) => (host.engineName = name),
      (err: unknown) => {
        host.identified = null; // ask again next time
        throw err;
      },
    );
    return host.identified;
  }

  /** Checks one host now (a call to it failed): the same rules as the periodic check. */
  checkNow(host: DockerHost): Promise<void> {
    return this.check(host);
  }

  private tick(): void {
    if (!this.monitoring) return;
    this.checking = Promise.all(this.list.map((h) => this.check(h))).then(() => {
      this.checking = undefined;
      if (this.monitoring) this.cancelTimer = this.options.clock.after(this.options.pingIntervalMs, () => this.tick());
    });
  }

  private async check(host: DockerHost): Promise<void> {
    const timeoutMs = Math.max(500, Math.min(5_000, Math.floor(this.options.downAfterMs / 2)));
    try {
      await host.engine.call('GET', '/_ping', { timeoutMs });
      if (host.engineName === null) await this.engineOf(host).catch(() => null);
      this.answered(host);
    } catch (err) {
      this.failed(host, errorText(err));
    }
  }

  private answered(host: DockerHost): void {
    const was = host.state;
    host.state = 'up';
    host.lastSeenAt = this.options.clock.now();
    host.failingSince = null;
    host.error = null;
    if (was === 'down') {
      host.pauseRefused = null;
      this.options.logger.warn({ host: host.config.name }, 'Docker host answers again');
      this.options.onRecovered(host);
    } else if (was === 'unknown') this.options.logger.info({ host: host.config.name, engine: host.engineName }, 'Docker host up');
    if (was !== 'up') this.options.onUp?.(host);
  }

  private failed(host: DockerHost, error: string): void {
    const now = this.options.clock.now();
    host.error = error;
    host.failingSince ??= now;
    const silentSince = host.lastSeenAt ?? this.monitorSince;
    if (host.state === 'down' || now - Math.max(silentSince, host.failingSince) < this.options.downAfterMs) return;
    host.state = 'down';
    const detail = `Docker host ${host.config.name} stopped answering (${error})`;
    if (!this.options.quiet || host.lastSeenAt !== null) this.options.logger.error({ host: host.config.name, error, workers: host.workers.size }, 'Docker host down: its workers count as lost');
    const workers = [...host.workers.values()];
    host.workers.clear();
    for (const worker of workers) worker.lost(detail);
  }
}

/** Whether a load's holders are still the host's workers: the same ids holding the same device lists. */
function sameHolders(holders: ReadonlyMap<string, readonly string[]>, workers: ReadonlyMap<string, HostedWorker>): boolean {
  if (holders.size !== workers.size) return false;
  let same = true;
  workers.forEach((w, id) => {
    if (same && holders.get(id) !== w.deviceIds) same = false;
  });
  return same;
}

/** `Docker Engine 20.10.24`, `Podman Engine 4.3.1`: from GET /version. */
async function engineName(engine: EngineClient): Promise<string> {
  const v = (await engine.call('GET', '/version')) as { Version?: string; Components?: { Name?: string; Version?: string }[] };
  const component = v.Components?.find((c) => /engine/i.test(c.Name ?? ''));
  // Docker calls its component just "Engine"; Podman says "Podman Engine".
  const name = !component?.Name || component.Name === 'Engine' ? 'Docker Engine' : component.Name;
  return `${name} ${component?.Version ?? v.Version ?? '?'}`;
}

/** Per GPU model of a host (unnamed ones as "GPU"): how many devices, and how many in use. */
function gpuTypeCounts(host: DockerHost): Record<string, { gpus: number; inUse: number }> {
  const inUse = new Set([...host.workers.values()].flatMap((w) => w.deviceIds));
  const counts: Record<string, { gpus: number; inUse: number }> = {};
  for (const [i, id] of host.config.gpus.entries()) {
    const c = (counts[modelLabel(host.config.gpuTypes[i] ?? '')] ??= { gpus: 0, inUse: 0 });
    c.gpus++;
    if (inUse.has(id)) c.inUse++;
  }
  return counts;
}
