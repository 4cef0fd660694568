import type { Clock } from '../../src/util/clock.js';

/** A clock for tests: the real time plus an offset the test moves; timers are real. */
export interface OffsetClock extends Clock {
  /** Runs `work` with the clock `aheadMs` ahead of real time, then puts it back. */
  ahead<T>(aheadMs: number, work: () => Promise<T>): Promise<T>;
}

/** @example const clock = createOffsetClock(); await clock.ahead(6_000, () => gantry.gateway.reaper.runOnce()); */
export function createOffsetClock(): OffsetClock {
  let offset = 0;
  return {
    now: () => Date.now() + offset,
    after(ms, fn) {
      const timer = setTimeout(fn, ms);
      timer.unref();
      return () => clearTimeout(timer);
    },
    async ahead(aheadMs, work) {
      offset = aheadMs;
      try {
        return await work();
      } finally {
        offset = 0;
      }
    },
  };
}

/** A clock for tests that stands still until the test moves it; timers are real. */
export interface ManualClock extends Clock {
  /** Moves the clock by `ms` (forward; negative moves it back). */
  advance(ms: number): void;
}

/** @example const clock = createManualClock(); clock.advance(9_999); */
export function createManualClock(start = Date.now()): ManualClock {
  let current = start;
  return {
    now: () => current,
    after(ms, fn) {
      const timer = setTimeout(fn, ms);
      timer.unref();
      return () => clearTimeout(timer);
    },
    advance(ms) {
      current += ms;
    },
  };
}
