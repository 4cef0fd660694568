import { modelLabel, placeWorker, type HostLoad } from '../../src/pool/docker/placement.js';
import { describeBlock } from '../../src/services/allocator-reasons.js';
import { Heap } from '../../src/util/heap.js';
import { rankOf } from '../../src/services/allocator-claims.js';
import type { AllocatorInput, AllocWorker, EndpointAllocation, EndpointDemand, StopOrder } from '../../src/services/allocator.js';

/** An endpoint's answer being made (its orders' lists its own). */
type Answer = EndpointAllocation & { reclaim: StopOrder[]; preempt: StopOrder[] };

/**
 * A reference allocator for the tests: the rules of src/services/allocator.ts written the
 * simple way (a copy of every host, a scan of the fleet for every request, placement asked of
 * whole groups of hosts). The indexed allocator must decide exactly as this one does
 * (test/services/allocator-equivalence.test.ts); a change to the rules goes into both.
 */

/** Priority added for each `agingMs` a request waits. */
const AGING_STEP = 10;
const DEFAULT_AGING_MS = 60_000;

/** A worker holding GPUs, with its place in the fleet. */
interface Holding {
  workerId: string;
  /** Its endpoint's state; null: not an endpoint's current worker (being stopped: its GPUs are being freed). */
  owner: EndpointState | null;
  kind: 'freeing' | 'paused' | 'idle' | 'starting' | 'busy';
  host: HostLoad;
  devices: readonly string[];
  type: string;
  taken: boolean;
  /** When its current job started (busy workers; -Infinity: not known). */
  since: number;
}

/** An endpoint during one decision. */
interface EndpointState {
  d: EndpointDemand;
  out: Answer;
  /** GPUs it holds, counting grants and GPUs being freed for it. */
  held: number;
  /** Workers it has, counting grants and those being freed for it, less those reclaimed. */
  count: number;
  left: number;
  blocked: boolean;
  /** Priority raised by aging (counts for its first worker, and its last). */
  rank: number;
  /** How long its oldest job has waited, and the aging step. */
  waitedMs: number;
  agingMs: number;
}

/** The allocator's decision, the simple way (see the rules in src/services/allocator.ts). */
export function allocateReference(input: AllocatorInput): Map<string, EndpointAllocation> {
  const agingMs = input.agingMs ?? DEFAULT_AGING_MS;
  const states = new Map<string, EndpointState>();
  for (const d of input.endpoints) {
    const waited = d.waitingSince === null ? 0 : Math.max(0, input.now - d.waitingSince);
    const rank = Math.min(100, d.priority + AGING_STEP * Math.floor(waited / agingMs));
    const out: Answer = { start: 0, resume: 0, reclaim: [], preempt: [], waiting: 0, reason: null };
    states.set(d.id, { d, out, held: 0, count: d.workers.length, left: d.want, blocked: false, rank, waitedMs: waited, agingMs });
  }
  const queue = new Heap<EndpointState>(before);
  const fleet = new Fleet(input.hosts, states, (owner) => queue.update(owner));
  for (const s of states.values()) if (s.left > 0) queue.push(s);
  for (let s = queue.pop(); s !== undefined; s = queue.pop()) {
    serveOne(s, fleet);
    if (s.left > 0 && !s.blocked) queue.push(s);
  }
  return new Map([...states].map(([id, s]) => [id, s.out]));
}

/** Whether `a`'s next request goes before `b`'s (rule 1). */
function before(a: EndpointState, b: EndpointState): boolean {
  const ra = a.count < a.d.workersMin ? 0 : 1;
  const rb = b.count < b.d.workersMin ? 0 : 1;
  if (ra !== rb) return ra < rb;
  if (rankOf(a, 0) !== rankOf(b, 0)) return rankOf(a, 0) > rankOf(b, 0);
  const sa = share(a);
  const sb = share(b);
  if (sa !== sb) return sa < sb;
  const wa = a.d.waitingSince ?? Number.MAX_SAFE_INTEGER;
  const wb = b.d.waitingSince ?? Number.MAX_SAFE_INTEGER;
  if (wa !== wb) return wa < wb;
  return a.d.id < b.d.id;
}

/** Its fair-share measure: GPUs held (workers, for one without GPUs) per unit of weight. */
function share(s: EndpointState): number {
  return (s.d.gpus > 0 ? s.held : s.count) / s.d.shareWeight;
}

