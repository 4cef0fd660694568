import type { HostLoad } from '../pool/docker/placement.js';
import { BUSY, FREEING, IDLE, PAUSED, STARTING, type Claimant } from './allocator-claims.js';
import { StringIndex } from '../util/string-index.js';

/**
 * The workers holding GPUs at the start of an allocator decision (allocator-fleet.ts), read
 * from the input field by field into arrays reused by the next decision: each holder's worker
 * id, devices, model, host, endpoint (found by its worker id among the endpoints' workers),
 * kind and job start; each endpoint's GPUs held counted on the way.
 */

/** Worker id → its index in the decision being made (a table reused by every decision, emptied after each: decisions run one at a time). */
const WORKER_INDEX = new StringIndex();

/** The workers of a decision, field by field: each one's endpoint (index), kind and job start; WORKER_INDEX filled (emptied by releaseHolders). */
function indexWorkers(states: readonly Claimant[]): { all: number; ownerOf: Int32Array; kindOf: Uint8Array; sinceOf: Float64Array | null } {
  const ids = WORKER_INDEX;
  let all = 0;
  for (let e = 0; e < states.length; e++) all += states[e]!.d.workers.length + (states[e]!.d.paused?.length ?? 0);
  ids.reset(all);
  const ownerOf = new Int32Array(all);
  const kindOf = new Uint8Array(all);
  let sinceOf: Float64Array | null = null;
  let g = 0;
  for (let e = 0; e < states.length; e++) {
    const { d } = states[e]!;
    for (let i = 0; i < d.workers.length; i++) {
      const w = d.workers[i]!;
      ids.set(w.id, g);
      kindOf[g] = w.busy ? BUSY : w.starting ? STARTING : IDLE;
      if (w.busySince !== undefined) (sinceOf ??= new Float64Array(all).fill(-Infinity))[g] = w.busySince;
      ownerOf[g++] = e;
    }
    // Indexed loops here and below: no iterator (nor empty array) made per endpoint or holder where the code is not yet optimized.
    const paused = d.paused;
    for (let i = 0; paused && i < paused.length; i++) {
      ids.set(paused[i]!, g);
      kindOf[g] = PAUSED;
      ownerOf[g++] = e;
    }
  }
  return { all, ownerOf, kindOf, sinceOf };
}

/** The workers holding GPUs at the start of a decision, field by field; `h` below is an index. */
export class Holders {
  readonly worker: string[];
  readonly devices: (readonly string[])[];
  /** How many devices it holds (read by each scan without going to its array). */
  readonly width: Int32Array;
  readonly type: string[];
  /** Its model as a number, the same for the same model in one decision (a key without a string made). */
  readonly model: Int32Array;
  /** Its endpoint's index among the claimants; -1: none (being stopped). */
  readonly owner: Int32Array;
  readonly kind: Uint8Array;
  readonly host: Int32Array;
  /** Its priority level as a candidate (candidateLists(); -1: never one). */
  readonly level: Int32Array;
  n = 0;
  readonly capacity: number;

  constructor(size: number) {
    this.capacity = size;
    this.level = new Int32Array(size);
    this.worker = new Array<string>(size);
    this.devices = new Array<readonly string[]>(size);
    this.width = new Int32Array(size);
    this.type = new Array<string>(size);
    this.model = new Int32Array(size);
    this.owner = new Int32Array(size);
    this.kind = new Uint8Array(size);
    this.host = new Int32Array(size);
  }
}

/** The holders' arrays, reused by the next decision (decisions run one at a time): a fleet's worth of arrays made each pass was garbage to collect beside the pass's fresh input. */
let spare: Holders | null = null;

/** Holders with room for `size`, empty (the arrays of the last decision when they are big enough; they keep its references until overwritten). */
function holdersFor(size: number): Holders {
  if (!spare || spare.capacity < size) spare = new Holders(Math.max(size, Math.ceil((spare?.capacity ?? 0) * 1.5)));
  spare.n = 0;
  return spare;
}

/** Where fileHolder puts the holders of the host being read, and what it reads them with. */
interface Filing {
  h: Holders;
  models: Map<string, number>;
  claimants: readonly Claimant[];
  ownerOf: Int32Array;
  kindOf: Uint8Array;
  sinceOf: Float64Array | null;
  /** The holders' job starts, made on the first one known (Fleet.since). */
  since: Float64Array | null;
  size: number;
  host: HostLoad;
  at: number;
}

/** Files one holder of `this.host` (given to the host's Map.forEach with the filing as its `this`). */
function fileHolder(this: Filing, devices: readonly string[], workerId: string): void {
  if (devices.length === 0) return;
  const { h, host, ownerOf } = this;
  const g = WORKER_INDEX.get(workerId);
  const k = h.n++;
  h.worker[k] = workerId;
  h.devices[k] = devices;
  h.width[k] = devices.length;
  const type = (h.type[k] = host.gpuTypes?.[host.gpus.indexOf(devices[0] ?? '')] ?? '');
  let model = this.models.get(type);
  if (model === undefined) this.models.set(type, (model = this.models.size));
  h.model[k] = model;
  h.host[k] = this.at;
  h.owner[k] = g < 0 ? -1 : ownerOf[g]!;
  h.kind[k] = g < 0 ? FREEING : this.kindOf[g]!;
  const sinceOf = this.sinceOf;
  if (g >= 0 && sinceOf && sinceOf[g] !== -Infinity) (this.since ??= new Float64Array(this.size).fill(-Infinity))[k] = sinceOf[g]!;
  // A paused worker's GPUs are not its endpoint's share: they are there for the taking.
  if (g >= 0 && h.kind[k] !== PAUSED) this.claimants[ownerOf[g]!]!.held += devices.length;
}

/**
 * Reads the holders of every host (`models`: each model met gets the next number) and counts
 * each endpoint's GPUs held (`held`, its paused workers' aside). Decisions run one at a time:
 * the arrays are the last decision's, overwritten; releaseHolders lets go of the input after.
 */
export function readHolders(hosts: readonly HostLoad[], states: readonly Claimant[], models: Map<string, number>): { h: Holders; since: Float64Array | null } {
  const { ownerOf, kindOf, sinceOf } = indexWorkers(states);
  let size = 0;
  for (let i = 0; i < hosts.length; i++) size += hosts[i]!.holders?.size ?? 0;
  const h = holdersFor(size);
  const filing: Filing = { h, models, claimants: states, ownerOf, kindOf, sinceOf, since: null, size, host: hosts[0]!, at: 0 };
  for (let i = 0; i < hosts.length; i++) {
    filing.host = hosts[i]!;
    filing.at = i;
    // forEach with the filing as `this`: no entry pair made per holder, no closure per host.
    filing.host.holders?.forEach(fileHolder, filing);
  }
  return { h, since: filing.since };
}

/**
 * Lets go of the decision's input: the reused table and arrays drop their references to it
 * (kept, they would carry a fleet built for one pass into the old generation).
 */
export function releaseHolders(h: Holders): void {
  WORKER_INDEX.clear();
  h.worker.fill(undefined as never, 0, h.n);
  h.devices.fill(undefined as never, 0, h.n);
  h.type.fill(undefined as never, 0, h.n);
}
