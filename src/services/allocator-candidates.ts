import { BUSY, KINDS } from './allocator-claims.js';

/**
 * The holders a decision may free (allocator-fleet.ts), by kind, each list in its endpoints'
 * priority order, and the ones taken so far skipped without a look.
 *
 * A reclaim scans a list from its start and takes the first holdings that do; a holder taken
 * by an earlier request stays in the list. Skipping only the taken ones at a list's start left
 * those taken further in to be looked at again by every later scan (17,000 of the 56,000
 * candidates a decision looked at, bench:fleet's 10,000 GPUs). Each list now has a chain of
 * "next position not taken" (union-find's path halving): a scan passes a run of taken holders
 * in a step or two, in the same order as before.
 */

/** What the lists are made from: each holder's kind, its endpoint's priority level (-1: never a candidate), and its job's start where known. */
export interface CandidateSource {
  n: number;
  kind: Uint8Array;
  level: Int32Array;
  since: Float64Array | null;
}

/** The candidates by kind, with taken ones skipped (see the top). */
export class CandidateLists {
  /** Holder indexes by kind, in the order they are tried. */
  readonly lists: Int32Array[];
  /** Per kind, for each position (and one past the end): itself while its holder is not taken, else a later position. */
  private readonly next: Int32Array[];
  /** Each holder's position in its kind's list (-1: not a candidate). */
  private readonly at: Int32Array;

  constructor(src: CandidateSource, levels: number) {
    this.lists = sortedLists(src, levels);
    this.next = [];
    this.at = new Int32Array(src.n).fill(-1);
    for (const list of this.lists) {
      const next = new Int32Array(list.length + 1);
      for (let i = 0; i <= list.length; i++) next[i] = i;
      for (let i = 0; i < list.length; i++) this.at[list[i]!] = i;
      this.next.push(next);
    }
  }

  /** The first position at or after `i` in `kind`'s list whose holder is not taken (the list's length: none). */
  live(kind: number, i: number): number {
    const next = this.next[kind]!;
    while (next[i] !== i) {
      const j = next[i]!;
      next[i] = next[j]!;
      i = j;
    }
    return i;
  }

  /** Marks holder `k` (of `kind`) taken: no later scan looks at it. */
  take(k: number, kind: number): void {
    const i = this.at[k]!;
    if (i >= 0) this.next[kind]![i] = i + 1;
  }
}

/**
 * The lists, each stably sorted by its endpoints' priority level (being stopped: level 0,
 * first): counted by (kind, level), then placed (a counting sort). Busy ones of a level: the
 * job that started last first (the least work lost), unknown last.
 */
function sortedLists(src: CandidateSource, levels: number): Int32Array[] {
  const { kind, level } = src;
  const next = new Int32Array(KINDS.length * levels);
  for (let k = 0; k < src.n; k++) if (level[k]! >= 0) next[kind[k]! * levels + level[k]!]!++;
  const lists = KINDS.map((_, kd) => {
    let total = 0;
    for (let l = 0; l < levels; l++) {
      const n = next[kd * levels + l]!;
      next[kd * levels + l] = total;
      total += n;
    }
    return new Int32Array(total);
  });
  for (let k = 0; k < src.n; k++) {
    if (level[k]! < 0) continue;
    lists[kind[k]!]![next[kind[k]! * levels + level[k]!]!++] = k;
  }
  const since = src.since;
  if (since) lists[BUSY] = Int32Array.from([...lists[BUSY]!].sort((a, b) => level[a]! - level[b]! || since[b]! - since[a]! || a - b));
  return lists;
}
