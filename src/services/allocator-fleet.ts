import { modelLabel, type HostLoad } from '../pool/docker/placement.js';
import { describeBlock, fleetBlock, HeldPairs, holderSummary, namesEachHost } from './allocator-reasons.js';
import { BUSY, giveOrder, KINDS, mayTake, PAUSED, rankOf, type Claimant } from './allocator-claims.js';
import { CandidateLists } from './allocator-candidates.js';
import { readHolders, releaseHolders, type Holders } from './allocator-holders.js';
import { FreeDevices } from './free-index.js';

/**
 * The fleet during one allocator decision (allocator.ts): its free devices (free-index.ts)
 * and the workers holding the rest, as candidates to free. Made from the input without
 * copying it: host states only for the hosts a decision touches, and the holders kept field
 * by field in arrays (allocator-holders.ts: a fleet of 10,000 GPUs has thousands; a record
 * each would be garbage to collect every pass), candidates listed by kind, each list in
 * priority order (allocator-candidates.ts).
 */

/** Candidates on one host for one model, and the devices they make with the free ones. */
interface Picked {
  host: number;
  type: string;
  have: number;
  picked: number[];
}

/** The fleet during one decision: free devices (taken as grants are made) and who holds the rest. */
export class Fleet {
  private readonly free: FreeDevices;
  private readonly claimants: readonly Claimant[];
  private readonly h: Holders;
  /** Candidates to free, by kind, each in its endpoints' priority order (lowest first, being stopped before all). */
  private readonly candidates: CandidateLists;
  /** The endpoints' distinct priorities, ascending: a candidate's level is its place here + 1 (0: being stopped). */
  private priorities: number[] = [];
  private readonly reasons = new Map<string, string>();
  /** GPUs held per endpoint and model, in the order first met, grants included (made when a reason first needs them). */
  private pairs: HeldPairs | null = null;
  /** Grants made before the pairs, field by field (endpoint index, model, GPUs): folded into the pairs when they are made. */
  private readonly grantOwner: number[] = [];
  private readonly grantType: string[] = [];
  private readonly grantGpus: number[] = [];
  /** Reclaim calls so far, and mayTake's answers of the current one (see mayTakeOf). */
  private calls = 0;
  private memo: { call: Int32Array; gpus: Int32Array; yes: Uint8Array } | null = null;
  /** When each holder's current job started, where known (busy workers: the least run is preempted first). */
  private since: Float64Array | null = null;
  /** How many models the holders have (Holders.model is below it), and each one's number. */
  private readonly modelCount: number;
  private readonly modelOf = new Map<string, number>();
  /** The models a reclaim call accepts, by number (reused by each call). */
  private readonly accepts: Uint8Array;
  /** The last reclaim's request and what it picked (lastFreed). */
  private lastFor: Claimant | null = null;
  private lastPicked: Picked | null = null;
  /** GPUs per model on hosts that are up, and how many hosts are up (made when a large fleet's reason first needs them). */
  private totals: { byModel: Map<string, number>; up: number } | null = null;

  /** `stopped`: told of each endpoint whose worker is stopped for another (its standing in the queue changed). */
  constructor(
    hosts: readonly HostLoad[],
    states: readonly Claimant[],
    private readonly stopped: (owner: Claimant) => void = () => {},
  ) {
    this.free = new FreeDevices(hosts);
    this.claimants = states;
    for (let i = 0; i < states.length; i++) states[i]!.slot = i;
    const read = readHolders(hosts, states, this.modelOf);
    this.h = read.h;
    this.since = read.since;
    this.modelCount = Math.max(1, this.modelOf.size);
    this.accepts = new Uint8Array(this.modelCount);
    this.candidates = this.candidateLists(hosts);
  }

  /**
   * Lets go of the decision's input: the reused tables and arrays drop their references to it
   * (kept, they would carry a fleet built for one pass into the old generation).
   */
  release(): void {
    releaseHolders(this.h);
    this.pairs?.release();
  }

