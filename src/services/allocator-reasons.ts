import { modelLabel, placeWorker, type HostLoad } from '../pool/docker/placement.js';

/** What a reason says of the waiting worker: its GPU request. */
export interface GpuWant {
  gpus: number;
  gpuTypes?: readonly string[];
  image?: string;
}

/**
 * The words of the allocator's `throttled` reasons (allocator.ts): why a worker finds no room,
 * and what holds the GPUs it could use ("3 L4 held by `sd-xl` at priority 80").
 */

/** Past this many hosts a reason sums the fleet up instead of naming each host. */
const HOSTS_NAMED = 8;
/** Holders named in a reason; the rest are counted. */
const HOLDERS_NAMED = 3;

/**
 * Why no host has room for one worker of `d`: placement's own refusal (each host's state) on
 * a small fleet, a sum over the fleet on a large one.
 *
 * @example describeBlock(hosts, { gpus: 1, gpuTypes: ['L4'], ... }) // 'no Docker host has 1 free L4 GPU (a: 0 of 2 L4 free; b: no L4)'
 */
export function describeBlock(hosts: readonly HostLoad[], d: GpuWant): string {
  if (namesEachHost(hosts.length)) {
    const placed = placeWorker(hosts, { count: d.gpus, types: d.gpuTypes, image: d.image });
    return 'refused' in placed ? placed.refused : 'the GPUs free for it are held for a request before it';
  }
  const types = d.gpuTypes && d.gpuTypes.length > 0 ? d.gpuTypes : null;
  let total = 0;
  let free = 0;
  let up = 0;
  for (const h of hosts) {
    if (!h.up) continue;
    up++;
    for (const [i, id] of h.gpus.entries()) {
      if (types && !types.includes(h.gpuTypes?.[i] ?? '')) continue;
      total++;
      if (!h.gpusInUse.has(id)) free++;
    }
  }
  return fleetBlock(d, { free, total, up, hosts: hosts.length });
}

/** A large fleet summed up: GPUs of the models asked for (free, and in all) on the hosts that are up. */
export interface FleetTally {
  free: number;
  total: number;
  up: number;
  hosts: number;
}

/**
 * The words of describeBlock for a large fleet, from its sums.
 *
 * @example fleetBlock({ gpus: 1, gpuTypes: ['L4'] }, { free: 0, total: 40, up: 5, hosts: 5 }) // 'no Docker host has 1 free L4 GPU (0 of 40 free on 5 of 5 hosts up)'
 */
export function fleetBlock(d: GpuWant, t: FleetTally): string {
  const types = d.gpuTypes && d.gpuTypes.length > 0 ? d.gpuTypes : null;
  const what = types ? `${types.map(modelLabel).join(' or ')} GPU` : 'GPU';
  return `no Docker host has ${d.gpus} free ${what}${d.gpus === 1 ? '' : 's'} (${t.free} of ${t.total} free on ${t.up} of ${t.hosts} hosts up)`;
}

/** Whether a fleet is summed up in reasons rather than named host by host. */
export const namesEachHost = (hosts: number): boolean => hosts <= HOSTS_NAMED;

/**
 * GPUs held per endpoint and model during one decision, in the order first met, for the
 * reasons: field by field in arrays reused by the next decision (a record per pair, and an
 * array per endpoint to find its own, were ~250 KB of garbage a decision at 1,000
 * endpoints), each endpoint's pairs chained from its last.
 */
export class HeldPairs {
  n = 0;
  /** Each pair's endpoint (its index among the decision's endpoints; -1: workers being stopped), GPUs and model. */
  owner: Int32Array;
  gpus: Int32Array;
  readonly type: string[] = [];
  /** The pair before it of the same endpoint (-1: none). */
  private before: Int32Array;
  /** Each endpoint's last pair, by its index + 1 (-1: none). */
  private readonly last: Int32Array;
  /** holderSummary's tables by endpoint: its place in the summary being made (-1: not met; set back after each), and per place its first pair and GPUs. */
  readonly slotOf: Int32Array;
  readonly first: Int32Array;
  readonly total: Int32Array;

  private constructor(endpoints: number, capacity: number) {
    this.owner = new Int32Array(capacity);
    this.gpus = new Int32Array(capacity);
    this.before = new Int32Array(capacity);
    this.last = new Int32Array(endpoints + 1);
    this.slotOf = new Int32Array(endpoints).fill(-1);
    this.first = new Int32Array(endpoints);
    this.total = new Int32Array(endpoints);
  }

