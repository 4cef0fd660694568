/**
 * Where a new container goes (docs/scaling.md, multi-host placement). A pure function of the
 * hosts' state and the worker's request:
 * - only hosts that are up, and that have the GPUs asked for free: a count of devices of one
 *   model, or exact device ids;
 * - GPU models in the endpoint's order of preference (`worker.gpuTypes`): a host with a
 *   preferred model free always wins over one with a later model; without `gpuTypes` any
 *   model does (the devices of one worker are always of one model);
 * - among those, hosts that already hold the image (no pull) first;
 * - then a worker with GPUs is bin-packed: the host left with the fewest free GPUs after it,
 *   so whole machines stay free for workers that need many;
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
  /** The model of each device in the order of `gpus` ("" where none is named); absent: none named. */
  gpuTypes?: readonly string[];
  /** Device ids held by containers on it. */
  gpusInUse: ReadonlySet<string>;
  /** Containers of this gateway on it. */
  workers: number;
  /** The images it holds, as endpoints name them; absent: not known. */
  images?: ReadonlySet<string>;
  /** Who holds the devices in use: worker id → device ids (the allocator's view); absent: not known. */
  holders?: ReadonlyMap<string, readonly string[]>;
}

/** A worker's request in full: a count of one model (in order of preference) or exact ids, and its image. */
export interface GpuAsk {
  /** How many GPUs (of one model); 0 or absent: none, unless `ids`. */
  count?: number;
  /** Exact device ids (models are then not looked at). */
  ids?: readonly string[];
  /** Acceptable models, most preferred first; absent or empty: any. */
  types?: readonly string[];
  /** The worker's image: hosts holding it are preferred. */
  image?: string;
}

/** A worker's GPU request: a count, exact device ids, or the full request. */
export type GpuRequest = number | readonly string[] | GpuAsk;

/** Where the worker goes and which of the host's GPUs it gets. */
export interface Placement {
  host: string;
  deviceIds: string[];
  /** The model of the devices given ("" where the host names none). */
  gpuType: string;
}

/** Why no host fits, naming each host's state; `fullTypes`: the models asked for that had no room. */
export interface NoPlacement {
  refused: string;
  fullTypes?: string[];
}

/** The label of a model in sentences: the name, or "GPU" where none is named. */
export const modelLabel = (type: string): string => (type === '' ? 'GPU' : type);

function askOf(request: GpuRequest): GpuAsk {
  if (typeof request === 'number') return { count: request };
  if (Array.isArray(request)) return { ids: request as readonly string[] };
  return request as GpuAsk;
}

/** The free devices of a host, grouped by model. */
function freeByType(host: HostLoad): Map<string, string[]> {
  const free = new Map<string, string[]>();
  for (const [i, id] of host.gpus.entries()) {
    if (host.gpusInUse.has(id)) continue;
    const type = host.gpuTypes?.[i] ?? '';
    const list = free.get(type);
    if (list) list.push(id);
    else free.set(type, [id]);
  }
  return free;
}

/** `count` free devices of `type` on a host, in device order, or null: one pass, nothing built for a host that has too few (the allocator asks this of thousands of hosts a decision). */
function pickOfType(host: HostLoad, count: number, type: string): { ids: string[]; type: string } | null {
  if (host.gpus.length - host.gpusInUse.size < count) return null;
  let ids: string[] | null = null;
  for (const [i, id] of host.gpus.entries()) {
    if ((host.gpuTypes?.[i] ?? '') !== type || host.gpusInUse.has(id)) continue;
    (ids ??= []).push(id);
    if (ids.length === count) return { ids, type };
  }
  return null;
}

/** The one model of all a host's devices, or null where it has several (most hosts have one). */
function singleModel(host: HostLoad): string | null {
  const first = host.gpuTypes?.[0] ?? '';
  for (let i = 1; i < host.gpus.length; i++) if ((host.gpuTypes?.[i] ?? '') !== first) return null;
  return first;
}

/** The devices a host can give `count` GPUs from: of the model with the fewest free that fits. */
function pickCount(free: Map<string, string[]>, count: number): { ids: string[]; type: string } | null {
  let best: { ids: string[]; type: string; left: number } | null = null;
  for (const [t, list] of free) {
    if (list.length >= count && (best === null || list.length - count < best.left)) best = { ids: list.slice(0, count), type: t, left: list.length - count };
  }
  return best;
}

interface Candidate {
  host: HostLoad;
  ids: string[];
  type: string;
  hasImage: boolean;
  freeAfter: number;
  order: number;
}

