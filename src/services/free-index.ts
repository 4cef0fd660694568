import { placeWorker, type HostLoad } from '../pool/docker/placement.js';

/**
 * The free GPUs of a fleet during one allocator decision (allocator.ts), indexed so that a
 * request finds the host placement would choose without scanning the fleet: placeWorker
 * (pool/docker/placement.ts) over all hosts picks, per acceptable model in order, among the
 * hosts with room, those holding the image first, then the fewest GPUs free (bin-packing),
 * then the fewest workers, then the order of the settings. Hosts here are kept in buckets by
 * (model, GPUs free in all, GPUs free of that model), each bucket a heap by (workers, order),
 * so the first bucket with room holds placement's choice.
 *
 * Invariants: a decision only ever takes free devices (grants, and room held for a reclaim),
 * never frees one, so a host without free devices at the start never enters the index; the
 * input hosts are never written to (devices taken are kept in `taken`).
 */

/** Acceptable for a request that names no model: any one model of the host. */
export const ANY_MODEL = '\u0000any';
const ANY_MODELS: readonly string[] = [ANY_MODEL];

/** One host during a decision. */
export interface HostState {
  load: HostLoad;
  /** Its place in the settings (placement's last tie-break). */
  order: number;
  /** Devices taken in this decision, on top of load.gpusInUse. */
  taken: Set<string> | null;
  /** Free devices now, in all and per model. */
  free: number;
  freeOf: Map<string, number>;
  /** Containers on it, counting those granted in this decision. */
  workers: number;
  /** Bumped on every change: heap entries of an older version are stale. */
  version: number;
  /** The indexes it is in (the fleet's, and those of the images it holds). */
  indexes: FitIndex[];
}

/** A host filed in a bucket, with its key as it was then (a stale entry keeps its old key: the heap stays sound). */
interface Entry {
  host: HostState;
  version: number;
  workers: number;
}

/** Whether `a` is placement's choice over `b` among hosts of one bucket (same room). */
function ahead(a: Entry, b: Entry): boolean {
  return a.workers !== b.workers ? a.workers < b.workers : a.host.order < b.host.order;
}

/** A heap of hosts by (workers, order), stale entries dropped as they surface. */
class Bucket {
  private readonly items: Entry[] = [];

  push(e: Entry): void {
    const a = this.items;
    a.push(e);
    for (let i = a.length - 1; i > 0; ) {
      const p = (i - 1) >> 1;
      if (!ahead(a[i]!, a[p]!)) break;
      [a[i], a[p]] = [a[p]!, a[i]!];
      i = p;
    }
  }

  /** The first current entry, or null. */
  peek(): Entry | null {
    const a = this.items;
    while (a.length > 0 && a[0]!.version !== a[0]!.host.version) this.popTop();
    return a[0] ?? null;
  }

  private popTop(): void {
    const a = this.items;
    const last = a.pop()!;
    if (a.length === 0) return;
    a[0] = last;
    for (let i = 0; ; ) {
      const l = 2 * i + 1;
      const r = l + 1;
      let m = i;
      if (l < a.length && ahead(a[l]!, a[m]!)) m = l;
      if (r < a.length && ahead(a[r]!, a[m]!)) m = r;
      if (m === i) break;
      [a[i], a[m]] = [a[m]!, a[i]!];
      i = m;
    }
  }
}

/** Hosts with free devices by model (or ANY_MODEL), GPUs free in all, and GPUs free of that model. */
export class FitIndex {
  private readonly byModel = new Map<string, (Bucket | undefined)[][]>();

  /** Files a host (again) under its current state; entries of its older versions go stale. */
  add(host: HostState): void {
    let most = 0;
    // forEach: no entry pair made per model.
    host.freeOf.forEach((n, model) => {
      if (n > most) most = n;
      if (n > 0) this.file(model, host, n);
    });
    if (most > 0) this.file(ANY_MODEL, host, most);
  }

  private file(model: string, host: HostState, fit: number): void {
    let grid = this.byModel.get(model);
    if (!grid) this.byModel.set(model, (grid = []));
    const row = (grid[host.free] ??= []);
    (row[fit] ??= new Bucket()).push({ host, version: host.version, workers: host.workers });
  }

  /** Placement's choice among these hosts for `count` devices of `model`, or null. */
  best(model: string, count: number): HostState | null {
    const grid = this.byModel.get(model);
    if (!grid) return null;
    for (let free = count; free < grid.length; free++) {
      const row = grid[free];
      if (!row) continue;
      let best: Entry | null = null;
      for (let fit = count; fit < row.length; fit++) {
        const top = row[fit]?.peek() ?? null;
        if (top && (best === null || ahead(top, best))) best = top;
      }
      if (best) return best.host;
    }
    return null;
  }
}

/** The fleet's free devices during one decision: host states made on first use, the placement index, totals by model. */
export class FreeDevices {
  readonly hosts: readonly HostLoad[];
  private readonly states: (HostState | undefined)[];
  private readonly index = new FitIndex();
  private readonly byImage = new Map<string, FitIndex>();
  /** Hosts that had free devices at the start (those any index may hold). */
  private readonly roomy: HostState[] = [];
  /** Free devices on hosts that are up, in all and by model. */
  total = 0;
  private readonly totalOf = new Map<string, number>();

