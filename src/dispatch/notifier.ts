/**
 * Events between the parts of a gateway (and, with a shared database, between gateways).
 * They are wake-ups only: the store holds the truth, so a lost event can only delay.
 */
export type GantryEvent =
  /** New or requeued jobs on an endpoint: waiting job-take long-polls should try to claim. */
  | { type: 'jobs-available'; endpointId: string }
  /** A job changed in a way its readers wait for: terminal, progress, or new stream chunks. */
  | { type: 'job-updated'; jobId: string }
  /** Jobs a worker holds that it must stop (cancelled or timed out). */
  | { type: 'stop-jobs'; workerId: string; jobIds: string[] }
  /** A worker asked to be recycled (job-done with stopPod). */
  | { type: 'worker-recycle'; workerId: string; endpointId: string }
  /** An endpoint was created, changed or deleted (caches drop it; the autoscaler re-reads it). */
  | { type: 'endpoint-changed'; endpointId: string }
  /** A terminal job has a webhook to deliver. */
  | { type: 'webhook-due' };

export interface Notifier {
  publish(event: GantryEvent): void;
  /** Returns the unsubscribe function. */
  subscribe(listener: (event: GantryEvent) => void): () => void;
}

/** Same-process notifier: listeners run synchronously in publish order. */
export function createLocalNotifier(): Notifier {
  const listeners = new Set<(event: GantryEvent) => void>();
  return {
    publish(event) {
      for (const listener of listeners) listener(event);
    },
    subscribe(listener) {
      listeners.add(listener);
      return () => listeners.delete(listener);
    },
  };
}
