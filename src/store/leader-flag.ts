/** Whether this gateway leads, and who is told when that changes: the state every LeaderLock keeps. */
export interface LeaderFlag {
  isLeader(): boolean;
  /** Called with the new value at each change; returns the unsubscribe function. */
  onChange(listener: (leader: boolean) => void): () => void;
  /** Sets the flag; the listeners run (synchronously, in subscription order) only when it changes. */
  set(value: boolean): void;
}

/**
 * A leader flag, false at first; `onSet` runs at each change before the listeners (to log it).
 *
 * @example const flag = createLeaderFlag(); flag.onChange((on) => console.log(on)); flag.set(true); // logs true
 */
export function createLeaderFlag(onSet?: (leader: boolean) => void): LeaderFlag {
  const listeners = new Set<(leader: boolean) => void>();
  let leader = false;
  return {
    isLeader: () => leader,
    onChange(fn) {
      listeners.add(fn);
      return () => listeners.delete(fn);
    },
    set(value) {
      if (leader === value) return;
      leader = value;
      onSet?.(value);
      for (const fn of listeners) fn(value);
    },
  };
}
