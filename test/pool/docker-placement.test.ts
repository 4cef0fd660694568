import { describe, expect, it } from 'vitest';
import { placeWorker, type HostLoad } from '../../src/pool/docker/placement.js';

const host = (name: string, gpus: number, inUse: string[] = [], workers = inUse.length, up = true): HostLoad => ({
  name,
  up,
  gpus: Array.from({ length: gpus }, (_, i) => String(i)),
  gpusInUse: new Set(inUse),
  workers,
});

describe('placeWorker', () => {
  it('bin-packs GPU workers: the host left with the fewest free GPUs, so whole machines stay free', () => {
    const hosts = [host('big', 8), host('half', 4, ['0', '1']), host('small', 2)];
    // half and small are both left with none free; small runs fewer workers.
    expect(placeWorker(hosts, 2)).toEqual({ host: 'small', deviceIds: ['0', '1'] });
    expect(placeWorker([host('big', 8), host('half', 4, ['0', '1'])], 1)).toEqual({ host: 'half', deviceIds: ['2'] });
    expect(placeWorker([host('big', 8), host('half', 4, ['0', '1'])], 4)).toEqual({ host: 'big', deviceIds: ['0', '1', '2', '3'] });
  });

  it('breaks ties by fewer workers, then by the order of the settings', () => {
    expect(placeWorker([host('a', 2, ['0'], 3), host('b', 2, ['1'], 1)], 1)).toEqual({ host: 'b', deviceIds: ['0'] });
    expect(placeWorker([host('a', 2), host('b', 2)], 1)).toEqual({ host: 'a', deviceIds: ['0'] });
  });

  it('spreads workers without GPUs over the hosts by how many they run', () => {
    expect(placeWorker([host('a', 0, [], 2), host('b', 4, ['0'], 1), host('c', 0, [], 1)], 0)).toEqual({ host: 'b', deviceIds: [] });
    expect(placeWorker([host('a', 0, [], 1), host('b', 0, [], 1)], 0)).toEqual({ host: 'a', deviceIds: [] });
  });

  it('gives exact device ids only where all of them exist and are free', () => {
    const hosts = [host('a', 2, ['1']), host('b', 4)];
    expect(placeWorker(hosts, ['1'])).toEqual({ host: 'b', deviceIds: ['1'] });
    expect(placeWorker(hosts, ['0'])).toEqual({ host: 'a', deviceIds: ['0'] }); // a is left with none free
    expect(placeWorker([host('a', 2, ['1'])], ['0', '1'])).toEqual({ refused: 'no Docker host has GPUs 0, 1 free (a: 1 of 2 GPUs free)' });
  });

  it('skips hosts that are down, and says why nothing fits', () => {
    expect(placeWorker([host('a', 2, [], 0, false), host('b', 1)], 1)).toEqual({ host: 'b', deviceIds: ['0'] });
    expect(placeWorker([host('a', 2, ['0', '1']), host('b', 1, [], 0, false)], 1)).toEqual({ refused: 'no Docker host has 1 free GPU (a: 0 of 2 GPUs free; b: down)' });
    expect(placeWorker([host('a', 0, [], 0, false)], 0)).toEqual({ refused: 'no Docker host is up (a: down)' });
    expect(placeWorker([], 0)).toEqual({ refused: 'no Docker host is configured (GANTRY_DOCKER_HOSTS)' });
  });
});
