import type { HostLoad } from '../pool/docker/placement.js';
import { stringHash } from '../util/string-index.js';

/**
 * What the allocator reads of each host's holders, worked out once per load object and kept
 * across decisions (allocator-fleet.ts). The autoscaler hands the allocator the whole fleet
 * every pass, but DockerHosts.loads() gives a host's load object again while its workers did
 * not change (and a new one when they did): the walk of its holders map, each holder's model
 * looked up and each worker id hashed are made once per load instead of every decision. A
 * load is kept from the second decision in a row that meets it at the same place in the list;
 * one met once is read from itself, as before, so a fleet made anew for each decision (bench
 * `fresh`) costs no more than it did.
 *
 * A load object must not change once given (HostLoad's fields are read-only; loads() makes a
 * new one on a change, and so does the fleet simulator): what is kept for it is only what its
 * `gpus`, `gpuTypes` and `holders` say. One changed in place is read again only when its count
 * of holders changed (a cheap check, not a proof). Its `images` (a live set) and `up` are read
 * by each decision, not kept. Kept in a WeakMap: an entry goes with its load.
 *
 * The kept hosts' holder ids are in one map across decisions too (`enter`): each decision
 * files the ids of hosts newly kept and drops those of hosts no longer met, and then finds
 * each worker's holder with one look-up of a string whose hash V8 keeps. Ids on hosts read
 * afresh go in the decision's own table. Where the map cannot say which holder an id is (one
 * id on two hosts, one load given twice), or most of the fleet is read afresh, the decision
 * puts every id in its own table, as before.
 */

/** A host's holders that hold devices, in the order of its `holders` map, field by field. */
export interface HostHolders {
  /** Where its first holder is in the decision being made (holder indexes are the input's order); -1: not in it. */
  base: number;
  /** How many. */
  readonly n: number;
  readonly worker: readonly string[];
  readonly devices: readonly (readonly string[])[];
  /** The model of each one's first device ("" where none is named). */
  readonly type: readonly string[];
  /** That model as a number (modelNumber), the same for the same model in every decision. */
  readonly model: Int32Array;
  /** Each worker id's stringHash, for the decision's id table. */
  readonly hash: Int32Array;
  /** The host's GPUs by model (models in the order first met in `gpus`), for the sums of a large fleet's reasons. */
  readonly models: readonly string[];
  readonly modelGpus: readonly number[];
}

/** What is kept of a host that holds workers, and its part in the map of ids. */
interface Kept extends HostHolders {
  /** The last decision that met it. */
  seen: number;
  /** Its ids are in BY_ID (or counted in `clashes`). */
  filed: boolean;
  /** The size of the holders map it was made from (a load changed in place, against the rule, is read again when its count of holders changed). */
  readonly size: number;
}

const KEPT = new WeakMap<HostLoad, Kept>();

/** A holder's place: its host's holders and its index among them. */
interface HolderRef {
  readonly of: Kept;
  readonly j: number;
}

/** Worker id → its holder, for the hosts filed (those the last decision met). */
const BY_ID = new Map<string, HolderRef>();
/** The hosts whose ids are filed. */
let filed: Kept[] = [];
/** Ids filed while another host's holder had them (not in BY_ID): while any is, the map is not used. */
let clashes = 0;
/** Decisions entered so far. */
let decisions = 0;

/** Model name → number, for every model met so far (a handful in any fleet). */
const MODELS = new Map<string, number>();

/** A model's number, the same in every decision; below modelCount(). */
export function modelNumber(model: string): number {
  let n = MODELS.get(model);
  if (n === undefined) MODELS.set(model, (n = MODELS.size));
  return n;
}

/** How many model numbers have been given out (a bound on every modelNumber). */
export function modelCount(): number {
  return Math.max(1, MODELS.size);
}

/** What is kept of a host's load, or null: none yet (or it was changed in place since, its count of holders says). */
export function keptOf(load: HostLoad): HostHolders | null {
  const kept = KEPT.get(load);
  return kept && kept.size === (load.holders?.size ?? 0) ? kept : null;
}

/** The model of a holder's first device ("" where none is named). */
export function modelOf(load: HostLoad, devices: readonly string[]): string {
  return load.gpuTypes?.[load.gpus.indexOf(devices[0] ?? '')] ?? '';
}

/**
 * What is kept of a host's load (its holders, its GPUs by model), made now.
 *
 * @example keep({ name: 'a', up: true, gpus: ['0', '1'], gpuTypes: ['L4', 'L4'], gpusInUse: new Set(['1']), workers: 1, holders: new Map([['w-1', ['1']]]) })
 * // { n: 1, worker: ['w-1'], devices: [['1']], type: ['L4'], … }
 */