function better(a: Candidate, b: Candidate | null): boolean {
  if (b === null) return true;
  if (a.hasImage !== b.hasImage) return a.hasImage;
  if (a.freeAfter !== b.freeAfter) return a.freeAfter < b.freeAfter;
  if (a.host.workers !== b.host.workers) return a.host.workers < b.host.workers;
  return a.order < b.order;
}

/** What a host can give the request: exact ids, none (no GPUs asked), or a count of `type` (null: any model). */
function fit(host: HostLoad, ask: GpuAsk, type: string | null | undefined): { ids: string[]; type: string } | null {
  if (ask.ids) {
    const free = ask.ids.every((id) => host.gpus.includes(id) && !host.gpusInUse.has(id));
    return free ? { ids: [...ask.ids], type: host.gpuTypes?.[host.gpus.indexOf(ask.ids[0] ?? '')] ?? '' } : null;
  }
  if (!ask.count) return { ids: [], type: '' };
  if (type !== null && type !== undefined) return pickOfType(host, ask.count, type);
  if (host.gpus.length - host.gpusInUse.size < ask.count) return null;
  const only = singleModel(host);
  return only !== null ? pickOfType(host, ask.count, only) : pickCount(freeByType(host), ask.count);
}

/** The best host for the request with devices of `type` (null: any model; undefined: exact ids or none). */
function bestFor(hosts: readonly HostLoad[], ask: GpuAsk, type: string | null | undefined): Candidate | null {
  let best: Candidate | null = null;
  for (const [order, host] of hosts.entries()) {
    if (!host.up) continue;
    const got = fit(host, ask, type);
    if (got === null) continue;
    const freeAfter = got.ids.length === 0 ? 0 : host.gpus.length - host.gpusInUse.size - got.ids.length;
    const candidate = { host, ids: got.ids, type: got.type, hasImage: ask.image !== undefined && host.images?.has(ask.image) === true, freeAfter, order };
    if (better(candidate, best)) best = candidate;
  }
  return best;
}

function describe(host: HostLoad, types: readonly string[] | undefined): string {
  if (!host.up) return `${host.name}: down`;
  if (!types || types.length === 0) return `${host.name}: ${host.gpus.length - host.gpusInUse.size} of ${host.gpus.length} GPUs free`;
  const parts: string[] = [];
  for (const type of types) {
    const total = host.gpus.filter((_, i) => (host.gpuTypes?.[i] ?? '') === type);
    if (total.length > 0) parts.push(`${total.filter((id) => !host.gpusInUse.has(id)).length} of ${total.length} ${modelLabel(type)} free`);
  }
  return `${host.name}: ${parts.length > 0 ? parts.join(', ') : `no ${types.map(modelLabel).join(' or ')}`}`;
}

function refusal(hosts: readonly HostLoad[], ask: GpuAsk): NoPlacement {
  if (hosts.length === 0) return { refused: 'no Docker host is configured (GANTRY_DOCKER_HOSTS)' };
  const types = ask.ids ? undefined : ask.types;
  const states = hosts.map((h) => describe(h, types)).join('; ');
  if (!hosts.some((h) => h.up)) return { refused: `no Docker host is up (${states})` };
  const count = ask.count ?? 0;
  let what: string;
  if (ask.ids) what = `GPUs ${ask.ids.join(', ')} free`;
  else if (types && types.length > 0) what = `${count} free ${types.map(modelLabel).join(' or ')} GPU${count === 1 ? '' : 's'}`;
  else what = `${count} free GPU${count === 1 ? '' : 's'}`;
  return { refused: `no Docker host has ${what} (${states})`, ...(types && types.length > 0 ? { fullTypes: [...types] } : {}) };
}

/**
 * Picks a host and devices for a worker, or says why none fits (naming the models that were full).
 *
 * @example
 * placeWorker([{ name: 'a', up: true, gpus: ['0', '1'], gpusInUse: new Set(['0']), workers: 1 },
 *              { name: 'b', up: true, gpus: ['0', '1'], gpusInUse: new Set(), workers: 0 }], 1);
 * // → { host: 'a', deviceIds: ['1'], gpuType: '' }: a is filled before b is touched
 */
export function placeWorker(hosts: readonly HostLoad[], request: GpuRequest): Placement | NoPlacement {
  const ask = askOf(request);
  let order: readonly (string | null | undefined)[] = [undefined];
  if (!ask.ids && ask.count) order = ask.types && ask.types.length > 0 ? ask.types : [null];
  for (const type of order) {
    const best = bestFor(hosts, ask, type);
    if (best) return { host: best.host.name, deviceIds: best.ids, gpuType: best.type };
  }
  return refusal(hosts, ask);
}