/** Serves the endpoint's next request: free GPUs, GPUs being freed, reclaimed ones, or it waits. */
function serveOne(s: EndpointState, fleet: Fleet): void {
  const { d } = s;
  if (d.gpus <= 0) {
    s.out.start += s.left;
    s.count += s.left;
    s.left = 0;
    return;
  }
  s.left--;
  if (fleet.resumeOwn(s) || fleet.place(s)) {
    s.out.start++;
    s.held += d.gpus;
    s.count++;
    return;
  }
  const freed = fleet.reclaim(s);
  if (freed !== null) {
    s.out.waiting++;
    s.held += d.gpus;
    s.count++;
    s.out.reason ??= `waiting for room: ${freed}`;
    return;
  }
  s.blocked = true;
  s.out.waiting += s.left + 1;
  s.left = 0;
  const why = fleet.whyNot(s);
  s.out.reason = s.out.reason === null ? `waiting for room: ${why}` : `${s.out.reason}; then ${why}`;
}

/** The fleet during one decision: free devices (mutated as grants are made) and who holds the rest. */
class Fleet {
  private readonly hosts: HostLoad[];
  private readonly holdings: Holding[] = [];
  private readonly reasons = new Map<string, string>();
  /** Free devices on hosts that are up, in all and by model. */
  private freeTotal = 0;
  private readonly freeOfType = new Map<string, number>();
  /** Candidates to free, by kind, each sorted by its endpoint's priority (lowest first). */
  private readonly byKind: Record<Holding['kind'], Holding[]> = { freeing: [], paused: [], idle: [], starting: [], busy: [] };

  constructor(
    hosts: readonly HostLoad[],
    states: ReadonlyMap<string, EndpointState>,
    private readonly stopped: (owner: EndpointState) => void,
  ) {
    this.hosts = hosts.map((h) => ({ ...h, gpusInUse: new Set(h.gpusInUse) }));
    const owners = new Map<string, [EndpointState, AllocWorker | null]>();
    for (const s of states.values()) {
      for (const w of s.d.workers) owners.set(w.id, [s, w]);
      for (const id of s.d.paused ?? []) owners.set(id, [s, null]);
    }
    for (const host of this.hosts) {
      this.addHoldings(host, owners);
      if (!host.up) continue;
      for (const [i, id] of host.gpus.entries()) {
        if (host.gpusInUse.has(id)) continue;
        const type = host.gpuTypes?.[i] ?? '';
        this.freeTotal++;
        this.freeOfType.set(type, (this.freeOfType.get(type) ?? 0) + 1);
      }
    }
    for (const list of Object.values(this.byKind)) list.sort((a, b) => (a.owner?.d.priority ?? -1) - (b.owner?.d.priority ?? -1) || b.since - a.since);
  }

  private addHoldings(host: HostLoad, owners: ReadonlyMap<string, [EndpointState, AllocWorker | null]>): void {
    for (const [workerId, devices] of host.holders ?? []) {
      if (devices.length === 0) continue;
      const found = owners.get(workerId);
      const owner = found?.[0] ?? null;
      const w = found?.[1];
      const kind: Holding['kind'] = !found ? 'freeing' : !w ? 'paused' : w.busy ? 'busy' : w.starting ? 'starting' : 'idle';
      const type = host.gpuTypes?.[host.gpus.indexOf(devices[0] ?? '')] ?? '';
      const holding: Holding = { workerId, owner, kind, host, devices, type, taken: false, since: w?.busy ? (w.busySince ?? -Infinity) : -Infinity };
      if (owner && kind !== 'paused') owner.held += devices.length;
      this.holdings.push(holding);
      // Busy workers of endpoints that are not preemptible are never candidates.
      if (kind !== 'busy' || owner?.d.preemptible) this.byKind[kind].push(holding);
    }
  }

