// The allocator over successive passes of one changing fleet, as the autoscaler calls it (a
// host's load object given again while unchanged): every decision must be the reference
// allocator's, and the same as on the same input built afresh (for an index kept across passes:
// docs/scaling.md, "A fleet index kept across passes", tried and taken out).
import { describe, expect, it } from 'vitest';
import type { HostLoad } from '../../src/pool/docker/placement.js';
import { allocate, type AllocWorker, type EndpointDemand } from '../../src/services/allocator.js';
import { allocateReference } from './allocator-reference.js';
import { seededRandom as rng } from '../../src/util/seeded-random.js';
import { ep, host, idle, NOW } from './allocator-fixtures.js';

const MODELS = ['L4', 'A100', 'H100', ''];

interface SimHost {
  name: string;
  up: boolean;
  gpuTypes: string[];
  holders: Map<string, string[]>;
  /** Its load as last given; null: changed since (a new one is made, as DockerHosts.loads() does). */
  load: HostLoad | null;
}

type Role = 'worker' | 'paused' | 'stopping';

/** One fleet changed pass after pass: workers come and go, hosts go down and up, and move in the list; unchanged hosts keep their load object. */
function successivePasses(seed: number, passes: number, check: (pass: number, hosts: HostLoad[], endpoints: EndpointDemand[]) => void): void {
  const r = rng(seed);
  const pick = <T>(xs: readonly T[]): T => xs[Math.floor(r() * xs.length)]!;
  const settings = Array.from({ length: 2 + Math.floor(r() * 8) }, (_, i) => ({
    id: `ep-${i}`,
    priority: pick([10, 50, 50, 90]),
    shareWeight: 1 + Math.floor(r() * 3),
    preemptible: r() < 0.4,
    workersMin: r() < 0.2 ? 1 : 0,
    gpus: pick([1, 1, 1, 2, 4]),
    ...(r() < 0.4 ? { gpuTypes: [pick(MODELS), pick(MODELS)].filter((t, k, a) => a.indexOf(t) === k) } : {}),
  }));
  const hosts: SimHost[] = Array.from({ length: 2 + Math.floor(r() * 20) }, (_, i) => {
    const model = pick(MODELS);
    const mixed = r() < 0.2;
    return { name: `h${i}`, up: true, gpuTypes: Array.from({ length: pick([2, 4, 8]) }, () => (mixed ? pick(MODELS) : model)), holders: new Map(), load: null };
  });
  /** Worker id → its endpoint and what it is. */
  const workers = new Map<string, { e: number; role: Role }>();
  let n = 0;
  const addWorker = (id?: string): void => {
    const e = Math.floor(r() * settings.length);
    const host = pick(hosts);
    const used = new Set([...host.holders.values()].flat());
    const free = host.gpuTypes.map((_, k) => String(k)).filter((d) => !used.has(d));
    const width = Math.min(settings[e]!.gpus, free.length);
    if (width === 0) return;
    const wid = id ?? `w-${++n}`;
    host.holders.set(wid, free.slice(0, width));
    host.load = null;
    if (!id) workers.set(wid, { e, role: r() < 0.1 ? 'paused' : r() < 0.1 ? 'stopping' : 'worker' });
  };
  const removeWorker = (): void => {
    const host = pick(hosts);
    const ids = [...host.holders.keys()];
    if (ids.length === 0) return;
    const id = pick(ids);
    host.holders.delete(id);
    host.load = null;
    if (!hosts.some((h) => h.holders.has(id))) workers.delete(id);
  };
  for (let k = 0; k < hosts.length * 3; k++) addWorker();
  for (let pass = 0; pass < passes; pass++) {
    const changes = Math.floor(r() * 4);
    for (let c = 0; c < changes; c++) {
      const what = r();
      if (what < 0.35) removeWorker();
      else if (what < 0.7) addWorker();
      else if (what < 0.8) {
        const host = pick(hosts);
        host.up = !host.up;
        host.load = null;
      } else if (what < 0.87) {
        // Two hosts swap places in the list (their loads kept).
        const a = Math.floor(r() * hosts.length);
        const b = Math.floor(r() * hosts.length);
        [hosts[a], hosts[b]] = [hosts[b]!, hosts[a]!];
      } else if (what < 0.95) {
        const ids = [...workers.keys()];
        if (ids.length > 0) workers.get(pick(ids))!.role = pick(['worker', 'worker', 'paused', 'stopping'] as const);
      } else if (what < 0.98 && workers.size > 0) {
        // The same worker id on a second host.
        addWorker(pick([...workers.keys()]));
      } else if (hosts.length < 30) {
        hosts.push({ name: `h${hosts.length}-${pass}`, up: true, gpuTypes: Array(4).fill(pick(MODELS)) as string[], holders: new Map(), load: null });
      }
    }
    const loads = hosts.map((h) => {
      h.load ??= {
        name: h.name,
        up: h.up,
        gpus: h.gpuTypes.map((_, k) => String(k)),
        gpuTypes: h.gpuTypes,
        gpusInUse: new Set([...h.holders.values()].flat()),
        workers: h.holders.size,
        holders: new Map(h.holders),
      };
      return h.load;
    });
    // Now and then one load given twice (a fleet listing a host twice).
    if (r() < 0.03 && loads.length > 0) loads.push(pick(loads));
    const endpoints: EndpointDemand[] = settings.map((s, e) => {
      const mine = [...workers].filter(([, w]) => w.e === e);
      const wants = r() < 0.6;
      return {
        ...s,
        workers: mine
          .filter(([, w]) => w.role === 'worker')
          .map(([id]): AllocWorker => {
            const state = r();
            return { id, busy: state > 0.6, starting: state < 0.2, ...(state > 0.6 && r() < 0.5 ? { busySince: 1_000_000 - Math.floor(r() * 50) * 1000 } : {}) };
          }),
        paused: mine.filter(([, w]) => w.role === 'paused').map(([id]) => id),
        want: wants ? 1 + Math.floor(r() * 4) : 0,
        waitingSince: wants && r() < 0.8 ? 1_000_000 - Math.floor(r() * 300_000) : null,
      };
    });
    check(pass, loads, endpoints);
  }
}

