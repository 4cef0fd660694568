import { modelLabel, placeWorker, type HostLoad } from '../pool/docker/placement.js';

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
  const byOwner = new Map<string, { priority: number | null; total: number; types: Map<string, number> }>();
  for (const h of usable) {
    const key = h.owner ? h.owner.d.id : '';
    let e = byOwner.get(key);
    if (!e) byOwner.set(key, (e = { priority: h.owner ? h.owner.d.priority : null, total: 0, types: new Map() }));
    e.total += h.gpus;
    e.types.set(h.type, (e.types.get(h.type) ?? 0) + h.gpus);
  }
  if (byOwner.size === 0) return '';
  const counts = (types: Map<string, number>): string => [...types].map(([t, n]) => `${n} ${modelLabel(t)}`).join(' + ');
  const named = [...byOwner].filter(([id]) => id !== '').sort((a, b) => b[1].total - a[1].total);
  const parts = named.slice(0, HOLDERS_NAMED).map(([id, e], i) => `${counts(e.types)}${i === 0 ? ' held' : ''} by \`${id}\` at priority ${e.priority}`);
  if (named.length > HOLDERS_NAMED) parts.push(`and ${named.length - HOLDERS_NAMED} more endpoints`);
  const stopping = byOwner.get('');
  const tail = stopping ? `${parts.length > 0 ? ' ' : ''}(being stopped: ${counts(stopping.types)})` : '';
  return `; ${parts.join(', ')}${tail}`;
}
