/**
 * A worker driver starts and stops one worker of an endpoint's pool. The autoscaler decides
 * how many workers there should be; a driver only knows how to make one exist and go away.
 * The local-process driver (local-process-driver.ts) runs the endpoint's command on this
 * machine; docs/scaling.md describes how a Kubernetes driver fits the same interface.
 */

/** Everything a driver needs to start one worker. */
export interface WorkerStartSpec {
  /** The worker's id (RUNPOD_POD_ID): unique, and how the gateway knows the worker. */
  workerId: string;
  endpointId: string;
  /** The endpoint's `worker.command`, run by a shell. */
  command: string;
  /** The endpoint's `worker.env` plus the RUNPOD_* variables of DESIGN.md §1. */
  env: Record<string, string>;
  cwd?: string;
}

/** How a worker ended. `error` is set when it could not be started at all. */
export interface WorkerExit {
  code: number | null;
  signal: string | null;
  error?: string;
}

/** Receives the worker's output as it comes (any chunking). */
export type WorkerOutput = (stream: 'stdout' | 'stderr', text: string) => void;

/** One started worker. */
export interface WorkerHandle {
  /** The OS process id (local driver: the leader of the worker's process group); null where there is none. */
  readonly pid: number | null;
  /** Settles (never rejects) once the worker is gone, however it ended. */
  readonly exited: Promise<WorkerExit>;
  /**
   * Asks the worker to drain (SIGTERM: take no new job, finish the held ones) and kills it
   * (SIGKILL) if it is still there after `graceMs`. Resolves when it is gone; a second call
   * returns the same promise.
   */
  stop(graceMs: number): Promise<WorkerExit>;
}

export interface WorkerDriver {
  /** A name for logs and the admin API, e.g. `local-process`. */
  readonly kind: string;
  /**
   * Starts a worker. Rejects only when nothing was started; a process that starts and dies
   * at once resolves, and its `exited` tells how it ended.
   */
  start(spec: WorkerStartSpec, output: WorkerOutput): Promise<WorkerHandle>;
  /**
   * Stops workers that an earlier run of this driver started and never stopped (its gateway
   * was killed): SIGTERM, then SIGKILL after `graceMs`. Returns how many it found.
   */
  reapOrphans?(graceMs: number): Promise<number>;
}