/** The same input with every host a new load object (nothing kept for it: the decision reads the fleet afresh). */
function fresh(hosts: readonly HostLoad[]): HostLoad[] {
  return hosts.map((h) => ({ ...h, gpusInUse: new Set(h.gpusInUse), holders: new Map(h.holders) }));
}

/** Whether a worker id is held on two hosts (or a load listed twice): the reference allocator does not model that. */
function idTwice(hosts: readonly HostLoad[]): boolean {
  const seen = new Set<string>();
  for (const h of hosts) for (const id of h.holders?.keys() ?? []) if (seen.has(id) || !seen.add(id)) return true;
  return false;
}

describe('allocate over successive passes', () => {
  it('decides on each pass of 200 changing fleets as the reference allocator, and as on the same fleet met afresh', () => {
    let twice = 0;
    for (let seed = 1; seed <= 200; seed++) {
      const inputs: { hosts: HostLoad[]; endpoints: EndpointDemand[]; got: unknown }[] = [];
      successivePasses(seed, 30, (_, hosts, endpoints) => {
        const input = { now: 1_000_000, hosts, endpoints };
        const got = Object.fromEntries(allocate(input));
        inputs.push({ hosts, endpoints, got });
        if (idTwice(hosts)) twice++;
        else expect({ seed, pass: inputs.length - 1, decisions: got }).toEqual({ seed, pass: inputs.length - 1, decisions: Object.fromEntries(allocateReference(input)) });
      });
      // Afresh: every host a load never seen, so every decision rebuilds all it would have kept.
      inputs.forEach(({ hosts, endpoints, got }, pass) => {
        expect({ seed, pass, decisions: Object.fromEntries(allocate({ now: 1_000_000, hosts: fresh(hosts), endpoints })) }).toEqual({ seed, pass, decisions: got });
      });
    }
    expect(twice).toBeGreaterThan(100); // the map's way round (a decision's own table) was taken
  });

  it('counts a worker id held on two hosts as its endpoint\'s on both, as a map from ids would', () => {
    // The former allocator's decision (one table of ids a decision, the last worker of an id counting).
    const hosts = [host('a', ['L4'], { 'w-1': ['0'] }), host('b', ['L4'], { 'w-1': ['0'] })];
    const input = { now: NOW, hosts, endpoints: [ep('lo', { priority: 10, workers: [idle('w-1')] }), ep('hi', { priority: 90, want: 2 })] };
    const once = Object.fromEntries(allocate(input));
    // Both holders are `lo`'s (2 L4 held): one reclaim leaves it no worker, so the second is not taken.
    expect(once.lo!.reclaim.map((o) => o.workerId)).toEqual(['w-1']);
    expect(once.hi!.waiting).toBe(2);
    expect(once.hi!.reason).toContain('2 L4 held by `lo` at priority 10');
    // And again with the hosts kept from the decision before.
    expect(Object.fromEntries(allocate(input))).toEqual(once);
  });

});
