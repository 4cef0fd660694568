import { isContainerWorker, type WorkerSettings } from '../jobs/endpoint-settings.js';
import type { ColdStartKind, PoolWorkerInfo, PoolWorkerState } from '../jobs/pool-view.js';
import type { WorkerExit, WorkerHandle } from './driver.js';
import type { WorkerLog } from './worker-log.js';

/**
 * Where one worker slot of a pool is in its life (docs/scaling.md, "A worker's life"):
 * - `new`: made, nothing started yet;
 * - `launching`: its key made and the driver asked to start it (for a container: placed,
 *   pulled, created, started);
 * - `starting`: its process runs and has not yet polled for a job;
 * - `serving`: it polled for a job (idle or running, by the jobs it holds);
 * - `waiting-for-room`: the allocator gave it no GPU yet (made so, or no host had room when it
 *   was launched); launched when the allocator grants it one, not a crash;
 * - `crashed`: its process ended (or failed to start) on its own; restarted after a backoff;
 * - `draining`: asked to stop (SIGTERM, then SIGKILL after the grace); its process or its
 *   launch is still there;
 * - `paused`: idle and paused in the warm pool (flashboot): its container kept, frozen, with
 *   its GPUs and its key; resumed (`launching` again) when the pool wants a worker, or
 *   removed when the allocator reclaims its GPUs;
 * - `gone`: out of the pool (its log kept among the stopped workers).
 */
export type SlotState = 'new' | 'launching' | 'starting' | 'serving' | 'waiting-for-room' | 'crashed' | 'draining' | 'paused' | 'gone';

/** The moves a slot may make; any other is a bug (moveTo throws). */
export const SLOT_MOVES: Readonly<Record<SlotState, readonly SlotState[]>> = {
  new: ['launching', 'waiting-for-room', 'gone'],
  launching: ['starting', 'waiting-for-room', 'crashed', 'draining', 'gone'],
  starting: ['serving', 'crashed', 'draining', 'gone'],
  serving: ['crashed', 'draining', 'paused', 'gone'],
  'waiting-for-room': ['launching', 'gone'],
  crashed: ['launching', 'gone'],
  draining: ['gone'],
  paused: ['launching', 'draining', 'gone'],
  gone: [],
};

/** A move SLOT_MOVES does not allow. */
export class SlotMoveError extends Error {
  constructor(id: string, from: SlotState, to: SlotState, why: string) {
    super(`pool worker ${id}: no move from ${from} to ${to} (${why})`);
    this.name = 'SlotMoveError';
  }
}

/** One worker slot of the pool: its state, current process (if any), log and crash history. */
export interface Slot {
  id: string;
  state: SlotState;
  /** Why it made its last move. */
  movedBecause: string;
  /** The worker settings (as JSON text) this slot runs. */
  spec: string;
  handle: WorkerHandle | null;
  /** The start in flight (from the start request until the process runs or failed to start). */
  launching: Promise<void> | null;
  startedAt: number | null;
  readyAt: number | null;
  /**
   * The cold start being timed (docs/scaling.md, "Cold starts"): since when (the start or
   * resume request) and how, set only when a job waited at that moment; recorded and cleared
   * at the worker's first job-take.
   */
  coldStart: { from: number; kind: ColdStartKind } | null;
  /** When it was last resumed from the warm pool; null for a fresh start. */
  resumedAt: number | null;
  held: number;
  /** When the job it took last of those it holds started (the store's word); null when it holds none or it is not known. */
  busySince?: number | null;
  idleSince: number | null;
  restarts: number;
  failures: number;
  restartAt: number | null;
  reason: string | null;
  /** How its last process ended (describeExit), kept across restarts. */
  lastExit: string | null;
  /** A store row says the worker reported itself unhealthy (ping status=unhealthy). */
  selfUnhealthy: string | null;
  /** What its start in flight is doing (`pulling 43%`), as the driver told; null otherwise. */
  progress: string | null;
  /** Its last start failed to pull the image (a registry's refusal): unhealthy until a start succeeds. */
  pullFailed: boolean;
  /** The worker's own key, until the process it was given is gone (then revoked). */
  key: { id: string; key: string } | null;
  log: WorkerLog;
  /** Settles once the current process has exited and its jobs were requeued. */
  finished: Promise<void>;
}