  /**
   * The holders that may be freed (allocator-candidates.ts), by kind and their endpoint's
   * priority level: not busy workers of endpoints that are not preemptible, nor holders on a
   * host that is down (no reclaim could use them).
   */
  private candidateLists(hosts: readonly HostLoad[]): CandidateLists {
    const { h, claimants } = this;
    const priorities = (this.priorities = [...new Set(claimants.map((c) => c.d.priority))].sort((a, b) => a - b));
    const levelOf = new Map(priorities.map((p, i) => [p, i + 1]));
    // A loop, not Int32Array.from with a function (an iterator and its results per endpoint).
    const endpointLevel = new Int32Array(claimants.length);
    for (let e = 0; e < claimants.length; e++) endpointLevel[e] = levelOf.get(claimants[e]!.d.priority)!;
    const level = h.level;
    for (let k = 0; k < h.n; k++) {
      const e = h.owner[k]!;
      if ((h.kind[k] === BUSY && !claimants[e]?.d.preemptible) || !hosts[h.host[k]!]!.up) level[k] = -1;
      else level[k] = e < 0 ? 0 : endpointLevel[e]!;
    }
    return new CandidateLists({ n: h.n, kind: h.kind, level, since: this.since }, priorities.length + 1);
  }

  /**
   * Places one worker of `s` on free devices, where placeWorker over the whole fleet would
   * (the driver's own choice); false when none fits.
   */
  place(s: Claimant): boolean {
    const { d } = s;
    const typeList = d.gpuTypes && d.gpuTypes.length > 0 ? d.gpuTypes : null;
    if (!typeList ? this.free.total < d.gpus : !typeList.some((t) => this.free.freeOfModel(t) >= d.gpus)) return false;
    const model = this.free.place(d.gpus, typeList, d.image);
    if (model === null) return false;
    // Granted now: counted among what it holds in the reasons.
    const e = s.slot;
    if (this.pairs) this.pairs.add(e, model, d.gpus);
    else {
      this.grantOwner.push(e);
      this.grantType.push(model);
      this.grantGpus.push(d.gpus);
    }
    return true;
  }

  /** Resumes one of `s`'s own paused workers on a host that is up (its GPUs are already held); false when it has none. */
  resumeOwn(s: Claimant): boolean {
    if (!s.d.paused || s.d.paused.length === 0) return false;
    const { h } = this;
    const e = s.slot;
    const { candidates } = this;
    const list = candidates.lists[PAUSED]!;
    for (let i = candidates.live(PAUSED, 0); i < list.length; i = candidates.live(PAUSED, i + 1)) {
      const k = list[i]!;
      if (h.owner[k] !== e) continue;
      candidates.take(k, PAUSED);
      s.out.resume++;
      return true;
    }
    return false;
  }

