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
  /** The worker pool is stopping this worker: its parked job-take and job-stop polls answer now, and it is handed nothing more. */
  | { type: 'worker-stopping'; workerId: string; endpointId: string }
  /** The worker pool resumes this paused worker (flashboot): it is handed jobs again. */
  | { type: 'worker-resuming'; workerId: string; endpointId: string }
  /** An endpoint was created, changed or deleted (caches drop it; the autoscaler re-reads it). */
  | { type: 'endpoint-changed'; endpointId: string }
  /** A terminal job has a webhook to deliver. */
  | { type: 'webhook-due' }
  /** Worker log lines were stored (the leader's log writer, a batch at most every 250 ms): log follows read the store now. */
  | { type: 'logs-stored' };

/**
 * Carries events to every part of this gateway that subscribed (synchronously, in publish
 * order) and, where the store is shared, to the other gateways. Made by openStore, which knows
 * whether there are other gateways to reach (docs/architecture.md).
 */
export interface Notifier {
  publish(event: GantryEvent): void;
  /** Returns the unsubscribe function. */
  subscribe(listener: (event: GantryEvent) => void): () => void;
  /** Connects what carries events between gateways (nothing to do in one process). */
  start(): Promise<void>;
  /** Sends what is pending and disconnects; a second call does nothing. */
  close(): Promise<void>;
}