/**
 * Moves a slot to `next`, checked against SLOT_MOVES; `why` is kept with it (and in the error
 * of a move that is not allowed).
 *
 * @example moveTo(slot, 'draining', 'scaled down'); // from starting or serving; from draining it throws
 */
export function moveTo(slot: Slot, next: SlotState, why: string): void {
  if (!SLOT_MOVES[slot.state].includes(next)) throw new SlotMoveError(slot.id, slot.state, next, why);
  slot.state = next;
  slot.movedBecause = why;
}

/** Consecutive failed starts after which a worker is reported unhealthy. */
const UNHEALTHY_AFTER = 2;

/** What the admin API and /health call the slot's state. */
export function reportedState(slot: Slot): PoolWorkerState {
  if (slot.state === 'draining') return 'draining';
  if (slot.state === 'paused') return 'paused';
  if (slot.selfUnhealthy !== null) return 'unhealthy';
  if (slot.state === 'serving') return slot.held > 0 ? 'running' : 'idle';
  if (slot.state === 'waiting-for-room') return 'throttled';
  // Crash-looping (or refused by a registry): unhealthy until a restart gets as far as polling for jobs.
  return slot.failures >= UNHEALTHY_AFTER || slot.pullFailed ? 'unhealthy' : 'initializing';
}

/** The listing's view of a slot; `handle` is its current process, or for a stopped one its last. */
export function infoOf(slot: Slot, handle: WorkerHandle | null): PoolWorkerInfo {
  return {
    id: slot.id,
    state: reportedState(slot),
    pid: handle?.pid ?? null,
    host: handle?.host ?? null,
    container: handle?.container ?? null,
    startedAt: slot.startedAt,
    readyAt: slot.readyAt,
    jobs: slot.held,
    restarts: slot.restarts,
    reason: slot.selfUnhealthy ?? slot.reason,
    progress: slot.progress,
    restartAt: slot.handle ? null : slot.restartAt,
    lastExit: slot.lastExit,
    stoppedAt: null,
  };
}

/**
 * How a worker's process ended, in words. `asked`: the pool had asked it to stop (SIGTERM), so
 * ending on that signal (or with code 0) is the normal stop, not a kill; a SIGKILL after the
 * grace period stays "killed by SIGKILL".
 *
 * @example describeExit({ code: null, signal: 'SIGTERM' }, true) // 'stopped by SIGTERM, as asked'
 */
export function describeExit(exit: WorkerExit, asked = false): string {
  let text: string;
  if (exit.error) text = `failed to start (${exit.error})`;
  else if (asked && (exit.signal === 'SIGTERM' || exit.code === 143)) text = 'stopped by SIGTERM, as asked';
  else if (asked && exit.code === 0) text = 'exited with code 0, as asked';
  else if (exit.signal) text = `killed by ${exit.signal}`;
  else if (exit.code === null) text = 'lost';
  else text = `exited with code ${exit.code}`;
  return exit.detail ? `${text}: ${exit.detail}` : text;
}

/**
 * Output lines with each run of one repeated line said once, with its count: a worker that
 * prints the same error five times before it dies has one line in its crash reason, not five.
 *
 * @example collapseRepeats(['boom', 'boom', 'boom', 'bye']) // ['boom (×3)', 'bye']
 */
export function collapseRepeats(lines: readonly string[]): string[] {
  const out: string[] = [];
  let last: string | undefined;
  let count = 0;
  const push = () => {
    if (last !== undefined) out.push(count > 1 ? `${last} (×${count})` : last);
  };
  for (const line of lines) {
    if (line === last) {
      count++;
      continue;
    }
    push();
    last = line;
    count = 1;
  }
  push();
  return out;
}

/** The `started` note of a worker's log: where it runs and what. */
export function describeStart(handle: WorkerHandle, settings: WorkerSettings): string {
  if (!isContainerWorker(settings)) return `pid ${handle.pid ?? '-'}, command ${JSON.stringify(settings.command)}`;
  const command = settings.command === undefined ? '' : `, command ${JSON.stringify(settings.command)}`;
  return `container ${handle.container ?? '-'} on Docker host ${handle.host ?? '-'}, image ${settings.image}${command}`;
}