  /**
   * Frees room for one worker of `s` (rule 3): the cheapest set of holdings on one host that,
   * with its free devices of one acceptable model, makes the worker's count. Stops them (the
   * orders go to their endpoints) and holds the free devices for `s`. False when nothing may
   * be freed for it (lastFreed() says in words what a true one waits for).
   */
  reclaim(s: Claimant): boolean {
    const { h } = this;
    const need = s.d.gpus;
    const rank = rankOf(s, 0);
    const mayBreak = s.count >= s.d.workersMin;
    // Past this level, the endpoints' priority is above the rank: where the scan may stop (levels ascend along each list).
    let top = 0;
    while (top < this.priorities.length && this.priorities[top]! <= rank) top++;
    const accepts = this.acceptedModels(s);
    const self = s.slot;
    const call = ++this.calls;
    // Made on the first host that needs more than one holder (most requests take the first they meet).
    let buckets: Map<number, Picked> | null = null;
    const models = this.modelCount;
    const { candidates } = this;
    for (let kind = 0; kind < KINDS.length; kind++) {
      const list = candidates.lists[kind]!;
      const stops = mayBreak && kind !== PAUSED;
      for (let i = candidates.live(kind, 0); i < list.length; i = candidates.live(kind, i + 1)) {
        const k = list[i]!;
        if (stops && h.level[k]! > top) break;
        const e = h.owner[k]!;
        if (e === self || (accepts !== null && accepts[h.model[k]!] === 0)) continue;
        if (e >= 0 && !this.mayTakeOf(call, s, this.claimants[e]!, e, kind, h.width[k]!)) continue;
        const key = h.host[k]! * models + h.model[k]!;
        let b = buckets?.get(key);
        if (!b) {
          b = { host: h.host[k]!, type: h.type[k]!, have: this.free.freeOn(h.host[k]!, h.type[k]!), picked: [] };
          if (b.have + h.width[k]! < need) (buckets ??= new Map()).set(key, b);
        }
        b.have += h.width[k]!;
        b.picked.push(k);
        if (b.have >= need) {
          this.take(s, b);
          return true;
        }
      }
    }
    return false;
  }

  /** The models `s` accepts, by number (a table reused by each call); null: any. */
  private acceptedModels(s: Claimant): Uint8Array | null {
    const types = s.d.gpuTypes;
    if (!types || types.length === 0) return null;
    const accepts = this.accepts.fill(0);
    for (let i = 0; i < types.length; i++) {
      const model = this.modelOf.get(types[i]!);
      if (model !== undefined) accepts[model] = 1;
    }
    return accepts;
  }

  /**
   * mayTake, remembered for the rest of one reclaim call per (endpoint, kind) and size: nothing
   * it reads changes during the call, and a scan meets the same endpoint's holders many times.
   */
  private mayTakeOf(call: number, s: Claimant, v: Claimant, e: number, kind: number, gpus: number): boolean {
    const slot = e * KINDS.length + kind;
    const memo = (this.memo ??= { call: new Int32Array(this.claimants.length * KINDS.length), gpus: new Int32Array(this.claimants.length * KINDS.length), yes: new Uint8Array(this.claimants.length * KINDS.length) });
    if (memo.call[slot] === call && memo.gpus[slot] === gpus) return memo.yes[slot] === 1;
    const yes = mayTake(s, v, kind, gpus);
    memo.call[slot] = call;
    memo.gpus[slot] = gpus;
    memo.yes[slot] = yes ? 1 : 0;
    return yes;
  }

  /** Stops the picked holders for `s` and holds the host's free devices of the model for it. */
  private take(s: Claimant, b: Picked): void {
    const { h } = this;
    const name = this.free.hosts[b.host]!.name;
    let freed = 0;
    for (let i = 0; i < b.picked.length; i++) freed += h.width[b.picked[i]!]!;
    this.free.hold(b.host, b.type, Math.max(0, s.d.gpus - freed));
    // The words every order of this call shares, made once (a reason is a chain of joined strings: fewer joins, less garbage).
    const forWhom = ` for \`${s.d.id}\` (priority ${s.d.priority}): `;
    const where = ` ${modelLabel(b.type)} on ${name}`;
    for (let i = 0; i < b.picked.length; i++) {
      const k = b.picked[i]!;
      this.candidates.take(k, h.kind[k]!);
      const v = this.claimants[h.owner[k]!];
      if (!v) continue;
      const gpus = h.width[k]!;
      const busy = h.kind[k] === BUSY;
      const paused = h.kind[k] === PAUSED;
      const what = busy ? ', its jobs requeued' : paused ? ', paused in the warm pool' : IDLE_OR_STARTING[h.kind[k]!]!;
      giveOrder(v, busy, { workerId: h.worker[k]!, why: `${busy ? 'preempted' : 'reclaimed'}${forWhom}${gpus}${where}${what}` });
      if (!paused) {
        v.held -= gpus;
        v.count--;
        this.stopped(v);
      }
    }
    this.lastFor = s;
    this.lastPicked = b;
  }

