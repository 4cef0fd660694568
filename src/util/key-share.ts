/**
 * A key's share of a limit that several keys draw on (docs/security.md, "Shared limits"): half
 * of it, rounded up. A key may use a whole limit while no other key uses it; once another does,
 * each key is held to its share, and a key under its share is let in even past the limit, by
 * at most one share, so the first key's burst cannot lock it out. The rate limits
 * (http/rate-limit.ts) and the queue's bounds (jobs/queue-gauge.ts) follow it.
 *
 * @example keyShare(400) === 200; keyShare(1) === 1
 */
export function keyShare(limit: number): number {
  return Math.max(1, Math.ceil(limit / 2));
}

/**
 * Whether a key using `own` of a limit `limit` (all keys together: `total`) may take one more,
 * `shared` telling whether another key uses it too (the rule of keyShare).
 *
 * @example admitsKey(0, 400, 400, true) === true; admitsKey(200, 250, 400, true) === false
 */
export function admitsKey(own: number, total: number, limit: number, shared: boolean): boolean {
  if (own < keyShare(limit)) return total < limit + keyShare(limit);
  return !shared && total < limit;
}

/**
 * The same rule for an amount that comes in sizes (bytes): whether a key holding `own` of
 * `limit` (all keys: `total`) may add `amount`. Nothing held is no reason to refuse: a key
 * holding nothing is let in within the limit plus a share whatever the size (with nothing held
 * by anyone, always), so no single item is refused for its size alone.
 *
 * @example admitsKeyAmount(0, 900, 300, 1000, true) === true; admitsKeyAmount(600, 900, 10, 1000, true) === false
 */
export function admitsKeyAmount(own: number, total: number, amount: number, limit: number, shared: boolean): boolean {
  if (total === 0) return true;
  const share = keyShare(limit);
  if (own === 0 || own + amount <= share) return total + amount <= limit + share;
  return !shared && total + amount <= limit;
}
