// The fleets and endpoints the allocator's tests build (test/services/allocator*.test.ts).
import type { HostLoad } from '../../src/pool/docker/placement.js';
import type { AllocWorker, EndpointDemand } from '../../src/services/allocator.js';

export const NOW = 1_700_000_000_000;

/** A host with one device per entry of `types`, held as `holders` says (worker id → device ids). */
export function host(name: string, types: string[], holders: Record<string, string[]> = {}): HostLoad {
  return {
    name,
    up: true,
    gpus: types.map((_, i) => String(i)),
    gpuTypes: types,
    gpusInUse: new Set(Object.values(holders).flat()),
    workers: Object.keys(holders).length,
    holders: new Map(Object.entries(holders)),
  };
}

/** An endpoint's demand: priority 50, one GPU a worker, no workers, nothing wanted, unless `o` says. */
export function ep(id: string, o: Partial<EndpointDemand> = {}): EndpointDemand {
  return { id, priority: 50, shareWeight: 1, preemptible: false, workersMin: 0, gpus: 1, workers: [], want: 0, waitingSince: null, ...o };
}

export const idle = (id: string): AllocWorker => ({ id, busy: false, starting: false });