  /** What the last reclaim waits for, in words: `2 L4 on a being freed (stopping workers of \`lo\`, \`b\`)`. */
  lastFreed(): string {
    const s = this.lastFor!;
    const b = this.lastPicked!;
    const { h } = this;
    const what = `${s.d.gpus} ${modelLabel(b.type)} on ${this.free.hosts[b.host]!.name} being freed`;
    const names: string[] = [];
    for (let i = 0; i < b.picked.length; i++) {
      const v = this.claimants[h.owner[b.picked[i]!]!];
      if (v && !names.includes(`\`${v.d.id}\``)) names.push(`\`${v.d.id}\``);
    }
    return names.length === 0 ? what : `${what} (stopping workers of ${names.join(', ')})`;
  }

  /** Why `s` must wait: no room, and who holds the GPUs it could use (one text per request shape in a decision: a big fleet has many waiting). */
  whyNot(s: Claimant): string {
    const types = s.d.gpuTypes && s.d.gpuTypes.length > 0 ? s.d.gpuTypes : null;
    const key = `${s.d.gpus}|${types ? types.join('\u0000') : ''}`;
    let text = this.reasons.get(key);
    if (text === undefined) this.reasons.set(key, (text = `${this.block(s)}${holderSummary(this.heldPairs(), this.claimants, types)}`));
    return text;
  }

  /** GPUs held per endpoint and model in the order first met (holders in the input's order, then grants). */
  private heldPairs(): HeldPairs {
    if (this.pairs) return this.pairs;
    const { h } = this;
    const pairs = (this.pairs = HeldPairs.for(this.claimants.length));
    for (let k = 0; k < h.n; k++) pairs.add(h.owner[k]!, h.type[k]!, h.width[k]!);
    for (let i = 0; i < this.grantOwner.length; i++) pairs.add(this.grantOwner[i]!, this.grantType[i]!, this.grantGpus[i]!);
    return pairs;
  }

  /** Why no host has room: each host named on a small fleet, the sums on a large one. */
  private block(s: Claimant): string {
    const hosts = this.free.hosts;
    if (namesEachHost(hosts.length)) return describeBlock(this.free.views(), s.d);
    const totals = (this.totals ??= modelTotals(hosts));
    const types = s.d.gpuTypes && s.d.gpuTypes.length > 0 ? [...new Set(s.d.gpuTypes)] : null;
    let total = 0;
    let free = 0;
    for (const [model, n] of totals.byModel) if (!types || types.includes(model)) total += n;
    if (types) for (const model of types) free += this.free.freeOfModel(model);
    else free = this.free.total;
    return fleetBlock(s.d, { free, total, up: totals.up, hosts: hosts.length });
  }
}

/** The end of an order's reason by the holder's kind, for those neither busy nor paused. */
const IDLE_OR_STARTING = KINDS.map((kind) => `, ${kind} beyond workersMin`);

/** GPUs per model on the hosts that are up, and how many hosts are up. */
function modelTotals(hosts: readonly HostLoad[]): { byModel: Map<string, number>; up: number } {
  const byModel = new Map<string, number>();
  let up = 0;
  for (let k = 0; k < hosts.length; k++) {
    const h = hosts[k]!;
    if (!h.up) continue;
    up++;
    // A run of devices of one model counted at once (a host is mostly of one model): a map update per run, not per device.
    for (let i = 0, j = 0; i < h.gpus.length; i = j) {
      const model = h.gpuTypes?.[i] ?? '';
      for (j = i + 1; j < h.gpus.length && (h.gpuTypes?.[j] ?? '') === model; j++);
      byModel.set(model, (byModel.get(model) ?? 0) + (j - i));
    }
  }
  return { byModel, up };
}
