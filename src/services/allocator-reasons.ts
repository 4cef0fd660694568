import { modelLabel, placeWorker, type HostLoad } from '../pool/docker/placement.js';
import { StringIndex } from '../util/string-index.js';

/** What a reason says of GPUs held: their endpoint (null: being stopped), how many, and their model. */
export interface HeldGpus {
  owner: { d: { id: string; priority: number } } | null;
  gpus: number;
  type: string;
}

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
 * What holds the GPUs a waiting worker could use, the biggest holders first:
 * `; 3 L4 held by \`sd-xl\` at priority 80, 1 L4 by \`b\` at priority 50 (being stopped: 1 L4)`.
 *
 * @example holderSummary(holdings) // '; 2 L4 + 1 A100-80GB held by `typed` at priority 50'
 */
export function holderSummary(usable: readonly HeldGpus[]): string {
  // Each holder's total, in the order first met (its first entry kept), without a record per holder.
  const ix = OWNERS;
  ix.reset(usable.length);
  const first: number[] = [];
  const total: number[] = [];
  let stopping = -1;
  for (let i = 0; i < usable.length; i++) {
    const h = usable[i]!;
    if (!h.owner) {
      if (stopping < 0) stopping = i;
      continue;
    }
    let slot = ix.get(h.owner.d.id);
    if (slot < 0) {
      ix.set(h.owner.d.id, (slot = first.length));
      first.push(i);
      total.push(0);
    }
    total[slot]! += h.gpus;
  }
  ix.clear();
  if (first.length === 0 && stopping < 0) return '';
  // The biggest first; equal totals in the order first met (a stable sort's order), the first HOLDERS_NAMED only.
  const top: number[] = [];
  for (let slot = 0; slot < first.length; slot++) {
    let at = top.length;
    while (at > 0 && total[top[at - 1]!]! < total[slot]!) at--;
    if (at >= HOLDERS_NAMED) continue;
    top.splice(at, 0, slot);
    if (top.length > HOLDERS_NAMED) top.pop();
  }
  const parts = top.map((slot, i) => {
    const owner = usable[first[slot]!]!.owner!;
    return `${countsOf(usable, first[slot]!, owner.d.id)}${i === 0 ? ' held' : ''} by \`${owner.d.id}\` at priority ${owner.d.priority}`;
  });
  if (first.length > HOLDERS_NAMED) parts.push(`and ${first.length - HOLDERS_NAMED} more endpoints`);
  const tail = stopping >= 0 ? `${parts.length > 0 ? ' ' : ''}(being stopped: ${countsOf(usable, stopping, null)})` : '';
  return `; ${parts.join(', ')}${tail}`;
}

/** Holder ids to their place in holderSummary (reused: one summary at a time). */
const OWNERS = new StringIndex();

/** `2 L4 + 1 A100-80GB`: the GPUs of one holder (null: being stopped) by model, models in the order first met from `from`. */
function countsOf(usable: readonly HeldGpus[], from: number, id: string | null): string {
  const types: string[] = [];
  const counts: number[] = [];
  for (let i = from; i < usable.length; i++) {
    const h = usable[i]!;
    if ((h.owner ? h.owner.d.id : null) !== id) continue;
    const t = types.indexOf(h.type);
    if (t >= 0) counts[t]! += h.gpus;
    else {
      types.push(h.type);
      counts.push(h.gpus);
    }
  }
  return types.map((t, i) => `${counts[i]} ${modelLabel(t)}`).join(' + ');
}
