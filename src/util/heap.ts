/**
 * A binary heap ordered by a `before` function (first out: the one before all others), with
 * `update` for an item whose standing changed while inside (the allocator's queue of requests:
 * an endpoint whose worker is taken for another moves up).
 *
 * Where each item can hold its own place (`place`), `update` finds it there instead of
 * searching the heap: the allocator updates once per worker it stops, and a search each time
 * made a decision with many reclaims quadratic in the endpoints.
 *
 * @example
 * const h = new Heap<number>((a, b) => a < b); h.push(3); h.push(1); h.pop(); // 1
 */
export class Heap<T> {
  private readonly items: T[] = [];
  constructor(
    private readonly before: (a: T, b: T) => boolean,
    private readonly place?: HeapPlace<T>,
  ) {}

  push(item: T): void {
    this.items.push(item);
    this.moved(item, this.items.length - 1);
    this.up(this.items.length - 1);
  }

  pop(): T | undefined {
    const a = this.items;
    const top = a[0];
    const last = a.pop();
    if (top !== undefined) this.place?.set(top, -1);
    if (a.length === 0 || last === undefined) return top;
    a[0] = last;
    this.moved(last, 0);
    this.down(0);
    return top;
  }

  /** Restores the order after `item`'s standing changed while in the heap (absent: nothing to do). */
  update(item: T): void {
    const i = this.place ? this.place.get(item) : this.items.indexOf(item);
    if (i >= 0) this.down(this.up(i));
  }

  private moved(item: T, i: number): void {
    this.place?.set(item, i);
  }

  private swap(i: number, j: number): void {
    const a = this.items;
    const x = a[i]!;
    const y = a[j]!;
    a[i] = y;
    a[j] = x;
    this.moved(y, i);
    this.moved(x, j);
  }

  /** Moves the item at `i` towards the top while it goes before its parent; returns where it ends. */
  private up(i: number): number {
    const a = this.items;
    while (i > 0) {
      const p = (i - 1) >> 1;
      if (!this.before(a[i]!, a[p]!)) break;
      this.swap(i, p);
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
      this.swap(i, m);
      i = m;
    }
  }
}

/** Where an item keeps its place in one heap (-1: not in it). */
export interface HeapPlace<T> {
  get(item: T): number;
  set(item: T, i: number): void;
}
