import pino from 'pino';
import { describe, expect, it } from 'vitest';
import type { Clock } from '../../src/util/clock.js';
import { periodic, type PeriodicOptions } from '../../src/util/periodic.js';

/** A clock whose timers only fire when the test fires them. */
function timerClock(): Clock & { now_: number; pending(): { ms: number; fire(): void }[] } {
  const timers: { ms: number; fn: () => void; cancelled: boolean }[] = [];
  const clock = {
    now_: 1_000_000,
    now: () => clock.now_,
    after(ms: number, fn: () => void) {
      const t = { ms, fn, cancelled: false };
      timers.push(t);
      return () => {
        t.cancelled = true;
      };
    },
    pending: () =>
      timers
        .filter((t) => !t.cancelled)
        .map((t) => ({
          ms: t.ms,
          fire: () => {
            t.cancelled = true;
            t.fn();
          },
        })),
  };
  return clock;
}

/** A logger recording its error lines. */
function recordingLogger(): { logger: PeriodicOptions['logger']; errors: string[] } {
  const errors: string[] = [];
  const logger = pino({ level: 'silent' });
  logger.error = ((obj: unknown, msg?: string) => void errors.push(msg ?? String(obj))) as typeof logger.error;
  return { errors, logger };
}

const tick = (): Promise<void> => new Promise((r) => setImmediate(r));

describe('periodic (util/periodic.ts)', () => {
  it('runs a pass every everyMs on the clock, the next one set only when a pass ends', async () => {
    const clock = timerClock();
    let runs = 0;
    const loop = periodic({ name: 't', everyMs: 500, pass: () => void runs++, logger: recordingLogger().logger, clock });
    loop.start();
    loop.start(); // a second start does nothing
    expect(clock.pending()).toHaveLength(1);
    expect(clock.pending()[0]!.ms).toBe(500);
    const next = loop.nextPass();
    clock.pending()[0]!.fire();
    await next;
    expect(runs).toBe(1);
    expect(loop.passes).toBe(1);
    expect(clock.pending()).toHaveLength(1);
    await loop.stop();
    expect(clock.pending()).toHaveLength(0);
  });

  it('kick runs exactly one more pass: now when idle, once after the current one when busy', async () => {
    const clock = timerClock();
    let release: () => void = () => {};
    let runs = 0;
    const loop = periodic({
      name: 't',
      everyMs: 10_000,
      pass: () => {
        runs++;
        return new Promise<void>((r) => (release = r));
      },
      logger: recordingLogger().logger,
      clock,
      runAtStart: true,
    });
    loop.start();
    expect(runs).toBe(1); // runAtStart
    loop.kick();
    loop.kick();
    loop.kick(); // three kicks during a pass: one more pass
    release();
    await tick();
    expect(runs).toBe(2);
    release();
    await tick();
    expect(runs).toBe(2);
    expect(loop.passes).toBe(2);
    // Idle now (timer set): a kick cancels the timer and runs at once.
    expect(clock.pending()).toHaveLength(1);
    loop.kick();
    expect(runs).toBe(3);
    expect(clock.pending()).toHaveLength(0);
    release();
    await loop.stop();
  });

  it('a throwing pass is logged with the loop name and the loop goes on', async () => {
    const clock = timerClock();
    const { logger, errors } = recordingLogger();
    let runs = 0;
    const loop = periodic({
      name: 'flaky',
      everyMs: 100,
      pass: () => {
        runs++;
        if (runs === 1) throw new Error('boom');
        if (runs === 2) return Promise.reject(new Error('async boom'));
      },
      logger,
      clock,
    });
    loop.start();
    for (let i = 0; i < 3; i++) {
      const next = loop.nextPass();
      clock.pending()[0]!.fire();
      await next;
    }
    expect(runs).toBe(3);
    expect(errors).toEqual(['flaky pass failed', 'flaky pass failed']);
    expect(clock.pending()).toHaveLength(1);
    await loop.stop();
  });

  it('stop waits for the pass in flight, tolerates a second stop, and the loop can start again', async () => {
    const clock = timerClock();
    let release: () => void = () => {};
    let ended = 0;
    const loop = periodic({
      name: 't',
      everyMs: 100,
      pass: async () => {
        await new Promise<void>((r) => (release = r));
        ended++;
      },
      logger: recordingLogger().logger,
      clock,
      runAtStart: true,
    });
    loop.start();
    let stopped = false;
    const first = loop.stop().then(() => (stopped = true));
    const second = loop.stop();
    await tick();
    expect(stopped).toBe(false);
    release();
    await Promise.all([first, second]);
    expect(ended).toBe(1);
    expect(clock.pending()).toHaveLength(0); // nothing scheduled after a stop
    loop.kick(); // nothing while stopped
    expect(loop.passes).toBe(1);
    loop.start();
    await tick();
    expect(loop.passes).toBe(1);
    release();
    await loop.stop();
    expect(loop.passes).toBe(2);
  });

  it('a pass returning true runs the next at once; a late timer reports lateMs', async () => {
    const clock = timerClock();
    const late: number[] = [];
    let runs = 0;
    const loop = periodic({
      name: 't',
      everyMs: 1_000,
      pass: ({ lateMs }) => {
        late.push(lateMs);
        return ++runs < 3;
      },
      logger: recordingLogger().logger,
      clock,
    });
    loop.start();
    clock.now_ += 1_000 + 250; // the timer fires 250 ms late
    clock.pending()[0]!.fire();
    await tick();
    expect(clock.pending().map((t) => t.ms)).toEqual([0]);
    clock.pending()[0]!.fire();
    await tick();
    clock.pending()[0]!.fire();
    await tick();
    expect(late).toEqual([250, 0, 0]);
    expect(clock.pending().map((t) => t.ms)).toEqual([1_000]); // back to the period once it returned false
    await loop.stop();
  });
});
