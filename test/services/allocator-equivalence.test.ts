import { describe, expect, it } from 'vitest';
import type { HostLoad } from '../../src/pool/docker/placement.js';
import { allocate, type AllocatorInput, type AllocWorker, type EndpointDemand } from '../../src/services/allocator.js';
import { allocateReference } from './allocator-reference.js';
import { seededRandom as rng } from '../../src/util/seeded-random.js';

const MODELS = ['L4', 'A100', 'H100', ''];
const IMAGES = ['img-a', 'img-b', 'img-c'];

/** A random fleet and demand: hosts of one or several models (some down), workers idle, starting, busy, paused or being stopped, endpoints of few priorities wanting more. */
function randomInput(seed: number): AllocatorInput {
  const r = rng(seed);
  const pick = <T>(xs: readonly T[]): T => xs[Math.floor(r() * xs.length)]!;
  const hostCount = r() < 0.4 ? 1 + Math.floor(r() * 8) : 9 + Math.floor(r() * 40);
  const endpointCount = 1 + Math.floor(r() * 12);
  const endpoints: EndpointDemand[] = Array.from({ length: endpointCount }, (_, i) => {
    const types = r() < 0.5 ? undefined : [pick(MODELS), pick(MODELS)].filter((t, k, a) => a.indexOf(t) === k);
    return {
      id: `ep-${i}`,
      priority: pick([10, 50, 50, 90]),
      shareWeight: 1 + Math.floor(r() * 3),
      preemptible: r() < 0.4,
      workersMin: r() < 0.2 ? 1 + Math.floor(r() * 2) : 0,
      gpus: r() < 0.1 ? 0 : pick([1, 1, 1, 2, 3, 4]),
      ...(types ? { gpuTypes: types } : {}),
      ...(r() < 0.5 ? { image: pick(IMAGES) } : {}),
      workers: [],
      want: r() < 0.6 ? 1 + Math.floor(r() * 6) : 0,
      waitingSince: r() < 0.7 ? 1_000_000 - Math.floor(r() * 400_000) : null,
    };
  });
  const hosts: HostLoad[] = [];
  let n = 0;
  for (let i = 0; i < hostCount; i++) {
    const size = pick([1, 2, 4, 4, 8, 8, 16]);
    const mixedModels = r() < 0.2;
    const model = pick(MODELS);
    const gpuTypes = Array.from({ length: size }, () => (mixedModels ? pick(MODELS) : model));
    const gpus = gpuTypes.map((_, k) => String(k));
    const holders = new Map<string, string[]>();
    const inUse = new Set<string>();
    const fill = r();
    for (let k = 0; k < size; ) {
      const ep = pick(endpoints);
      const width = Math.max(1, Math.min(ep.gpus, size - k));
      if (r() > fill) {
        k += width;
        continue;
      }
      const ids = gpus.slice(k, k + width);
      const id = `w-${++n}`;
      holders.set(id, ids);
      for (const d of ids) inUse.add(d);
      const state = r();
      // A worker being stopped is held by no endpoint's current workers.
      const since = r() < 0.5 ? { busySince: 1_000_000 - Math.floor(r() * 50) * 1000 } : {};
      // Being stopped (no endpoint's), paused in its warm pool, starting, idle or busy.
      if (state > 0.1 && state <= 0.18) ((ep as { paused?: string[] }).paused ??= []).push(id);
      else if (state > 0.1) (ep.workers as AllocWorker[]).push({ id, busy: state > 0.6, starting: state <= 0.3, ...(state > 0.6 || r() < 0.1 ? since : {}) });
      k += width;
    }
    hosts.push({
      name: `h${i}`,
      up: r() > 0.08,
      gpus,
      gpuTypes,
      gpusInUse: inUse,
      workers: holders.size + Math.floor(r() * 2),
      holders,
      ...(r() < 0.5 ? { images: new Set(IMAGES.filter(() => r() < 0.5)) } : {}),
    });
  }
  return { now: 1_000_000, hosts, endpoints, ...(r() < 0.3 ? { agingMs: 30_000 } : {}) };
}

describe('allocate (indexed) against the reference allocator', () => {
  it('decides exactly as the simple implementation on 600 random fleets', () => {
    for (let seed = 1; seed <= 600; seed++) {
      const input = randomInput(seed);
      const want = allocateReference(input);
      const got = allocate(input);
      expect({ seed, decisions: Object.fromEntries(got) }).toEqual({ seed, decisions: Object.fromEntries(want) });
    }
  });

  it('leaves its input as it found it', () => {
    const input = randomInput(7);
    const before = JSON.stringify(input.hosts.map((h) => ({ ...h, gpusInUse: [...h.gpusInUse], holders: [...(h.holders ?? [])] })));
    allocate(input);
    expect(JSON.stringify(input.hosts.map((h) => ({ ...h, gpusInUse: [...h.gpusInUse], holders: [...(h.holders ?? [])] })))).toBe(before);
  });
});
