import type { PoolHostInfo } from '../jobs/pool-view.js';
import type { HostLoad } from './docker/placement.js';

/**
 * A worker driver starts and stops one worker of an endpoint's pool. The autoscaler decides
 * how many workers there should be; a driver only knows how to make one exist and go away.
 * The local-process driver (local-process-driver.ts) runs the endpoint's command on this
 * machine, the Docker driver (docker/docker-driver.ts) runs its image on a Docker host;
 * docs/scaling.md describes how a Kubernetes driver fits the same interface.
 */

/** Everything a driver needs to start one local worker process. */
export interface WorkerStartSpec {
  /** The worker's id (RUNPOD_POD_ID): unique, and how the gateway knows the worker. */
  workerId: string;
  endpointId: string;
  /** The endpoint's `worker.command`, run by a shell. */
  command: string;
  /** The endpoint's `worker.env` plus the RUNPOD_* variables of docs/worker-protocol.md. */
  env: Record<string, string>;
  cwd?: string;
}

/** What the RUNPOD_* variables of a worker are made of, but for the gateway's URL (a container reaches it at its own address). */
export interface RunpodIdentity {
  endpointId: string;
  workerId: string;
  apiKey: string;
  pingIntervalMs: number;
}

/** Everything a driver needs to start one worker container. */
export interface ContainerStartSpec {
  workerId: string;
  endpointId: string;
  /** The image, as the engine names it (`repo/name:tag`, `name@sha256:…`); pulled onto the host chosen when it lacks it. */
  image: string;
  /** The saved registry credential (`rc_…`) the image is pulled with; none: a public registry, or no pull needed. */
  registryCredentials?: string;
  /** Overrides the image's CMD: a string runs through `/bin/sh -c`, an array is exec form. */
  command?: string | string[];
  /** The endpoint's `worker.env` (the driver adds the RUNPOD_* variables for the chosen host). */
  env: Record<string, string>;
  /** What the RUNPOD_* variables say besides the gateway's URL. */
  runpod: RunpodIdentity;
  /** GPUs: a count, or exact device ids. */
  gpus?: number | string[];
  /** For a count: the acceptable GPU models, most preferred first. */
  gpuTypes?: string[];
  /** Memory limit in MiB (no swap beyond it). */
  memoryMb?: number;
  /** Docker bind mounts and named volumes, `source:target[:ro]`. */
  volumes?: string[];
}

/** An image to put on hosts ahead of need (`worker.prepull`): the image, its login, and the GPUs its workers ask for (which hosts could run them). */
export interface PrepullSpec {
  image: string;
  registryCredentials?: string;
  gpus?: number | string[];
  gpuTypes?: string[];
}

/** One host that could run such a worker and lacks its image: `pull` puts it there (rejects with a PullError). */
export interface PrepullTarget {
  host: string;
  pull(): Promise<void>;
}

/** What any driver may be asked to start. */
export type AnyStartSpec = WorkerStartSpec | ContainerStartSpec;

/** How a worker ended. `error` is set when it could not be started at all. */
export interface WorkerExit {
  code: number | null;
  signal: string | null;
  error?: string;
  /** What else is known of the end (out of memory, its host stopped answering). */
  detail?: string;
}

/** Receives the worker's output as it comes (any chunking). */
export type WorkerOutput = (stream: 'stdout' | 'stderr', text: string) => void;

/** Told what a start that takes a while is doing (`pulling 43%`); each call replaces the last. */
export type StartProgress = (description: string) => void;

/** One started worker. */
export interface WorkerHandle {
  /** The OS process id (local driver: the leader of the worker's process group); null where there is none. */
  readonly pid: number | null;
  /** Where it runs: the Docker host's name; null for a local process. */
  readonly host?: string | null;
  /** The container id (12 hex, as `docker ps` shows it); null for a local process. */
  readonly container?: string | null;
  /** Settles (never rejects) once the worker is gone, however it ended. */
  readonly exited: Promise<WorkerExit>;
  /** Where the worker leaves something behind once it exited (a container to remove): settles (never rejects) once that is gone too. */
  readonly removed?: Promise<void>;
  /**
   * Asks the worker to drain (SIGTERM: take no new job, finish the held ones) and kills it
   * (SIGKILL) if it is still there after `graceMs`. Resolves when it is gone; a second call
   * returns the same promise.
   */
  stop(graceMs: number): Promise<WorkerExit>;
  /**
   * Freezes the worker where it is (the warm pool, flashboot): it keeps its memory, its
   * devices and its place on the host, and runs nothing until `resume`. Rejects when the
   * engine refuses (the pool then stops it instead). Absent: the driver cannot pause.
   */
  pause?(): Promise<void>;
  /** Lets a paused worker run again. Rejects when it cannot (the pool then stops it). */
  resume?(): Promise<void>;
}

/**
 * A start refused for want of room (no host with the GPUs asked for, or none up). Not a
 * crash: the pool shows the worker as throttled (RunPod: waiting for a GPU) and tries again.
 */
export class NoCapacityError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'NoCapacityError';
  }
}

/**
 * A start that failed because the image could not be pulled onto the host chosen; the message
 * names the host, the image and the registry's answer. A registry's refusal (a wrong password,
 * no such tag) does not pass by itself: the worker shows unhealthy at once, and is tried again
 * after the crash backoff.
 */
export class PullError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'PullError';
  }
}

/** Starts workers of some kind (local processes, containers, …) and stops the ones an earlier run left behind. */
export interface WorkerDriver<Spec = AnyStartSpec> {
  /** A name for logs and the admin API, e.g. `local-process`. */
  readonly kind: string;
  /**
   * Starts a worker. Rejects only when nothing was started; a process that starts and dies
   * at once resolves, and its `exited` tells how it ended.
   */
  start(spec: Spec, output: WorkerOutput, progress?: StartProgress): Promise<WorkerHandle>;
  /**
   * Stops workers that an earlier run of this driver started and never stopped (its gateway
   * was killed): SIGTERM, then SIGKILL after `graceMs`. Returns how many it found.
   */
  reapOrphans?(graceMs: number): Promise<number>;
  /** The machines it runs workers on (Docker hosts), for the admin API. */
  hosts?(): PoolHostInfo[];
  /** The hosts up now that could run workers of `spec` and lack its image (the image prepuller's work). */
  prepullTargets?(spec: PrepullSpec): PrepullTarget[];
  /** Its hosts' GPUs and who holds them, for the allocator (services/allocator.ts). */
  loads?(): HostLoad[];
  /** Ends background work (health checks, idle connections); workers are stopped by their handles first. */
  close?(): void;
}
