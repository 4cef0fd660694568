import { createLeaderFlag } from './leader-flag.js';
import type { LeaderLock } from './store.js';

/**
 * The leader lock of a gateway alone on its database (SQLite): it leads from start to stop.
 *
 * @example const lock = createSoleLeader(); lock.start(); lock.isLeader() // true
 */
export function createSoleLeader(): LeaderLock {
  const flag = createLeaderFlag();
  let stopped = false;
  return {
    isLeader: () => flag.isLeader(),
    onChange: (fn) => flag.onChange(fn),
    start: () => {
      if (!stopped) flag.set(true);
    },
    stop: () => {
      stopped = true;
      flag.set(false);
      return Promise.resolve();
    },
  };
}
