import type { HostLoad } from '../pool/docker/placement.js';
import { stringHash } from '../util/string-index.js';

/**
 * What the allocator reads of each host's holders, worked out once per load object and kept
 * across decisions (allocator-fleet.ts). The autoscaler hands the allocator the whole fleet
 * every pass, but DockerHosts.loads() gives a host's load object again while its workers did
 * not change (and a new one when they did), so of 1,250 hosts a pass rebuilds a handful: the
 * walk of every holders map, each device's model looked up and each worker id hashed, made
 * every decision, is made once per load instead.
 *
 * A load object must not change once given (HostLoad's fields are read-only; loads() makes a
 * new one on a change, and so does the fleet simulator): what is kept for it is only what its
 * `gpus`, `gpuTypes` and `holders` say. One changed in place is read again only when its count
 * of holders changed (a cheap check, not a proof). Its
 * `images` (a live set) and `up` are read by each decision, not kept. Kept in a WeakMap: an
 * entry goes with its load.
 *
 * The holders' ids are kept in one map across decisions too (`enter`): each decision adds the
 * ids of the hosts it meets for the first time and drops those of the hosts it no longer
 * meets, and then finds each worker's holder with one look-up of a string whose hash V8 keeps
 * (rebuilding a table of 9,500 ids every decision hashed each id twice). Where one id would be
 * two holders (the same worker on two hosts, or one load given twice) the map cannot say
 * which: `enter` answers false and that decision builds its own table.
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

/**
 * What is kept of a host's load (its holders, its GPUs by model), made when first seen.
 *
 * @example holdersOf({ name: 'a', up: true, gpus: ['0', '1'], gpuTypes: ['L4', 'L4'], gpusInUse: new Set(['1']), workers: 1, holders: new Map([['w-1', ['1']]]) })
 * // { n: 1, worker: ['w-1'], devices: [['1']], type: ['L4'], … }
 */
export function holdersOf(load: HostLoad): HostHolders {
  const kept = KEPT.get(load);
  if (kept && kept.size === (load.holders?.size ?? 0)) return kept;
  const worker: string[] = [];
  const devices: (readonly string[])[] = [];
  const type: string[] = [];
  load.holders?.forEach((ids, id) => {
    if (ids.length === 0) return;
    worker.push(id);
    devices.push(ids);
    type.push(load.gpuTypes?.[load.gpus.indexOf(ids[0] ?? '')] ?? '');
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

/**
 * Starts a decision over `hosts`: sets each one's `base` (its holders' first index, in the
 * input's order), files the ids of hosts met for the first time and drops those of hosts not
 * met. Returns how many holders the hosts have, and whether holderOf may be asked in this
 * decision (every id one holder's).
 *
 * @example enter(hosts) // { size: 9500, mapped: true }; then holderOf('w-1') → its index in the decision, or -1
 */
export function enter(hosts: readonly HostLoad[]): { size: number; mapped: boolean } {
  const now = ++decisions;
  let base = 0;
  let twice = false;
  for (let i = 0; i < hosts.length; i++) {
    const c = holdersOf(hosts[i]!);
    if (c.n === 0) continue;
    const kept = c as Kept;
    if (kept.seen === now) twice = true;
    kept.seen = now;
    kept.base = base;
    base += c.n;
  }
  const still: Kept[] = [];
  for (let i = 0; i < filed.length; i++) {
    const c = filed[i]!;
    if (c.seen === now) still.push(c);
    else unfile(c);
  }
  for (let i = 0; i < hosts.length; i++) {
    const c = holdersOf(hosts[i]!) as Kept;
    if (c.n === 0 || c.filed) continue;
    file(c);
    still.push(c);
  }
  filed = still;
  return { size: base, mapped: !twice && clashes === 0 };
}

/** The index in the decision entered of the holder with this worker id, or -1 (no host met has it). */
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