  /**
   * Places one worker of `s` on free devices (placeWorker, as the driver will); false when none
   * fits. Asked of few hosts at a time, with the same answer as of all: hosts holding the image
   * first, then, per acceptable model in order, hosts by how many GPUs they have free, fewest
   * first (placement bin-packs: the first group where one fits holds its choice).
   */
  place(s: EndpointState): boolean {
    const { d } = s;
    const typeList = d.gpuTypes && d.gpuTypes.length > 0 ? d.gpuTypes : null;
    if (!typeList ? this.freeTotal < d.gpus : !typeList.some((t) => (this.freeOfType.get(t) ?? 0) >= d.gpus)) return false;
    const levels: HostLoad[][] = [];
    const withImage: HostLoad[] = [];
    for (const h of this.hosts) {
      const free = h.gpus.length - h.gpusInUse.size;
      if (!h.up || free < d.gpus) continue;
      (levels[free] ??= []).push(h);
      if (d.image !== undefined && h.images?.has(d.image)) withImage.push(h);
    }
    const tries: HostLoad[][] = withImage.length > 0 ? [withImage] : [];
    for (const level of levels) if (level) tries.push(level);
    const types = d.gpuTypes && d.gpuTypes.length > 0 ? d.gpuTypes.map((t) => [t]) : [undefined];
    for (const type of types) {
      for (const group of tries) if (group.some((h) => fitsOn(h, d.gpus, type?.[0] ?? null)) && this.placeIn(s, group, type)) return true;
    }
    return false;
  }

  private placeIn(s: EndpointState, group: HostLoad[], types: string[] | undefined): boolean {
    const placed = placeWorker(group, { count: s.d.gpus, types, image: s.d.image });
    if ('refused' in placed) return false;
    const host = group.find((h) => h.name === placed.host)!;
    this.use(host, placed.deviceIds, placed.gpuType);
    host.workers++;
    // Granted now: a holding for the reasons, not to be freed again in this decision.
    this.holdings.push({ workerId: '', owner: s, kind: 'starting', host, devices: placed.deviceIds, type: placed.gpuType, taken: true, since: -Infinity });
    return true;
  }

  /** Resumes one of `s`'s own paused workers on a host that is up; false when it has none. */
  resumeOwn(s: EndpointState): boolean {
    if (!s.d.paused || s.d.paused.length === 0) return false;
    const own = this.byKind.paused.find((h) => h.owner === s && !h.taken && h.host.up);
    if (!own) return false;
    own.taken = true;
    own.kind = 'starting';
    s.out.resume++;
    return true;
  }

  /**
   * Frees room for one worker of `s` (rule 3): the cheapest set of holdings on one host that,
   * with its free devices of one acceptable model, makes the worker's count. Stops them (the
   * orders go to their endpoints) and holds the free devices for `s`. Returns what it waits
   * for, in words, or null when nothing may be freed for it.
   */
  reclaim(s: EndpointState): string | null {
    const need = s.d.gpus;
    const buckets = new Map<string, { host: HostLoad; type: string; have: number; picked: Holding[] }>();
    for (const kind of ['freeing', 'paused', 'idle', 'starting', 'busy'] as const) {
      for (const h of this.byKind[kind]) {
        if (kind !== 'paused' && h.owner && h.owner.d.priority > rankOf(s, 0) && s.count >= s.d.workersMin) break;
        if (h.taken || !h.host.up || !this.acceptable(s, h) || !mayTake(s, h)) continue;
        const key = `${h.host.name}\u0000${h.type}`;
        let b = buckets.get(key);
        if (!b) buckets.set(key, (b = { host: h.host, type: h.type, have: freeOf(h.host, h.type), picked: [] }));
        b.have += h.devices.length;
        b.picked.push(h);
        if (b.have >= need) return this.take(s, b.host, b.type, b.picked);
      }
    }
    return null;
  }

  /** Marks devices of a host in use for the rest of the decision. */
  private use(host: HostLoad, ids: readonly string[], type: string): void {
    for (const id of ids) (host.gpusInUse as Set<string>).add(id);
    this.freeTotal -= ids.length;
    this.freeOfType.set(type, (this.freeOfType.get(type) ?? 0) - ids.length);
  }

  private acceptable(s: EndpointState, h: Holding): boolean {
    const types = s.d.gpuTypes;
    return h.owner !== s && (!types || types.length === 0 || types.includes(h.type));
  }

