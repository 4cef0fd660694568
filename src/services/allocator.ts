import type { HostLoad } from '../pool/docker/placement.js';
import { Heap } from '../util/heap.js';
import { NO_ORDERS, rankOf, type Claimant } from './allocator-claims.js';
import { Fleet } from './allocator-fleet.js';

/**
 * The allocator (docs/scaling.md, "One allocator for the whole fleet"), pure: each endpoint's
 * scaler says how many more workers it wants (planScale); the allocator decides, across all
 * endpoints at once, who gets the fleet's GPUs. It governs workers that hold GPUs; a worker
 * that asks for none (a local process, a container without GPUs) is granted as asked.
 *
 * The rules, in the order they are applied:
 * 1. Requests are served one worker at a time, in order: first those within an endpoint's
 *    `workersMin` (a reservation that always holds), then by effective priority (rankOf:
 *    `priority`, plus AGING_STEP for each `agingMs` its oldest job has waited, up to 100, for
 *    an endpoint's first worker only), then by weighted fair share (GPUs held ÷ `shareWeight`,
 *    lowest first: max-min fairness), then by the longest wait.
 * 2. A request takes free GPUs where placement (placeWorker, the code the Docker driver runs)
 *    finds room, the endpoint's `gpuTypes` in order.
 * 3. Otherwise it waits for GPUs already being freed (workers draining), and failing that
 *    reclaims: idle (then still starting) workers of endpoints beyond their `workersMin` with
 *    a lower priority, or (not those still starting) of the same priority holding more than
 *    their fair share; then busy workers of such endpoints that are `preemptible`, the job
 *    that started last first (for the same priority, only once the waiting endpoint's oldest
 *    job has waited `agingMs`) (their jobs are requeued, no attempt counted). "Lower" and
 *    "same" compare the effective priority of rule 1, an endpoint's last worker counting at
 *    its aged one: a worker granted for aging is not taken back by the priority it went
 *    before. A reservation (within `workersMin`) may reclaim from any priority. Workers
 *    within their endpoint's `workersMin` are never reclaimed. Reclaimed GPUs are granted on a
 *    later pass, once the stopped workers have exited; the request waits for them meanwhile.
 * 4. Otherwise it waits (`throttled`), and the reason names what holds the GPUs it could use.
 *
 * The warm pool (flashboot): an endpoint's paused workers hold their GPUs but count neither as
 * its workers nor toward its fair share. Its own requests take them first (a resume, before
 * free GPUs); any other endpoint's request that finds no free GPU reclaims them before
 * anything else is stopped, whatever the priorities (they hold no job and are not wanted now).
 */

/** A worker of an endpoint, as the allocator sees it. */
export interface AllocWorker {
  id: string;
  /** Holds a job. */
  busy: boolean;
  /** Not yet serving (starting, or waiting to restart). */
  starting: boolean;
  /** When its current job started (busy), where known: among equals, the least run is preempted first. */
  busySince?: number;
}

/** One endpoint's settings, workers and wants. */
export interface EndpointDemand {
  id: string;
  /** 0–100, higher first. */
  priority: number;
  /** 1–100: the weight of its fair share among endpoints of the same priority. */
  shareWeight: number;
  /** Its busy workers may be stopped for a higher priority (their jobs requeued, uncounted). */
  preemptible: boolean;
  workersMin: number;
  /** GPUs one worker asks for (of one model); 0: none, granted as asked. */
  gpus: number;
  /** Acceptable GPU models, most preferred first; absent: any. */
  gpuTypes?: readonly string[];
  /** The worker's image (placement prefers hosts that hold it). */
  image?: string;
  /** Its workers that are not being stopped, and not waiting for a GPU. */
  workers: readonly AllocWorker[];
  /** Its paused workers (flashboot's warm pool), which hold their GPUs; absent: none. */
  paused?: readonly string[];
  /** More workers wanted now (planScale's start, plus its workers waiting for a GPU). */
  want: number;
  /** Since when its oldest job waits (aging); null when none waits. */
  waitingSince: number | null;
}

/** What the allocator decides from. */
export interface AllocatorInput {
  now: number;
  /** The fleet: each host's GPUs and who holds them (`holders`: worker id → device ids). */
  hosts: readonly HostLoad[];
  endpoints: readonly EndpointDemand[];
  /** Waiting this long raises a request's priority by AGING_STEP (default 60 s). */
  agingMs?: number;
}

/** A worker to stop, and why (its log and the admin API say so). */
export interface StopOrder {
  workerId: string;
  why: string;
}

/** What one endpoint gets. */
export interface EndpointAllocation {
  /** Workers to start now (GPUs are free for them, or they are its paused workers, resumed). */
  start: number;
  /** Of `start`, how many are its paused workers resumed (they hold their GPUs already). */
  resume: number;
  /** Paused, idle or starting workers to stop, for another endpoint. */
  reclaim: readonly StopOrder[];
  /** Busy workers to stop for a higher priority, their jobs requeued without counting an attempt. */
  preempt: readonly StopOrder[];
  /** Workers wanted that wait (health's `throttled`). */
  waiting: number;
  /** Why they wait: what holds the GPUs, or that they are being freed for it. */
  reason: string | null;
}

/** Priority added for each `agingMs` a request waits. */
export const AGING_STEP = 10;
const DEFAULT_AGING_MS = 60_000;