  constructor(hosts: readonly HostLoad[]) {
    this.hosts = hosts;
    this.states = new Array<HostState | undefined>(hosts.length);
    for (let i = 0; i < hosts.length; i++) {
      const load = hosts[i]!;
      if (!load.up || load.gpus.length - load.gpusInUse.size <= 0) continue;
      const host = this.state(i);
      if (host.free <= 0) continue;
      this.roomy.push(host);
      this.total += host.free;
      host.freeOf.forEach((n, model) => this.totalOf.set(model, (this.totalOf.get(model) ?? 0) + n));
      host.indexes.push(this.index);
      this.index.add(host);
    }
  }

  /** Free devices of a model on hosts that are up. */
  freeOfModel(model: string): number {
    return this.totalOf.get(model) ?? 0;
  }

  /** A host's state during this decision, made on first use. */
  state(i: number): HostState {
    let host = this.states[i];
    if (host) return host;
    const load = this.hosts[i]!;
    const freeOf = new Map<string, number>();
    let free = 0;
    if (load.gpus.length > load.gpusInUse.size) {
      for (let k = 0; k < load.gpus.length; k++) {
        if (load.gpusInUse.has(load.gpus[k]!)) continue;
        const model = load.gpuTypes?.[k] ?? '';
        freeOf.set(model, (freeOf.get(model) ?? 0) + 1);
        free++;
      }
    }
    host = { load, order: i, taken: null, free, freeOf, workers: load.workers, version: 0, indexes: [] };
    this.states[i] = host;
    return host;
  }

  /**
   * Places one worker as placeWorker over the whole fleet would (models in order, then hosts
   * holding the image, then bin-packing), takes its devices, and says where; null: no room.
   */
  place(count: number, models: readonly string[] | null, image: string | undefined): { host: number; deviceIds: string[]; gpuType: string } | null {
    const list = models ?? ANY_MODELS;
    for (let i = 0; i < list.length; i++) {
      const model = list[i]!;
      const host = (image !== undefined ? this.imageIndex(image).best(model, count) : null) ?? this.index.best(model, count);
      if (!host) continue;
      const placed = this.devicesOn(host, count, model, image);
      if (!placed) continue;
      host.workers++;
      this.take(host, placed.deviceIds, placed.gpuType);
      return { host: host.order, deviceIds: placed.deviceIds, gpuType: placed.gpuType };
    }
    return null;
  }

  /**
   * The devices placement gives on the chosen host. Where only one model is free there, or a
   * model is named, they are the first free ones of it in device order (placement's pickOfType),
   * taken here without a copy of the host; otherwise placement itself is asked of that host alone.
   */
  private devicesOn(host: HostState, count: number, model: string, image: string | undefined): { deviceIds: string[]; gpuType: string } | null {
    let only: string | null = model !== ANY_MODEL ? model : null;
    if (only === null && host.freeOf.size === 1) only = host.freeOf.keys().next().value!;
    if (only === null) {
      const placed = placeWorker([this.view(host)], { count, ...(image !== undefined ? { image } : {}) });
      return 'refused' in placed ? null : placed;
    }
    const { load } = host;
    const ids: string[] = [];
    for (let k = 0; k < load.gpus.length && ids.length < count; k++) {
      const id = load.gpus[k]!;
      if ((load.gpuTypes?.[k] ?? '') === only && !load.gpusInUse.has(id) && !host.taken?.has(id)) ids.push(id);
    }
    return ids.length === count ? { deviceIds: ids, gpuType: only } : null;
  }

  /** Free devices of `model` on a host now. */
  freeOn(i: number, model: string): number {
    return this.state(i).freeOf.get(model) ?? 0;
  }

  /** Takes up to `count` free devices of `model` on a host (room held for a reclaim). */
  hold(i: number, model: string, count: number): void {
    if (count <= 0) return;
    const host = this.state(i);
    const { load } = host;
    const ids: string[] = [];
    for (let k = 0; k < load.gpus.length; k++) {
      const id = load.gpus[k]!;
      if (ids.length === count) break;
      if ((load.gpuTypes?.[k] ?? '') === model && !load.gpusInUse.has(id) && !host.taken?.has(id)) ids.push(id);
    }
    this.take(host, ids, model);
  }

  /** The hosts as they stand now in this decision (for the words of a small fleet's reasons). */
  views(): HostLoad[] {
    return this.hosts.map((_, i) => this.view(this.state(i)));
  }

  private view(host: HostState): HostLoad {
    const inUse = host.taken ? new Set([...host.load.gpusInUse, ...host.taken]) : host.load.gpusInUse;
    return { ...host.load, gpusInUse: inUse, workers: host.workers };
  }

  private take(host: HostState, ids: readonly string[], model: string): void {
    if (ids.length === 0) return;
    host.taken ??= new Set();
    for (let i = 0; i < ids.length; i++) host.taken.add(ids[i]!);
    host.free -= ids.length;
    host.freeOf.set(model, (host.freeOf.get(model) ?? 0) - ids.length);
    if (host.load.up) {
      this.total -= ids.length;
      this.totalOf.set(model, (this.totalOf.get(model) ?? 0) - ids.length);
    }
    host.version++;
    for (let i = 0; i < host.indexes.length; i++) host.indexes[i]!.add(host);
  }

  /** The hosts holding an image that had room at the start, indexed (made on first ask). */
  private imageIndex(image: string): FitIndex {
    let index = this.byImage.get(image);
    if (index) return index;
    index = new FitIndex();
    this.byImage.set(image, index);
    for (const host of this.roomy) {
      if (host.free <= 0 || host.load.images?.has(image) !== true) continue;
      host.indexes.push(index);
      index.add(host);
    }
    return index;
  }
}
