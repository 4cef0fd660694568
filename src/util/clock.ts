/**
 * Time as the background services see it: the current time and one-shot timers. Injected, so a
 * test moves time forward and runs what became due instead of sleeping (test/helpers/clock.ts).
 */
export interface Clock {
  /** Epoch milliseconds. */
  now(): number;
  /**
   * Runs `fn` once after `ms` milliseconds; the returned function cancels it. The timer never
   * keeps the process alive on its own (services are stopped explicitly).
   */
  after(ms: number, fn: () => void): () => void;
}

/** The real clock: Date.now and unref'ed setTimeout. */
export const systemClock: Clock = {
  now: () => Date.now(),
  after(ms, fn) {
    const timer = setTimeout(fn, ms);
    timer.unref();
    return () => clearTimeout(timer);
  },
};
