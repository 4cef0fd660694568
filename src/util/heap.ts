/**
 * A binary heap ordered by a `before` function (first out: the one before all others), with
 * `update` for an item whose standing changed while inside (the allocator's queue of requests:
 * an endpoint whose worker is taken for another moves up).
 *
 * @example
 * const h = new Heap<number>((a, b) => a < b); h.push(3); h.push(1); h.pop(); // 1
 */
export class Heap<T> {
  private readonly items: T[] = [];
  constructor(private readonly before: (a: T, b: T) => boolean) {}

  push(item: T): void {
    this.items.push(item);
    this.up(this.items.length - 1);
  }

  pop(): T | undefined {
    const a = this.items;
    const top = a[0];
    const last = a.pop();
    if (a.length === 0 || last === undefined) return top;
    a[0] = last;
    this.down(0);
    return top;
  }

  /** Restores the order after `item`'s standing changed while in the heap (absent: nothing to do). */
  update(item: T): void {
    const i = this.items.indexOf(item);
    if (i >= 0) this.down(this.up(i));
  }

  /** Moves the item at `i` towards the top while it goes before its parent; returns where it ends. */
  private up(i: number): number {
    const a = this.items;
    while (i > 0) {
      const p = (i - 1) >> 1;
      if (!this.before(a[i]!, a[p]!)) break;
      [a[i], a[p]] = [a[p]!, a[i]!];
      i = p;
    }
    return i;
  }

  private down(i: number): void {
    const a = this.items;
    for (;;) {
      const l = 2 * i + 1;
      const r = l + 1;
      let m = i;
      if (l < a.length && this.before(a[l]!, a[m]!)) m = l;
      if (r < a.length && this.before(a[r]!, a[m]!)) m = r;
      if (m === i) return;
      [a[i], a[m]] = [a[m]!, a[i]!];
      i = m;
    }
  }
}
