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
 * Models are numbered per decision as they are met; a host's free devices are counted per
 * model in a small array, and the devices taken in the decision are marked by their place in
 * one array for the whole fleet (reused by the next decision): no `Map` or `Set` per host,
 * which at 10,000 GPUs were ~150 KB of garbage a decision.
 *
 * Invariants: a decision only ever takes free devices (grants, and room held for a reclaim),
 * never frees one, so a host without free devices at the start never enters the index; the
 * input hosts are never written to (devices taken are marked in `taken`).
 */

/** Acceptable for a request that names no model: any one model of the host. */
export const ANY_MODEL = '\u0000any';
const ANY_MODELS: readonly string[] = [ANY_MODEL];
/** The model number of ANY_MODEL in the index. */
const ANY = -1;

/** One host during a decision. */
interface HostState {
  load: HostLoad;
  /** Its place in the settings (placement's last tie-break). */
  order: number;
  /** Where its devices' marks start in the decision's `taken` (devices in the order of load.gpus). */
  base: number;
  /** Free devices now, in all and per model number (0 or absent: none). */
  free: number;
  freeOf: number[];
  /** How many models it had free devices of at the start, and the first of them met (-1: none). */
  models: number;
  first: number;
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

/** Buckets by GPUs free in all, then by GPUs free of the model. */
type Grid = (Bucket | undefined)[][];

/** Hosts with free devices by model number (or ANY), GPUs free in all, and GPUs free of that model. */
class FitIndex {
  private readonly grids: (Grid | undefined)[] = [];
  private anyGrid: Grid | undefined;

  /** Files a host (again) under its current state; entries of its older versions go stale. */
  add(host: HostState): void {
    let most = 0;
    const { freeOf } = host;
    for (let m = 0; m < freeOf.length; m++) {
      const n = freeOf[m] ?? 0;
      if (n > most) most = n;
      if (n > 0) this.file(m, host, n);
    }
    if (most > 0) this.file(ANY, host, most);
  }

  private file(model: number, host: HostState, fit: number): void {
    let grid = model === ANY ? this.anyGrid : this.grids[model];
    if (!grid) {
      grid = [];
      if (model === ANY) this.anyGrid = grid;
      else this.grids[model] = grid;
    }
    const row = (grid[host.free] ??= []);
    (row[fit] ??= new Bucket()).push({ host, version: host.version, workers: host.workers });
  }