  /** Empty pairs for a decision of `endpoints` endpoints: the last decision's arrays when they are big enough (decisions run one at a time; release() after). */
  static for(endpoints: number): HeldPairs {
    if (!spare || spare.slotOf.length < endpoints) spare = new HeldPairs(Math.max(endpoints, Math.ceil((spare?.slotOf.length ?? 0) * 1.5)), Math.max(64, 4 * endpoints, spare?.owner.length ?? 0));
    spare.n = 0;
    spare.last.fill(-1, 0, endpoints + 1);
    return spare;
  }

  /** Lets go of the decision's model names (the array kept for the next). */
  release(): void {
    this.type.fill('', 0, this.n);
  }

  /** Counts `gpus` GPUs of `type` held by the endpoint of index `e` (-1: being stopped). */
  add(e: number, type: string, gpus: number): void {
    for (let at = this.last[e + 1]!; at >= 0; at = this.before[at]!) {
      if (this.type[at] !== type) continue;
      this.gpus[at]! += gpus;
      return;
    }
    if (this.n === this.owner.length) this.grow();
    const at = this.n++;
    this.owner[at] = e;
    this.gpus[at] = gpus;
    this.type[at] = type;
    this.before[at] = this.last[e + 1]!;
    this.last[e + 1] = at;
  }

  private grow(): void {
    const wider = (a: Int32Array): Int32Array => {
      const b = new Int32Array(a.length * 2);
      b.set(a);
      return b;
    };
    this.owner = wider(this.owner);
    this.gpus = wider(this.gpus);
    this.before = wider(this.before);
  }
}

/** The pairs' arrays, reused by the next decision. */
let spare: HeldPairs | null = null;

/** Whether a pair's model is one of `types` (null: any). */
function usable(types: readonly string[] | null, type: string): boolean {
  if (types === null) return true;
  for (let i = 0; i < types.length; i++) if (types[i] === type) return true;
  return false;
}

/**
 * What holds the GPUs of `types` (null: any) a waiting worker could use, the biggest holders
 * first (`owners`: the endpoints the pairs' indexes name):
 * `; 3 L4 held by \`sd-xl\` at priority 80, 1 L4 by \`b\` at priority 50 (being stopped: 1 L4)`.
 *
 * @example holderSummary(pairs, endpoints, ['L4']) // '; 2 L4 held by `typed` at priority 50'
 */
export function holderSummary(pairs: HeldPairs, owners: readonly { d: { id: string; priority: number } }[], types: readonly string[] | null): string {
  // Each holder's total, in the order first met (its first pair kept), in the pairs' tables: no record per holder.
  const { slotOf, first, total } = pairs;
  let holders = 0;
  let stopping = -1;
  for (let i = 0; i < pairs.n; i++) {
    if (!usable(types, pairs.type[i]!)) continue;
    const e = pairs.owner[i]!;
    if (e < 0) {
      if (stopping < 0) stopping = i;
      continue;
    }
    let slot = slotOf[e]!;
    if (slot < 0) {
      slotOf[e] = slot = holders++;
      first[slot] = i;
      total[slot] = 0;
    }
    total[slot]! += pairs.gpus[i]!;
  }
  for (let slot = 0; slot < holders; slot++) slotOf[pairs.owner[first[slot]!]!] = -1;
  if (holders === 0 && stopping < 0) return '';
  // The biggest first; equal totals in the order first met (a stable sort's order), the first HOLDERS_NAMED only.
  const top: number[] = [];
  for (let slot = 0; slot < holders; slot++) {
    let at = top.length;
    while (at > 0 && total[top[at - 1]!]! < total[slot]!) at--;
    if (at >= HOLDERS_NAMED) continue;
    top.splice(at, 0, slot);
    if (top.length > HOLDERS_NAMED) top.pop();
  }
  const parts = top.map((slot, i) => {
    const e = pairs.owner[first[slot]!]!;
    const { d } = owners[e]!;
    return `${countsOf(pairs, first[slot]!, e, types)}${i === 0 ? ' held' : ''} by \`${d.id}\` at priority ${d.priority}`;
  });
  if (holders > HOLDERS_NAMED) parts.push(`and ${holders - HOLDERS_NAMED} more endpoints`);
  const tail = stopping >= 0 ? `${parts.length > 0 ? ' ' : ''}(being stopped: ${countsOf(pairs, stopping, -1, types)})` : '';
  return `; ${parts.join(', ')}${tail}`;
}

/** `2 L4 + 1 A100-80GB`: the GPUs of one endpoint (-1: being stopped) by model, from its pair `from` on (one pair per model, in the order first met). */
function countsOf(pairs: HeldPairs, from: number, e: number, types: readonly string[] | null): string {
  let text = '';
  for (let i = from; i < pairs.n; i++) {
    if (pairs.owner[i] !== e || !usable(types, pairs.type[i]!)) continue;
    text += `${text === '' ? '' : ' + '}${pairs.gpus[i]} ${modelLabel(pairs.type[i]!)}`;
  }
  return text;
}
