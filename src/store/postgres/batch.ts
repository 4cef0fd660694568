/**
 * Groups the calls of one event-loop turn into one multi-row statement (docs/architecture.md,
 * "The hot path": a round trip and a commit shared by many jobs). A turn's calls are sent together in setImmediate;
 * each call's promise settles with its own result. When the grouped statement fails, every
 * call is retried on its own, so a bad call rejects only itself.
 */
export interface Batcher<A, R> {
  run(args: A): Promise<R>;
  /** Sends what is pending now and waits for every batch in flight. */
  flush(): Promise<void>;
}

interface Pending<A, R> {
  args: A;
  resolve(value: R): void;
  reject(err: unknown): void;
}

/** How a batcher runs its calls: together, alone, and which may not share a statement. */
export interface BatcherOptions<A, R> {
  /** Runs several calls in one statement; returns one result per call, in order. */
  many(args: A[]): Promise<R[]>;
  /** Runs one call (a batch of one, and the fallback when `many` fails). */
  one(args: A): Promise<R>;
  /** Calls that must not share a statement (e.g. two results for one job) go to a later batch. */
  key?(args: A): string;
  /** At most this many calls a statement (default 500). */
  maxBatch?: number;
}

/** Runs one call on its own and settles its promise. */
async function runOne<A, R>(options: BatcherOptions<A, R>, p: Pending<A, R>): Promise<void> {
  try {
    p.resolve(await options.one(p.args));
  } catch (err) {
    p.reject(err);
  }
}

/** Runs calls in one statement; when it fails, each call again on its own, so a bad call rejects only itself. */
async function runMany<A, R>(options: BatcherOptions<A, R>, batch: Pending<A, R>[]): Promise<void> {
  if (batch.length === 1) return runOne(options, batch[0] as Pending<A, R>);
  let results: R[];
  try {
    results = await options.many(batch.map((p) => p.args));
  } catch {
    await Promise.all(batch.map((p) => runOne(options, p)));
    return;
  }
  batch.forEach((p, i) => p.resolve(results[i] as R));
}

/** Splits a turn's calls into those that go now and those whose key an earlier call of the turn has (they go later). */
function splitRepeatedKeys<A, R>(options: BatcherOptions<A, R>, all: Pending<A, R>[]): { now: Pending<A, R>[]; later: Pending<A, R>[] } {
  const now: Pending<A, R>[] = [];
  const later: Pending<A, R>[] = [];
  const keys = new Set<string>();
  for (const p of all) {
    const k = options.key?.(p.args);
    if (k !== undefined && keys.has(k)) later.push(p);
    else {
      if (k !== undefined) keys.add(k);
      now.push(p);
    }
  }
  return { now, later };
}

/**
 * A batcher over `options.many` / `options.one` (see Batcher).
 *
 * @example const reads = createBatcher({ one: (id) => get(id), many: (ids) => getAll(ids) }); await reads.run('job-1');
 */
export function createBatcher<A, R>(options: BatcherOptions<A, R>): Batcher<A, R> {
  const maxBatch = options.maxBatch ?? 500;
  let queue: Pending<A, R>[] = [];
  let scheduled = false;
  const inFlight = new Set<Promise<void>>();

  function send(): void {
    scheduled = false;
    const all = queue;
    queue = [];
    const { now, later } = splitRepeatedKeys(options, all);
    const runs: Promise<void>[] = [];
    for (let at = 0; at < now.length; at += maxBatch) runs.push(runMany(options, now.slice(at, at + maxBatch)));
    // A repeated key runs after its earlier call has finished, in the next batch.
    track(
      Promise.all(runs).then(() => {
        for (const p of later) enqueue(p);
      }),
    );
  }

  function track(p: Promise<void>): void {
    inFlight.add(p);
    void p.finally(() => inFlight.delete(p));
  }

  function enqueue(p: Pending<A, R>): void {
    queue.push(p);
    if (!scheduled) {
      scheduled = true;
      setImmediate(send);
    }
  }

  return {
    run(args) {
      return new Promise<R>((resolve, reject) => enqueue({ args, resolve, reject }));
    },
    async flush() {
      if (scheduled) send();
      while (inFlight.size > 0 || scheduled) {
        if (scheduled) send();
        await Promise.all([...inFlight]);
      }
    },
  };
}
