import type { Logger } from 'pino';
import type { Clock } from './clock.js';

/**
 * One background loop: the reaper, the webhook sender, the autoscaler, the shared-store poller,
 * the minute recorder and table care all run on it. The contract:
 * - `start` begins the loop (a second start does nothing); `stop` cancels the timer and waits
 *   for the pass in flight; a second `stop` waits for the same thing, and a stopped loop can be
 *   started again (leadership lost and won back).
 * - Passes never overlap. After a pass the next one is due `everyMs` later, on the injected
 *   `Clock` (tests move it instead of sleeping).
 * - `kick` runs exactly one more pass: now when the loop waits for its timer, right after the
 *   current pass when one runs; kicks during a pass fold into that one.
 * - A pass that throws (or rejects) is logged with the loop's name and the loop goes on.
 * - A pass that returns `true` has more to do than one pass handles: the next runs at once
 *   (after a turn of the event loop), not `everyMs` later.
 */
export interface Periodic {
  start(): void;
  /** Stops the loop and waits for the pass in flight. */
  stop(): Promise<void>;
  /** One more pass: now if idle, after the current one if running. Nothing while stopped. */
  kick(): void;
  /** Whether the loop is started. */
  readonly active: boolean;
  /** Passes finished since the loop was made (thrown ones too): tests wait on a count. */
  readonly passes: number;
  /** Resolves when a pass that begins after this call has finished (or the loop stops). */
  nextPass(): Promise<void>;
}

/** What a pass is told. */
export interface PassInfo {
  /** How much later than due a timed pass began (event-loop lag, a paused process); 0 for a kicked one. */
  lateMs: number;
}

/** A loop's settings. */
export interface PeriodicOptions {
  /** Names the loop in the log line of a failed pass. */
  name: string;
  /** Milliseconds from the end of one pass to the start of the next. */
  everyMs: number;
  /** One pass; `true` asks for the next one at once. */
  pass(info: PassInfo): Promise<boolean | void> | boolean | void;
  logger: Pick<Logger, 'error'>;
  clock: Clock;
  /** Run the first pass at `start` (true) or `everyMs` after it (false, the default). */
  runAtStart?: boolean;
}

/**
 * @example
 * const loop = periodic({ name: 'reaper', everyMs: 1_000, pass: () => reap(), logger, clock });
 * loop.start(); loop.kick(); await loop.stop();
 */
export function periodic(options: PeriodicOptions): Periodic {
  return new Loop(options);
}

class Loop implements Periodic {
  active = false;
  passes = 0;
  private running: Promise<void> | undefined;
  private again = false;
  private cancelTimer: (() => void) | undefined;
  private waiters: (() => void)[] = [];
  /** Waiters of the pass in flight are told at its end; new waiters wait for the next one. */
  private nextWaiters: (() => void)[] = [];

  constructor(private readonly options: PeriodicOptions) {}

  start(): void {
    if (this.active) return;
    this.active = true;
    if (this.running) {
      // stop() is still waiting for a pass: the loop goes on after it.
      this.again = true;
      return;
    }
    if (this.options.runAtStart) this.runPass(0);
    else this.schedule(this.options.everyMs);
  }

  async stop(): Promise<void> {
    this.active = false;
    this.again = false;
    this.cancelTimer?.();
    this.cancelTimer = undefined;
    await this.running;
    this.release(this.waiters);
    this.release(this.nextWaiters);
  }

  kick(): void {
    if (!this.active) return;
    if (this.running) {
      this.again = true;
      return;
    }
    this.cancelTimer?.();
    this.cancelTimer = undefined;
    this.runPass(0);
  }

  nextPass(): Promise<void> {
    return new Promise((resolve) => {
      if (!this.active) resolve();
      else if (this.running) this.nextWaiters.push(resolve);
      else this.waiters.push(resolve);
    });
  }

  private release(list: (() => void)[]): void {
    for (const resolve of list.splice(0)) resolve();
  }

  private schedule(ms: number): void {
    const due = this.options.clock.now() + ms;
    this.cancelTimer = this.options.clock.after(ms, () => {
      this.cancelTimer = undefined;
      if (this.active && !this.running) this.runPass(Math.max(0, this.options.clock.now() - due));
    });
  }

  private runPass(lateMs: number): void {
    const told = this.waiters.splice(0);
    // The bookkeeping runs in `then`, always after `running` is set (a pass may end synchronously).
    this.running = this.callPass(lateMs).then((more) => this.afterPass(more, told));
  }

  /** The pass; true when it asks for the next one at once. A failure is logged, never thrown. */
  private async callPass(lateMs: number): Promise<boolean> {
    try {
      return (await this.options.pass({ lateMs })) === true;
    } catch (err) {
      this.options.logger.error({ err }, `${this.options.name} pass failed`);
      return false;
    }
  }

  private afterPass(more: boolean, told: (() => void)[]): void {
    this.passes++;
    this.running = undefined;
    this.release(told);
    this.waiters.push(...this.nextWaiters.splice(0));
    if (!this.active) return;
    if (this.again) {
      this.again = false;
      this.runPass(0);
    } else this.schedule(more ? 0 : this.options.everyMs);
  }
}
