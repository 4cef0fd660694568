/**
 * Where a new container goes (docs/scaling.md, multi-host placement). A pure function of the
 * hosts' state and the worker's GPU request:
 * - only hosts that are up, and that have the GPUs asked for free (a count: that many of its
 *   devices; ids: exactly those);
 * - a worker with GPUs is bin-packed: the host left with the fewest free GPUs after it, so
 *   whole machines stay free for workers that need many;
 * - then (and for workers without GPUs) spread: the host running the fewest of our
 *   containers; the order of the hosts in the settings breaks the last ties.
 */

/** What placement knows of one host. */
export interface HostLoad {
  name: string;
  /** False while the host is marked down (it stopped answering). */
  up: boolean;
  /** The host's GPU device ids, in order. */
  gpus: readonly string[];
  /** Device ids held by containers on it. */
  gpusInUse: ReadonlySet<string>;
  /** Containers of this gateway on it. */
  workers: number;
}

/** A worker's GPU request: a count, or exact device ids. */
export type GpuRequest = number | readonly string[];

/** Where the worker goes and which of the host's GPUs it gets. */
export interface Placement {
  host: string;
  deviceIds: string[];
}

/** Why no host fits, naming each host's state. */
export interface NoPlacement {
  refused: string;
}

function pick(host: HostLoad, request: GpuRequest): string[] | null {
  const free = host.gpus.filter((id) => !host.gpusInUse.has(id));
  if (typeof request === 'number') return free.length >= request ? free.slice(0, request) : null;
  return request.every((id) => free.includes(id)) ? [...request] : null;
}

function describe(host: HostLoad): string {
  if (!host.up) return `${host.name}: down`;
  return `${host.name}: ${host.gpus.length - host.gpusInUse.size} of ${host.gpus.length} GPUs free`;
}

/**
 * Picks a host and devices for a worker, or says why none fits.
 *
 * @example
 * placeWorker([{ name: 'a', up: true, gpus: ['0', '1'], gpusInUse: new Set(['0']), workers: 1 },
 *              { name: 'b', up: true, gpus: ['0', '1'], gpusInUse: new Set(), workers: 0 }], 1);
 * // → { host: 'a', deviceIds: ['1'] }: a is filled before b is touched
 */
export function placeWorker(hosts: readonly HostLoad[], request: GpuRequest): Placement | NoPlacement {
  const wanted = typeof request === 'number' ? request : request.length;
  let best: { host: HostLoad; ids: string[]; freeAfter: number; order: number } | null = null;
  for (const [order, host] of hosts.entries()) {
    if (!host.up) continue;
    const ids = pick(host, request);
    if (ids === null) continue;
    const freeAfter = wanted === 0 ? 0 : host.gpus.length - host.gpusInUse.size - ids.length;
    const better =
      best === null ||
      freeAfter < best.freeAfter ||
      (freeAfter === best.freeAfter && (host.workers < best.host.workers || (host.workers === best.host.workers && order < best.order)));
    if (better) best = { host, ids, freeAfter, order };
  }
  if (best) return { host: best.host.name, deviceIds: best.ids };
  if (hosts.length === 0) return { refused: 'no Docker host is configured (GANTRY_DOCKER_HOSTS)' };
  const what = typeof request === 'number' ? `${request} free GPU${request === 1 ? '' : 's'}` : `GPUs ${request.join(', ')} free`;
  const states = hosts.map(describe).join('; ');
  return { refused: hosts.some((h) => h.up) ? `no Docker host has ${what} (${states})` : `no Docker host is up (${states})` };
}
