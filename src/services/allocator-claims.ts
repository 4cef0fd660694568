/**
 * An endpoint during one allocator decision as the fleet sees it (allocator.ts's EndpointState),
 * what it counts for (rule 1's effective priority), the kinds of holders, and whether it may
 * have another endpoint's holder freed for it (rules 3–5 of allocator.ts).
 */

/** A worker of an endpoint: what the fleet needs of allocator.ts's AllocWorker. */
export interface WorkerKind {
  id: string;
  busy: boolean;
  starting: boolean;
  busySince?: number;
}

/** An endpoint during one decision: what the fleet reads and writes of allocator.ts's EndpointState. */
export interface Claimant {
  d: {
    id: string;
    priority: number;
    shareWeight: number;
    preemptible: boolean;
    workersMin: number;
    gpus: number;
    gpuTypes?: readonly string[];
    image?: string;
    workers: readonly WorkerKind[];
    /** Its paused workers (the warm pool): they hold GPUs, count neither as workers nor toward its share. */
    paused?: readonly string[];
  };
  /** Its orders to stop workers for others (NO_ORDERS until the first: giveOrder), and how many of its paused workers it resumes. */
  out: { reclaim: readonly StopOrderOf[]; preempt: readonly StopOrderOf[]; resume: number };
  /** GPUs it holds, counting grants and GPUs being freed for it. */
  held: number;
  /** Workers it has, counting grants and those being freed for it, less those reclaimed. */
  count: number;
  /** Its priority raised by aging (allocator.ts): what it counts for while it has no worker, or keeps its last. */
  rank: number;
  /** How long its oldest job has waited, and the aging step. */
  waitedMs: number;
  agingMs: number;
  /** Its index among the fleet's claimants (set by the fleet of the decision). */
  slot: number;
}

/** An order to stop one of its workers, and why (allocator.ts's StopOrder). */
interface StopOrderOf {
  workerId: string;
  why: string;
}

/** The stop orders of an endpoint given none: one frozen empty list shared by all (two arrays per endpoint a decision, at 1,000 endpoints, were ~60 KB of garbage). */
export const NO_ORDERS: readonly StopOrderOf[] = Object.freeze([]);

/** Gives `v` an order to stop a worker: a preemption (busy) or a reclaim; its first of a kind replaces NO_ORDERS with a list of its own. */
export function giveOrder(v: Claimant, busy: boolean, order: StopOrderOf): void {
  const { out } = v;
  const list = busy ? out.preempt : out.reclaim;
  if (list !== NO_ORDERS) (list as StopOrderOf[]).push(order); // its own list, made below
  else if (busy) out.preempt = [order];
  else out.reclaim = [order];
}

/**
 * What an endpoint counts for when it asks for its next worker (`giving` 0) or is asked to give
 * one up (`giving` 1): its priority raised by aging while that worker is its first (or last),
 * its plain priority otherwise. The same measure orders requests and decides who may take
 * whose GPUs, so a worker granted for aging is never reclaimed by the one it went before.
 *
 * @example rankOf({ count: 0, rank: 70, d: { priority: 30 } }, 0) // 70: aged, it has no worker yet
 */
export function rankOf(s: Pick<Claimant, 'count' | 'rank'> & { d: { priority: number } }, giving: 0 | 1): number {
  return s.count - giving <= 0 ? s.rank : s.d.priority;
}

/** What a holder is: not an endpoint's worker (being stopped, its GPUs being freed), paused (the warm pool), idle, starting, busy. */
export const FREEING = 0;
export const PAUSED = 1;
export const IDLE = 2;
export const STARTING = 3;
export const BUSY = 4;
/** The kinds in the order candidates are tried. */
export const KINDS = ['freeing', 'paused', 'idle', 'starting', 'busy'] as const;

/** Whether `s` may have a holder of `v` (null: being stopped) of this kind and size freed for it (rule 3). */
export function mayTake(s: Claimant, v: Claimant | null, kind: number, gpus: number): boolean {
  if (!v || kind === PAUSED) return true; // already being stopped, or a paused worker: anyone's
  if (v.count <= v.d.workersMin) return false;
  if (s.count < s.d.workersMin) return true; // a reservation
  const held = rankOf(v, 1);
  const wants = rankOf(s, 0);
  if (held < wants) return true;
  if (held > wants) return false;
  // Same priority: never a worker still starting (two bursts would take each other's cold starts
  // in turn); only from one over its fair share, and never so far that the two swap places.
  if (kind === STARTING) return false;
  // A running job is preempted for an equal only once the waiting one has aged a step (starvation, not a moment's imbalance).
  if (kind === BUSY && s.waitedMs < s.agingMs) return false;
  return (v.held - gpus) / v.d.shareWeight >= (s.held + s.d.gpus) / s.d.shareWeight;
}