/** An endpoint during one decision. */
export interface EndpointState extends Claimant {
  d: EndpointDemand;
  out: EndpointAllocation;
  left: number;
  blocked: boolean;
  /** Its place in the queue of requests (-1: not in it). */
  at: number;
}

/**
 * Decides who gets the fleet's GPUs this pass (the rules above).
 *
 * @example
 * const out = allocate({ now, hosts: [{ name: 'a', up: true, gpus: ['0'], gpusInUse: new Set(['0']), workers: 1, holders: new Map([['lo-1', ['0']]]) }],
 *   endpoints: [{ id: 'lo', priority: 10, ..., workers: [{ id: 'lo-1', busy: false, starting: false }], want: 0 },
 *               { id: 'hi', priority: 90, ..., gpus: 1, workers: [], want: 1 }] });
 * // out.get('lo').reclaim → [{ workerId: 'lo-1', why: 'reclaimed for `hi` (priority 90) …' }]; out.get('hi').waiting → 1
 */
export function allocate(input: AllocatorInput): Map<string, EndpointAllocation> {
  const agingMs = input.agingMs ?? DEFAULT_AGING_MS;
  // The answers by endpoint id, and the endpoints in the order first met (a later demand of the same id takes its place, as a Map's set would).
  const decided = new Map<string, EndpointAllocation>();
  const list: EndpointState[] = [];
  for (let i = 0; i < input.endpoints.length; i++) {
    const d = oneShape(input.endpoints[i]!);
    const waited = d.waitingSince === null ? 0 : Math.max(0, input.now - d.waitingSince);
    const rank = Math.min(100, d.priority + AGING_STEP * Math.floor(waited / agingMs));
    // No stop orders until one is given (most endpoints get none): the shared empty list, replaced on the first (Fleet.take).
    const out: EndpointAllocation = { start: 0, resume: 0, reclaim: NO_ORDERS, preempt: NO_ORDERS, waiting: 0, reason: null };
    const state: EndpointState = { d, out, held: 0, count: d.workers.length, left: d.want, blocked: false, rank, waitedMs: waited, agingMs, at: -1, slot: -1 };
    if (decided.has(d.id)) list[list.findIndex((s) => s.d.id === d.id)] = state;
    else list.push(state);
    decided.set(d.id, out);
  }
  const queue = new Heap<EndpointState>(before, QUEUE_PLACE);
  // A worker stopped for another changes its endpoint's standing (its share; its rank, were it its last).
  // Loops by index: no iterator results made per endpoint (a decision's garbage is collected beside its fresh input).
  const fleet = new Fleet(input.hosts, list, (owner) => queue.update(owner as EndpointState));
  for (let i = 0; i < list.length; i++) if (list[i]!.left > 0) queue.push(list[i]!);
  for (let s = queue.pop(); s !== undefined; s = queue.pop()) {
    serveOne(s, fleet);
    if (s.left > 0 && !s.blocked) queue.push(s);
  }
  fleet.release();
  return decided;
}

/**
 * The demand with every field present, in one order: the decision reads these fields in its
 * hottest loops, and demands made with optional spreads (the autoscaler's `image`/`gpuTypes`,
 * `waitingSince` a number or null) came in so many hidden classes that every read went
 * megamorphic (`--log-ic`: ~13,000 megamorphic loads per decision at 1,000 endpoints).
 */
function oneShape(d: EndpointDemand): EndpointDemand {
  return {
    id: d.id,
    priority: d.priority,
    shareWeight: d.shareWeight,
    preemptible: d.preemptible,
    workersMin: d.workersMin,
    gpus: d.gpus,
    gpuTypes: d.gpuTypes,
    image: d.image,
    workers: d.workers,
    paused: d.paused,
    want: d.want,
    waitingSince: d.waitingSince,
  };
}

/** Each endpoint keeps its own place in the queue (Heap.update finds it there). */
const QUEUE_PLACE = { get: (s: EndpointState) => s.at, set: (s: EndpointState, i: number) => void (s.at = i) };

/** Whether `a`'s next request goes before `b`'s (rule 1). */
function before(a: EndpointState, b: EndpointState): boolean {
  const ra = a.count < a.d.workersMin ? 0 : 1;
  const rb = b.count < b.d.workersMin ? 0 : 1;
  if (ra !== rb) return ra < rb;
  const ka = rankOf(a, 0);
  const kb = rankOf(b, 0);
  if (ka !== kb) return ka > kb;
  const sa = share(a);
  const sb = share(b);
  if (sa !== sb) return sa < sb;
  const wa = a.d.waitingSince ?? Number.MAX_SAFE_INTEGER;
  const wb = b.d.waitingSince ?? Number.MAX_SAFE_INTEGER;
  if (wa !== wb) return wa < wb;
  return a.d.id < b.d.id;
}

/** Its fair-share measure: GPUs held (workers, for one without GPUs) per unit of weight. */
export function share(s: EndpointState): number {
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
  if (fleet.reclaim(s)) {
    s.out.waiting++;
    s.held += d.gpus;
    s.count++;
    // Its first wait is the one its reason names: the words made only then.
    s.out.reason ??= `waiting for room: ${fleet.lastFreed()}`;
    return;
  }
  s.blocked = true;
  s.out.waiting += s.left + 1;
  s.left = 0;
  const why = fleet.whyNot(s);
  s.out.reason = s.out.reason === null ? `waiting for room: ${why}` : `${s.out.reason}; then ${why}`;
}
