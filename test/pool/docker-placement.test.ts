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
    expect(placeWorker(hosts, 2)).toEqual({ host: 'small', deviceIds: ['0', '1'], gpuType: '' });
    expect(placeWorker([host('big', 8), host('half', 4, ['0', '1'])], 1)).toEqual({ host: 'half', deviceIds: ['2'], gpuType: '' });
    expect(placeWorker([host('big', 8), host('half', 4, ['0', '1'])], 4)).toEqual({ host: 'big', deviceIds: ['0', '1', '2', '3'], gpuType: '' });
  });

  it('breaks ties by fewer workers, then by the order of the settings', () => {
    expect(placeWorker([host('a', 2, ['0'], 3), host('b', 2, ['1'], 1)], 1)).toEqual({ host: 'b', deviceIds: ['0'], gpuType: '' });
    expect(placeWorker([host('a', 2), host('b', 2)], 1)).toEqual({ host: 'a', deviceIds: ['0'], gpuType: '' });
  });

  it('spreads workers without GPUs over the hosts by how many they run', () => {
    expect(placeWorker([host('a', 0, [], 2), host('b', 4, ['0'], 1), host('c', 0, [], 1)], 0)).toEqual({ host: 'b', deviceIds: [], gpuType: '' });
    expect(placeWorker([host('a', 0, [], 1), host('b', 0, [], 1)], 0)).toEqual({ host: 'a', deviceIds: [], gpuType: '' });
  });

  it('gives exact device ids only where all of them exist and are free', () => {
    const hosts = [host('a', 2, ['1']), host('b', 4)];
    expect(placeWorker(hosts, ['1'])).toEqual({ host: 'b', deviceIds: ['1'], gpuType: '' });
    expect(placeWorker(hosts, ['0'])).toEqual({ host: 'a', deviceIds: ['0'], gpuType: '' }); // a is left with none free
    expect(placeWorker([host('a', 2, ['1'])], ['0', '1'])).toEqual({ refused: 'no Docker host has GPUs 0, 1 free (a: 1 of 2 GPUs free)' });
  });

  it('skips hosts that are down, and says why nothing fits', () => {
    expect(placeWorker([host('a', 2, [], 0, false), host('b', 1)], 1)).toEqual({ host: 'b', deviceIds: ['0'], gpuType: '' });
    expect(placeWorker([host('a', 2, ['0', '1']), host('b', 1, [], 0, false)], 1)).toEqual({ refused: 'no Docker host has 1 free GPU (a: 0 of 2 GPUs free; b: down)' });
    expect(placeWorker([host('a', 0, [], 0, false)], 0)).toEqual({ refused: 'no Docker host is up (a: down)' });
    expect(placeWorker([], 0)).toEqual({ refused: 'no Docker host is configured (GANTRY_DOCKER_HOSTS)' });
  });

  it("typed GPUs: the endpoint's models in order of preference, one model per worker, full models named", () => {
    const typed = (name: string, types: Record<string, number>, inUse: string[] = [], images: string[] = []): HostLoad => {
      const gpuTypes = Object.entries(types).flatMap(([t, n]) => Array.from({ length: n }, () => t));
      return { name, up: true, gpus: gpuTypes.map((_, i) => String(i)), gpuTypes, gpusInUse: new Set(inUse), workers: inUse.length, images: new Set(images) };
    };
    const hosts = [typed('a', { L4: 2 }), typed('b', { 'A100-80GB': 4, L4: 1 })];
    // A100 first: only b has them, even though a would bin-pack better for one L4.
    expect(placeWorker(hosts, { count: 1, types: ['A100-80GB', 'L4'] })).toEqual({ host: 'b', deviceIds: ['0'], gpuType: 'A100-80GB' });
    // L4 first: both have one free; a is left with 1 GPU free after it, b with 4: bin-packed onto a.
    expect(placeWorker(hosts, { count: 1, types: ['L4', 'A100-80GB'] })).toEqual({ host: 'a', deviceIds: ['0'], gpuType: 'L4' });
    // Two L4 on one host: only a; b's one L4 and A100s never mix.
    expect(placeWorker([typed('b', { 'A100-80GB': 4, L4: 1 })], { count: 2, types: ['L4'] })).toEqual({
      refused: 'no Docker host has 2 free L4 GPUs (b: 1 of 1 L4 free)',
      fullTypes: ['L4'],
    });
    // The first model full: the second is used, and the reason names both when both are full.
    const full = [typed('a', { L4: 2 }, ['0', '1']), typed('b', { 'A100-80GB': 4 }, ['0', '1', '2', '3'])];
    expect(placeWorker([...full, typed('c', { 'A100-80GB': 1 })], { count: 1, types: ['L4', 'A100-80GB'] })).toEqual({ host: 'c', deviceIds: ['0'], gpuType: 'A100-80GB' });
    expect(placeWorker(full, { count: 1, types: ['L4', 'A100-80GB'] })).toEqual({
      refused: 'no Docker host has 1 free L4 or A100-80GB GPU (a: 0 of 2 L4 free; b: 0 of 4 A100-80GB free)',
      fullTypes: ['L4', 'A100-80GB'],
    });
    // No model named: any one model, the one left fullest after it.
    expect(placeWorker([typed('m', { L4: 3, T4: 1 })], 1)).toEqual({ host: 'm', deviceIds: ['3'], gpuType: 'T4' });
    expect(placeWorker([typed('m', { L4: 3, T4: 1 })], 2)).toEqual({ host: 'm', deviceIds: ['0', '1'], gpuType: 'L4' });
  });

  it('prefers hosts that hold the image over bin-packing, within the preferred model', () => {
    const h = (name: string, inUse: string[], images: string[]): HostLoad => ({ name, up: true, gpus: ['0', '1'], gpuTypes: ['L4', 'L4'], gpusInUse: new Set(inUse), workers: inUse.length, images: new Set(images) });
    const hosts = [h('packed', ['0'], []), h('holder', [], ['acme/sd:1'])];
    expect(placeWorker(hosts, { count: 1, types: ['L4'], image: 'acme/sd:1' })).toMatchObject({ host: 'holder' });
    expect(placeWorker(hosts, { count: 1, types: ['L4'], image: 'acme/other:1' })).toMatchObject({ host: 'packed' });
    // Without GPUs too: the holder before the emptier host.
    expect(placeWorker([h('empty', [], []), h('holder', ['0', '1'], ['acme/sd:1'])], { image: 'acme/sd:1' })).toMatchObject({ host: 'holder' });
  });
});