function keep(load: HostLoad): Kept {
  const worker: string[] = [];
  const devices: (readonly string[])[] = [];
  const type: string[] = [];
  load.holders?.forEach((ids, id) => {
    if (ids.length === 0) return;
    worker.push(id);
    devices.push(ids);
    type.push(modelOf(load, ids));
  });
  const n = worker.length;
  const model = new Int32Array(n);
  const hash = new Int32Array(n);
  for (let j = 0; j < n; j++) {
    model[j] = modelNumber(type[j]!);
    hash[j] = stringHash(worker[j]!);
  }
  const models: string[] = [];
  const modelGpus: number[] = [];
  for (let k = 0; k < load.gpus.length; k++) {
    const m = load.gpuTypes?.[k] ?? '';
    const at = models.indexOf(m);
    if (at >= 0) modelGpus[at]!++;
    else {
      models.push(m);
      modelGpus.push(1);
    }
  }
  const made: Kept = { base: -1, n, worker, devices, type, model, hash, models, modelGpus, seen: 0, filed: false, size: load.holders?.size ?? 0 };
  KEPT.set(load, made);
  return made;
}

/** The loads of the decision before, in its order (a load met again at the same place is kept from then on). */
let before: readonly HostLoad[] = [];

/** A decision's hosts as enter finds them. */
export interface Entered {
  /** What is kept of each host (by its index); null: read from its load in this decision. */
  kept: (HostHolders | null)[];
  /** At least as many as the holders of the hosts. */
  size: number;
  /** Whether holderOf answers for the kept hosts' holders (each id then one holder's, none also on a host read afresh). */
  mapped: boolean;
}

/**
 * Starts a decision over `hosts`: what is kept of each (made for a load met at the same place
 * in the decision before: a load met once is read from itself, so a fleet made anew for each
 * decision costs no more than before), the ids of kept hosts met for the first time filed,
 * those of hosts not met dropped. A host's `base` is set as its holders are laid out.
 *
 * @example const { kept, mapped } = enter(hosts); // then, the bases set, holderOf('w-1') → its index, or -1
 */
export function enter(hosts: readonly HostLoad[]): Entered {
  const now = ++decisions;
  const kept = new Array<HostHolders | null>(hosts.length);
  let size = 0;
  let known = 0;
  let twice = false;
  for (let i = 0; i < hosts.length; i++) {
    const load = hosts[i]!;
    const c = (keptOf(load) ?? (before[i] === load ? keep(load) : null)) as Kept | null;
    kept[i] = c;
    if (c === null) {
      size += load.holders?.size ?? 0;
      continue;
    }
    if (c.n === 0) continue;
    if (c.seen === now) twice = true;
    c.seen = now;
    size += c.n;
    known += c.n;
  }
  before = hosts.slice();
  // Most of the fleet read afresh (the first pass; a fleet made anew for each decision): no map.
  if (2 * known < size) {
    for (let i = 0; i < filed.length; i++) filed[i]!.filed = false;
    filed = [];
    BY_ID.clear();
    clashes = 0;
    return { kept, size, mapped: false };
  }
  const still: Kept[] = [];
  for (let i = 0; i < filed.length; i++) {
    const c = filed[i]!;
    if (c.seen === now) still.push(c);
    else unfile(c);
  }
  for (let i = 0; i < hosts.length; i++) {
    const c = kept[i] as Kept | null;
    if (c === null || c.n === 0 || c.filed) continue;
    file(c);
    still.push(c);
  }
  filed = still;
  return { kept, size, mapped: !twice && clashes === 0 && !readAfreshClash(hosts, kept) };
}

/** Whether a host read afresh holds an id that a kept host's holder has too (the map would answer for one of them only). */
function readAfreshClash(hosts: readonly HostLoad[], kept: readonly (HostHolders | null)[]): boolean {
  let clash = false;
  for (let i = 0; i < hosts.length && !clash; i++) {
    if (kept[i] !== null) continue;
    hosts[i]!.holders?.forEach((devices, id) => {
      if (devices.length > 0 && BY_ID.has(id)) clash = true;
    });
  }
  return clash;
}

/** The index in the decision entered of the kept holder with this worker id, or -1 (no kept host met has it). */
export function holderOf(workerId: string): number {
  const ref = BY_ID.get(workerId);
  return ref === undefined ? -1 : ref.of.base + ref.j;
}

function file(c: Kept): void {
  c.filed = true;
  for (let j = 0; j < c.n; j++) {
    const id = c.worker[j]!;
    if (BY_ID.has(id)) clashes++;
    else BY_ID.set(id, { of: c, j });
  }
}

function unfile(c: Kept): void {
  c.filed = false;
  c.base = -1;
  for (let j = 0; j < c.n; j++) {
    const id = c.worker[j]!;
    if (BY_ID.get(id)?.of === c) BY_ID.delete(id);
    else clashes--;
  }
}
