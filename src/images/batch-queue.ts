/**
 * Batching across jobs (docs/models.md, "Batching"): requests that may share a denoiser run
 * (same batch key: size, steps, guidance mode) wait up to a window for each other, then run
 * as one batch of at most `maxBatch`.
 *
 * Invariants:
 * - one batch runs at a time (the worker has one device; a second batch would only contend);
 * - the oldest waiting request always goes in the next batch, with the requests of its key that
 *   arrived after it, in arrival order, so no request waits behind later ones of another key;
 * - a batch starts as soon as it is full, or when its oldest request has waited `windowMs`;
 *   requests that arrive while a batch runs wait at most until it ends.
 */

/** What runs a batch: the key that groups requests, and the batched run (one result or error per request). */
export interface BatchRunner<R, T> {
  key(request: R): string;
  run(requests: R[]): Promise<(T | Error)[]>;
}

/** Batch size and window of a queue, and who hears of each batch. */
export interface BatchQueueOptions {
  maxBatch: number;
  windowMs: number;
  /** Called as each batch starts, with its size (for logs and tests). */
  onBatch?: (size: number, key: string) => void;
}

interface Waiting<R, T> {
  request: R;
  key: string;
  arrivedAt: number;
  resolve(value: T): void;
  reject(err: unknown): void;
}

/** Groups submitted requests into batches and runs them one batch at a time. */
export class BatchQueue<R, T> {
  private readonly waiting: Waiting<R, T>[] = [];
  private running = false;
  private timer: NodeJS.Timeout | null = null;

  constructor(private readonly runner: BatchRunner<R, T>, private readonly options: BatchQueueOptions) {
    if (!Number.isInteger(options.maxBatch) || options.maxBatch < 1) throw new RangeError(`maxBatch must be a positive integer, got ${options.maxBatch}`);
  }

  /** Resolves with this request's result once its batch has run. */
  submit(request: R): Promise<T> {
    return new Promise<T>((resolve, reject) => {
      this.waiting.push({ request, key: this.runner.key(request), arrivedAt: Date.now(), resolve, reject });
      this.kick();
    });
  }

  /** Requests waiting for a batch (not counting the one running). */
  get size(): number {
    return this.waiting.length;
  }

  private kick(): void {
    if (this.running || this.waiting.length === 0) return;
    const first = this.waiting[0]!;
    const full = this.waiting.filter((w) => w.key === first.key).length >= this.options.maxBatch;
    const wait = this.options.windowMs - (Date.now() - first.arrivedAt);
    if (full || wait <= 0 || this.options.maxBatch === 1) {
      if (this.timer) clearTimeout(this.timer);
      this.timer = null;
      void this.runNext();
    } else if (!this.timer) {
      this.timer = setTimeout(() => {
        this.timer = null;
        this.kick();
      }, wait);
    }
  }

  private async runNext(): Promise<void> {
    this.running = true;
    const key = this.waiting[0]!.key;
    const batch: Waiting<R, T>[] = [];
    for (let i = 0; i < this.waiting.length && batch.length < this.options.maxBatch; ) {
      if (this.waiting[i]!.key === key) batch.push(...this.waiting.splice(i, 1));
      else i++;
    }
    this.options.onBatch?.(batch.length, key);
    try {
      const results = await this.runner.run(batch.map((w) => w.request));
      batch.forEach((w, i) => {
        const result = results[i];
        if (result instanceof Error) w.reject(result);
        else if (result === undefined) w.reject(new Error('the batch returned no result for this request'));
        else w.resolve(result);
      });
    } catch (err) {
      for (const w of batch) w.reject(err);
    } finally {
      this.running = false;
      this.kick();
    }
  }
}
