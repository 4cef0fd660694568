// A gateway killed with -9 leaves its worker containers running; the next start of the same
// installation finds them by label and stops them — and never a container it did not start.
// The gateway runs as a real `gantry serve` process (dist/, built by `npm test`).
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { dockerInstance } from '../../src/config/docker-config.js';
import { containersOf, enginesFor, findTestEngines, type TestEngine } from '../fixtures/docker/test-engines.js';
import { ensureWorkerImage } from '../fixtures/docker/test-images.js';
import { eventually } from '../helpers/gantry.js';
import { scratchDir } from '../helpers/scratch.js';
import { startGateway, type ServeProcess } from '../helpers/serve-process.js';

const engines = await findTestEngines();

describe.skipIf(!enginesFor(engines, 1))('gateway killed with -9, then started again', () => {
  const engine = engines[0] as TestEngine;
  const dataDir = scratchDir('restart');
  // The label of this installation's containers, derived as the gateway does (no GANTRY_DOCKER_INSTANCE).
  const instance = dockerInstance({}, dataDir);
  const foreign: string[] = [];
  let image: string;

  /** `gantry serve` on this installation's data folder, reachable from the containers. */
  const serve = (): Promise<ServeProcess> =>
    startGateway({
      dataDir,
      env: {
        GANTRY_HOST: '0.0.0.0',
        GANTRY_AUTOSCALER_INTERVAL_MS: '100',
        GANTRY_WORKER_STOP_GRACE_MS: '3000',
        GANTRY_DOCKER_HOSTS: JSON.stringify([{ name: 'a', url: engine.url }]),
        GANTRY_DOCKER_INSTANCE: '',
      },
    });
  const idle = async (gateway: ServeProcess): Promise<number> => (await gateway.client().health('left')).workers.idle;

  beforeAll(async () => {
    image = await ensureWorkerImage(engine);
    // Containers Gantry did not start: one with no labels, one of another installation.
    for (const labels of [[], ['--label', 'io.gantry.instance=someone-else', '--label', 'io.gantry.endpoint=left']]) {
      foreign.push((await engine.cli('run', '-d', ...labels, image, 'python3', '-c', 'import time; time.sleep(600)')).trim());
    }
  }, 300_000);

  afterAll(async () => {
    // The foreign containers, and this installation's if a failed test left any.
    const ours = (await containersOf(engine, instance).catch(() => [])).map((c) => c.Id);
    for (const id of [...foreign, ...ours]) await engine.api.call('DELETE', `/containers/${id}?force=1`).catch(() => undefined);
  });

  it('stops the containers the killed gateway left, by their label, and only those', async () => {
    const first = await serve();
    await first.admin.createEndpoint({ id: 'left', workersMin: 2, idleTimeout: 60, worker: { image } });
    await eventually(async () => ((await idle(first)) === 2 ? true : undefined), 60_000, 'two idle containers');
    const left = (await containersOf(engine, instance)).map((c) => c.Id);
    expect(left).toHaveLength(2);

    await first.stop('SIGKILL');
    // Nobody stopped them: they run on, unsupervised.
    expect((await containersOf(engine, instance)).filter((c) => c.State === 'running').map((c) => c.Id).sort()).toEqual([...left].sort());

    const second = await serve();
    try {
      const fresh = await eventually(async () => {
        const now = await containersOf(engine, instance);
        return now.length === 2 && now.every((c) => !left.includes(c.Id) && c.State === 'running') ? now : undefined;
      }, 60_000, 'the leftovers gone and two new containers');
      expect(fresh).toHaveLength(2);
      await eventually(async () => ((await idle(second)) === 2 ? true : undefined), 60_000, 'two idle new workers');
      // Containers Gantry did not start are untouched.
      for (const id of foreign) expect(((await engine.api.call('GET', `/containers/${id}/json`)) as { State: { Running: boolean } }).State.Running).toBe(true);
    } finally {
      await second.stop();
    }
    // A gateway stopped normally drains and removes its containers.
    expect(await containersOf(engine, instance)).toEqual([]);
  }, 180_000);
});
