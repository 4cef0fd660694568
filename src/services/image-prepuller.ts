import type { Logger } from 'pino';
import { isContainerWorker, type WorkerSettings } from '../jobs/endpoint-settings.js';
import type { EndpointService } from '../jobs/endpoint-service.js';
import type { Notifier } from '../model/events.js';
import type { PrepullSpec, WorkerDriver } from '../pool/driver.js';
import type { Clock } from '../util/clock.js';
import { periodic, type Periodic } from '../util/periodic.js';

/** Pulls run at once, over every host and endpoint: a pull fills a host's disk and network. */
export const PREPULL_CONCURRENCY = 2;
/** A failed prepull of one image to one host is tried again after this long. */
export const PREPULL_RETRY_MS = 10 * 60_000;

/** What the image prepuller uses. */
export interface ImagePrepullerDeps {
  endpoints: Pick<EndpointService, 'list'>;
  driver: Pick<WorkerDriver, 'prepullTargets'>;
  notifier: Pick<Notifier, 'subscribe'>;
  /** Time between passes (endpoint changes and finished pulls also start one). */
  everyMs: number;
  logger: Logger;
  clock: Clock;
}

/** The image prepuller (docs/scaling.md, "Images from registries"): a singleton the leader runs. */
export interface ImagePrepuller {
  start(): void;
  /** Stops the loop; pulls in flight go on in the engines, unwatched. */
  stop(): Promise<void>;
  /** Pulls in flight (host and image). */
  inFlight(): string[];
}

/** The image settings of endpoints that ask for a prepull. */
function prepullSpecs(workers: (WorkerSettings | null)[]): PrepullSpec[] {
  const specs = new Map<string, PrepullSpec>();
  for (const w of workers) {
    if (!w || !isContainerWorker(w) || w.prepull !== true) continue;
    const spec: PrepullSpec = { image: w.image, ...(w.registryCredentials ? { registryCredentials: w.registryCredentials } : {}), ...(w.gpus !== undefined ? { gpus: w.gpus } : {}), ...(w.gpuTypes ? { gpuTypes: w.gpuTypes } : {}) };
    specs.set(JSON.stringify(spec), spec);
  }
  return [...specs.values()];
}

/**
 * Puts the images of endpoints with `worker.prepull: true` on every host that could run their
 * workers, in the background, so a first worker there starts without a pull: when the endpoint
 * is made, when its image changes, and when a host comes up without it. Each pass asks the
 * driver which hosts (up, able to run the worker, not holding the image) lack each image and
 * starts at most PREPULL_CONCURRENCY pulls at a time; a failed one is logged once per host and
 * image and tried again after PREPULL_RETRY_MS.
 *
 * @example const prepuller = createImagePrepuller({ endpoints, driver, notifier, everyMs: 5_000, logger, clock }); prepuller.start();
 */
export function createImagePrepuller(deps: ImagePrepullerDeps): ImagePrepuller {
  const running = new Map<string, Promise<void>>();
  /** Failed pulls by host and image: when, and whether it was logged. Only keys still wanted are kept. */
  const failed = new Map<string, { at: number }>();
  let unsubscribe: (() => void) | undefined;
  const pass = async (): Promise<void> => {
    if (!deps.driver.prepullTargets) return;
    const specs = prepullSpecs((await deps.endpoints.list()).map((e) => (e.workerJson === null ? null : (JSON.parse(e.workerJson) as WorkerSettings))));
    const wanted = new Set<string>();
    for (const spec of specs) {
      for (const target of deps.driver.prepullTargets(spec)) {
        const key = `${target.host}\n${spec.image}\n${spec.registryCredentials ?? ''}`;
        wanted.add(key);
        const failure = failed.get(key);
        if (running.has(key) || running.size >= PREPULL_CONCURRENCY || (failure && deps.clock.now() - failure.at < PREPULL_RETRY_MS)) continue;
        const log = { host: target.host, image: spec.image };
        deps.logger.info(log, 'prepulling an image');
        const pull = target.pull().then(
          () => void failed.delete(key),
          (err: unknown) => {
            if (!failed.has(key)) deps.logger.warn({ ...log, error: err instanceof Error ? err.message : String(err) }, 'prepulling an image failed; tried again later');
            failed.set(key, { at: deps.clock.now() });
          },
        );
        running.set(key, pull);
        void pull.finally(() => {
          running.delete(key);
          loop.kick();
        });
      }
    }
    for (const key of failed.keys()) if (!wanted.has(key)) failed.delete(key);
  };
  const loop: Periodic = periodic({ name: 'image prepuller', everyMs: deps.everyMs, pass, logger: deps.logger, clock: deps.clock, runAtStart: true });
  return {
    start() {
      if (loop.active) return;
      unsubscribe = deps.notifier.subscribe((event) => {
        if (event.type === 'endpoint-changed') loop.kick();
      });
      loop.start();
    },
    async stop() {
      unsubscribe?.();
      unsubscribe = undefined;
      await loop.stop();
    },
    inFlight: () => [...running.keys()].map((k) => k.split('\n').slice(0, 2).join(' ')),
  };
}