  /** Stops the picked holdings for `s` and holds the host's free devices of `type` for it. */
  private take(s: EndpointState, host: HostLoad, type: string, picked: Holding[]): string {
    const freed = picked.reduce((n, h) => n + h.devices.length, 0);
    const fromFree = Math.max(0, s.d.gpus - freed);
    const free = host.gpus.filter((id, i) => (host.gpuTypes?.[i] ?? '') === type && !host.gpusInUse.has(id));
    this.use(host, free.slice(0, fromFree), type);
    const stopped: string[] = [];
    for (const h of picked) {
      h.taken = true;
      if (!h.owner) continue;
      const why = h.kind === 'busy' ? 'preempted' : 'reclaimed';
      const what = h.kind === 'busy' ? ', its jobs requeued' : h.kind === 'paused' ? ', paused in the warm pool' : `, ${h.kind} beyond workersMin`;
      const reason = `${why} for \`${s.d.id}\` (priority ${s.d.priority}): ${h.devices.length} ${modelLabel(h.type)} on ${host.name}${what}`;
      (h.kind === 'busy' ? h.owner.out.preempt : h.owner.out.reclaim).push({ workerId: h.workerId, why: reason });
      if (h.kind !== 'paused') {
        h.owner.held -= h.devices.length;
        h.owner.count--;
        this.stopped(h.owner);
      }
      stopped.push(`\`${h.owner.d.id}\``);
    }
    const what = `${s.d.gpus} ${modelLabel(type)} on ${host.name} being freed`;
    return stopped.length === 0 ? what : `${what} (stopping workers of ${[...new Set(stopped)].join(', ')})`;
  }

  /** Why `s` must wait: no room, and who holds the GPUs it could use (one text per request shape in a decision: a big fleet has many waiting). */
  whyNot(s: EndpointState): string {
    const types = s.d.gpuTypes && s.d.gpuTypes.length > 0 ? s.d.gpuTypes : null;
    const key = `${s.d.gpus}|${types ? types.join('\u0000') : ''}`;
    let text = this.reasons.get(key);
    if (text === undefined) {
      const usable = this.holdings.filter((h) => !types || types.includes(h.type));
      this.reasons.set(key, (text = `${describeBlock(this.hosts, s.d)}${holderSummary(usable.map((h) => ({ owner: h.owner, gpus: h.devices.length, type: h.type })))}`));
    }
    return text;
  }
}

/** Whether a host has `count` free devices of `type` (null: of any one model). */
function fitsOn(host: HostLoad, count: number, type: string | null): boolean {
  if (host.gpus.length - host.gpusInUse.size < count) return false;
  const seen = new Map<string, number>();
  for (const [i, id] of host.gpus.entries()) {
    if (host.gpusInUse.has(id)) continue;
    const t = host.gpuTypes?.[i] ?? '';
    if (type !== null && t !== type) continue;
    const n = (seen.get(t) ?? 0) + 1;
    if (n >= count) return true;
    seen.set(t, n);
  }
  return false;
}

/** Free devices of `type` on a host now. */
function freeOf(host: HostLoad, type: string): number {
  let n = 0;
  for (const [i, id] of host.gpus.entries()) if ((host.gpuTypes?.[i] ?? '') === type && !host.gpusInUse.has(id)) n++;
  return n;
}

/** Whether `s` may have holding `h` freed for it (rule 3). */
function mayTake(s: EndpointState, h: Holding): boolean {
  const v = h.owner;
  if (!v || h.kind === 'paused') return true; // already being stopped, or a paused worker: anyone's
  if (v.count <= v.d.workersMin) return false;
  if (s.count < s.d.workersMin) return true; // a reservation
  if (rankOf(v, 1) < rankOf(s, 0)) return true;
  if (rankOf(v, 1) > rankOf(s, 0)) return false;
  // Same priority: never a worker still starting (two bursts would take each other's cold starts
  // in turn); only from one over its fair share, and never so far that the two swap places.
  if (h.kind === 'starting') return false;
  // A running job is preempted for an equal only once the waiting one has aged a step (starvation, not a moment's imbalance).
  if (h.kind === 'busy' && s.waitedMs < s.agingMs) return false;
  return (v.held - h.devices.length) / v.d.shareWeight >= (s.held + s.d.gpus) / s.d.shareWeight;
}

/** What a reason says of GPUs held: their endpoint (null: being stopped), how many, and their model. */
interface HeldGpus {
  owner: { d: { id: string; priority: number } } | null;
  gpus: number;
  type: string;
}

/** What holds the GPUs a waiting worker could use (allocator-reasons.ts's holderSummary as first written: a map per holder). */
function holderSummary(usable: readonly HeldGpus[]): string {
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
  const parts = named.slice(0, 3).map(([id, e], i) => `${counts(e.types)}${i === 0 ? ' held' : ''} by \`${id}\` at priority ${e.priority}`);
  if (named.length > 3) parts.push(`and ${named.length - 3} more endpoints`);
  const stopping = byOwner.get('');
  const tail = stopping ? `${parts.length > 0 ? ' ' : ''}(being stopped: ${counts(stopping.types)})` : '';
  return `; ${parts.join(', ')}${tail}`;
}
