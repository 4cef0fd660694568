import type { Registry } from 'prom-client';
import type { Store } from '../store/store.js';
import { histogramMetric, newBuckets, observe, type Buckets } from './histogram.js';

/** Store call bounds in seconds: an index read to a slow commit. */
export const STORE_BOUNDS = [0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5];

/**
 * One call in this many of each store method is timed. Timing every call would add a clock
 * read and a promise callback to every store call of the hot path; one in 16 gives the
 * latency distribution at a sixteenth of that cost. docs/metrics.md says the counts are of
 * timed calls.
 */
export const STORE_SAMPLE_EVERY = 16;

/** Per store method: calls seen, and the latency of the timed ones. */
interface MethodTiming {
  calls: number;
  buckets: Buckets;
}

/**
 * Times store calls for gantry_store_call_duration_seconds: {@link StoreTiming.wrap} returns a
 * store whose methods forward to the real one, timing one call in {@link STORE_SAMPLE_EVERY}
 * per method (the first included).
 */
export class StoreTiming {
  private readonly methods = new Map<string, MethodTiming>();

  /** The store with its methods timed (sampled); `kind`, `migrate` and `close` are passed through. */
  wrap(store: Store): Store {
    const timed: Record<string, unknown> = { kind: store.kind };
    for (const name of methodNames(store)) {
      const method = (store as unknown as Record<string, (arg?: unknown) => Promise<unknown>>)[name]!;
      timed[name] = name === 'migrate' || name === 'close' ? method.bind(store) : this.timeMethod(name, method, store);
    }
    return timed as unknown as Store;
  }

  /** Registers the histogram, filled at scrape time. */
  register(registry: Registry): void {
    registry.registerMetric(
      histogramMetric({
        name: 'gantry_store_call_duration_seconds',
        help: `Store call latency by operation, until the call's result is committed (one call in ${STORE_SAMPLE_EVERY} timed).`,
        bounds: STORE_BOUNDS,
        // Only methods timed at least once: the others would be hundreds of empty lines.
        series: () => [...this.methods].filter(([, m]) => m.buckets.count > 0).map(([operation, m]) => ({ labels: { operation }, buckets: m.buckets })),
      }),
    );
  }

  private timeMethod(name: string, method: (arg?: unknown) => Promise<unknown>, store: Store): (arg?: unknown) => Promise<unknown> {
    const timing: MethodTiming = { calls: 0, buckets: newBuckets(STORE_BOUNDS) };
    this.methods.set(name, timing);
    // Every store method takes one argument: an id or an object of named arguments.
    return (arg) => {
      if (timing.calls++ % STORE_SAMPLE_EVERY !== 0) return method.call(store, arg);
      const started = performance.now();
      const done = (): void => observe(timing.buckets, STORE_BOUNDS, (performance.now() - started) / 1000);
      const result = method.call(store, arg);
      void result.then(done, done);
      return result;
    };
  }
}

/** The store's methods: own ones (a composed store) and inherited ones (a class), once each. */
function methodNames(store: Store): string[] {
  const names = new Set<string>();
  for (let o: object | null = store; o !== null && o !== Object.prototype; o = Object.getPrototypeOf(o) as object | null) {
    for (const name of Object.getOwnPropertyNames(o)) {
      if (name !== 'constructor' && typeof (store as unknown as Record<string, unknown>)[name] === 'function') names.add(name);
    }
  }
  return [...names];
}