  /** Placement's choice among these hosts for `count` devices of model number `model` (or ANY), or null. */
  best(model: number, count: number): HostState | null {
    const grid = model === ANY ? this.anyGrid : this.grids[model];
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

/** The marks of devices taken, reused by the next decision (decisions run one at a time); cleared where used. */
let spareTaken: Uint8Array = new Uint8Array(0);

/** The fleet's free devices during one decision: host states made on first use, the placement index, totals by model. */
export class FreeDevices {
  readonly hosts: readonly HostLoad[];
  private readonly states: (HostState | undefined)[];
  private readonly index = new FitIndex();
  private readonly byImage = new Map<string, FitIndex>();
  /** Hosts that had free devices at the start (those any index may hold). */
  private readonly roomy: HostState[] = [];
  /** Free devices on hosts that are up, in all and by model number. */
  total = 0;
  private readonly totalOf: number[] = [];
  /** The models met, numbered in the order met (free devices only: a model with none free is never asked of the index). */
  private readonly modelNo = new Map<string, number>();
  private readonly modelName: string[] = [];
  /** Each device taken in this decision marked 1, at its host's `base` + its place on the host. */
  private taken: Uint8Array;
  /** The marks handed out so far (the next host's base). */
  private marks = 0;
  /** Devices picked by the last place or hold, by their place on the host (reused). */
  private picked = new Int32Array(8);

  constructor(hosts: readonly HostLoad[]) {
    this.hosts = hosts;
    this.states = new Array<HostState | undefined>(hosts.length);
    this.taken = spareTaken;
    for (let i = 0; i < hosts.length; i++) {
      const load = hosts[i]!;
      if (!load.up || load.gpus.length - load.gpusInUse.size <= 0) continue;
      const host = this.state(i);
      if (host.free <= 0) continue;
      this.roomy.push(host);
      this.total += host.free;
      for (let m = 0; m < host.freeOf.length; m++) this.totalOf[m] = (this.totalOf[m] ?? 0) + (host.freeOf[m] ?? 0);
      host.indexes.push(this.index);
      this.index.add(host);
    }
  }

  /** Free devices of a model on hosts that are up. */
  freeOfModel(model: string): number {
    const m = this.modelNo.get(model);
    return m === undefined ? 0 : (this.totalOf[m] ?? 0);
  }

  /** A host's state during this decision, made on first use (its marks cleared). */
  private state(i: number): HostState {
    let host = this.states[i];
    if (host) return host;
    const load = this.hosts[i]!;
    const freeOf: number[] = [];
    let free = 0;
    let models = 0;
    let first = -1;
    if (load.gpus.length > load.gpusInUse.size) {
      for (let k = 0; k < load.gpus.length; k++) {
        if (load.gpusInUse.has(load.gpus[k]!)) continue;
        const m = this.numberOf(load.gpuTypes?.[k] ?? '');
        while (freeOf.length <= m) freeOf.push(0);
        if (freeOf[m] === 0 && models++ === 0) first = m;
        freeOf[m]!++;
        free++;
      }
    }
    const base = this.marks;
    this.marks += load.gpus.length;
    if (this.taken.length < this.marks) spareTaken = this.taken = grown(this.taken, this.marks);
    this.taken.fill(0, base, this.marks);
    host = { load, order: i, base, free, freeOf, models, first, workers: load.workers, version: 0, indexes: [] };
    this.states[i] = host;
    return host;
  }

  /** The number of a model, given on first meeting. */
  private numberOf(model: string): number {
    let m = this.modelNo.get(model);
    if (m === undefined) {
      this.modelNo.set(model, (m = this.modelName.length));
      this.modelName.push(model);
    }
    return m;
  }

  /**
   * Places one worker as placeWorker over the whole fleet would (models in order, then hosts
   * holding the image, then bin-packing), takes its devices, and says of which model they
   * are (`count` of them); null: no room.
   */
  place(count: number, models: readonly string[] | null, image: string | undefined): string | null {
    const list = models ?? ANY_MODELS;
    for (let i = 0; i < list.length; i++) {
      const model = list[i]!;
      const m = model === ANY_MODEL ? ANY : this.modelNo.get(model);
      if (m === undefined) continue;
      const host = (image !== undefined ? this.imageIndex(image).best(m, count) : null) ?? this.index.best(m, count);
      if (!host) continue;
      const got = this.devicesOn(host, count, m, image);
      if (got === null) continue;
      host.workers++;
      this.take(host, count, got);
      return this.modelName[got]!;
    }
    return null;
  }

  /**
   * The devices placement gives on the chosen host, into `picked` (their places on the host),
   * and their model number; null: none. Where only one model is free there, or a model is
   * named, they are the first free ones of it in device order (placement's pickOfType), found
   * without a copy of the host; otherwise placement itself is asked of that host alone.
   */
  private devicesOn(host: HostState, count: number, model: number, image: string | undefined): number | null {
    let only = model;
    if (only === ANY && host.models === 1) only = host.first;
    if (only === ANY) {
      const placed = placeWorker([this.view(host)], { count, ...(image !== undefined ? { image } : {}) });
      if ('refused' in placed) return null;
      const picked = this.pickedFor(count);
      for (let i = 0; i < count; i++) picked[i] = host.load.gpus.indexOf(placed.deviceIds[i]!);
      return this.numberOf(placed.gpuType);
    }
    return this.pick(host, only, count) === count ? only : null;
  }

  /** Puts the first `count` free devices of model number `m` on the host into `picked`; how many it found. */
  private pick(host: HostState, m: number, count: number): number {
    const { load, base } = host;
    const taken = this.taken;
    const picked = this.pickedFor(count);
    const name = this.modelName[m];
    let n = 0;
    for (let k = 0; k < load.gpus.length && n < count; k++) {
      if ((load.gpuTypes?.[k] ?? '') === name && taken[base + k] === 0 && !load.gpusInUse.has(load.gpus[k]!)) picked[n++] = k;
    }
    return n;
  }

  private pickedFor(count: number): Int32Array {
    if (this.picked.length < count) this.picked = new Int32Array(count);
    return this.picked;
  }

  /** Free devices of `model` on a host now. */
  freeOn(i: number, model: string): number {
    const host = this.states[i];
    if (host) {
      const m = this.modelNo.get(model);
      return m === undefined ? 0 : (host.freeOf[m] ?? 0);
    }
    // A host not met yet (no room at the start, as most a reclaim looks at): counted without a state made for it.
    const load = this.hosts[i]!;
    let free = 0;
    for (let k = 0; k < load.gpus.length; k++) if ((load.gpuTypes?.[k] ?? '') === model && !load.gpusInUse.has(load.gpus[k]!)) free++;
    return free;
  }

  /** Takes up to `count` free devices of `model` on a host (room held for a reclaim). */
  hold(i: number, model: string, count: number): void {
    if (count <= 0) return;
    const host = this.state(i);
    const m = this.modelNo.get(model);
    if (m === undefined) return;
    this.take(host, this.pick(host, m, count), m);
  }

  /** The hosts as they stand now in this decision (for the words of a small fleet's reasons). */
  views(): HostLoad[] {
    return this.hosts.map((_, i) => this.view(this.state(i)));
  }

  private view(host: HostState): HostLoad {
    const { load } = host;
    let inUse: Set<string> | null = null;
    for (let k = 0; k < load.gpus.length; k++) if (this.taken[host.base + k] === 1) (inUse ??= new Set(load.gpusInUse)).add(load.gpus[k]!);
    return { ...load, gpusInUse: inUse ?? load.gpusInUse, workers: host.workers };
  }

  /** Takes the first `n` devices of `picked` (of model number `m`) on a host. */
  private take(host: HostState, n: number, m: number): void {
    if (n === 0) return;
    for (let i = 0; i < n; i++) this.taken[host.base + this.picked[i]!] = 1;
    host.free -= n;
    host.freeOf[m] = (host.freeOf[m] ?? 0) - n;
    if (host.load.up) {
      this.total -= n;
      this.totalOf[m] = (this.totalOf[m] ?? 0) - n;
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

/** A copy of `a` with room for `size` marks (half as many again, to grow seldom). */
function grown(a: Uint8Array, size: number): Uint8Array {
  const b = new Uint8Array(Math.max(size, Math.ceil(a.length * 1.5)));
  b.set(a);
  return b;
}
