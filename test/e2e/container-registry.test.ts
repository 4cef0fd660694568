// End to end: images from a registry. A real registry on loopback (Debian's docker-registry with
// htpasswd auth, test/fixtures/registry) holds the worker image, pushed from engine a; engine b
// lacks it. An endpoint with saved credentials places a worker on b (the only host with a GPU),
// which pulls the image (progress `pulling N%` seen on the way) and runs a job; a wrong password
// makes the worker unhealthy at once with a reason naming host, image and the registry's answer;
// `prepull` puts an image on both engines without a worker asking for it.
import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { EngineError } from '../../src/pool/docker/engine-client.js';
import { pullImage } from '../../src/pool/docker/image-pull.js';
import { containersOf, enginesFor, findTestEngines, hostConfig, type TestEngine } from '../fixtures/docker/test-engines.js';
import { ensureWorkerImage } from '../fixtures/docker/test-images.js';
import { pushImage, registryAvailable, startTestRegistry, type TestRegistry } from '../fixtures/registry/test-registry.js';
import { eventually, startTestGantry, type TestGantry } from '../helpers/gantry.js';

const engines = await findTestEngines();

/** Whether the engine holds the image (by the name the endpoint gives it). */
async function holds(engine: TestEngine, image: string): Promise<boolean> {
  try {
    await engine.api.call('GET', `/images/${image}/json`);
    return true;
  } catch (err) {
    if (err instanceof EngineError && err.status === 404) return false;
    throw err;
  }
}

/** Removes a tag from an engine (the image stays while other tags name it). */
async function untag(engine: TestEngine, image: string): Promise<void> {
  await engine.api.call('DELETE', `/images/${image}`).catch((err: unknown) => {
    if (!(err instanceof EngineError && err.status === 404)) throw err;
  });
}

describe.skipIf(!enginesFor(engines, 2) || !registryAvailable())('images from a registry with saved credentials', { timeout: 180_000 }, () => {
  const [a, b] = engines as [TestEngine, TestEngine];
  const instance = `test-${randomBytes(4).toString('hex')}`;
  const run = randomBytes(4).toString('hex');
  let registry: TestRegistry;
  let t: TestGantry;
  /** The worker image in the registry under four tags: one per test, none of them on b. */
  const pushed: Record<'progress' | 'pull' | 'refused' | 'prepull', string> = { progress: '', pull: '', refused: '', prepull: '' };

  const ours = async (ep: string): Promise<number> => [...(await containersOf(a, instance)), ...(await containersOf(b, instance))].filter((c) => c.Labels['io.gantry.endpoint'] === ep).length;
  const removeEndpoint = async (ep: string): Promise<void> => {
    await t.admin.deleteEndpoint(ep);
    await eventually(async () => ((await ours(ep)) === 0 ? true : undefined), 30_000, `the containers of ${ep} to go`);
  };

  beforeAll(async () => {
    registry = await startTestRegistry();
    const image = await ensureWorkerImage(a);
    for (const name of Object.keys(pushed) as (keyof typeof pushed)[]) {
      pushed[name] = `${registry.host}/gantry-test/worker-${name}:${run}`;
      await pushImage(a, image, pushed[name], registry.login);
      await untag(b, pushed[name]);
    }
    // The prepull test's image is in the registry only.
    await untag(a, pushed.prepull);
    t = await startTestGantry({
      host: '0.0.0.0',
      autoscalerIntervalMs: 100,
      workerStopGraceMs: 5_000,
      // Long: a refused pull is unhealthy at its first failure, not from the second try.
      workerRestartBackoffMs: 60_000,
      docker: { hosts: [hostConfig(a.url, 'a', 0), hostConfig(b.url, 'b', 2)], defaultHost: false, pingIntervalMs: 200, downAfterMs: 5_000, instance },
    });
  }, 600_000);

  afterAll(async () => {
    await t?.close();
    registry?.stop();
    for (const image of Object.values(pushed)) for (const engine of [a, b]) if (image) await untag(engine, image);
  });

  it('a pull reports progress by layer bytes as the engine streams it, up to 100%', async () => {
    // First in the file: b has none of the image's layers yet, so each one is downloaded.
    const said: string[] = [];
    await pullImage({ engine: b.api, host: 'b', image: pushed.progress, login: registry.login, onProgress: (d) => said.push(d) });
    expect(said.length).toBeGreaterThan(1);
    for (const d of said) expect(d).toMatch(/^pulling( \d{1,3}%)?$/);
    expect(said.filter((d) => d !== 'pulling').length).toBeGreaterThan(0);
    expect(said.at(-1)).toBe('pulling 100%');
    expect(await holds(b, pushed.progress)).toBe(true);
    const refused = await pullImage({ engine: b.api, host: 'b', image: pushed.refused, login: undefined, onProgress: () => {} }).catch((err: unknown) => err as Error);
    expect(refused).toBeInstanceOf(Error);
    expect((refused as Error).message).toMatch(new RegExp(`^pulling ${pushed.refused.replace(/[.]/g, '\\.')} on Docker host b failed: .*(unauthorized|authentication required|no basic auth credentials)`));
  });

  it('pulls the image onto the host that lacks it with the saved login, shows the pull as progress, and runs a job', async () => {
    const { id } = await t.admin.createRegistryCredential({ name: 'loopback', username: registry.login.username, password: registry.login.password });
    expect(await holds(b, pushed.pull)).toBe(false);
    await t.admin.createEndpoint({ id: 'private', workersMin: 1, workersMax: 1, idleTimeout: 60, worker: { image: pushed.pull, gpus: 1, registryCredentials: id } });
    const seen = new Set<string>();
    const idle = await eventually(
      async () => {
        const [w] = t.gantry.gateway.autoscaler.view.workers('private') ?? [];
        if (w?.progress) seen.add(`${w.state}: ${w.progress}`);
        return w?.state === 'idle' ? w : undefined;
      },
      150_000,
      'the pulled worker to be idle',
    );
    expect(idle.host).toBe('b');
    expect(idle.progress).toBeNull();
    expect([...seen].length, registry.log()).toBeGreaterThan(0);
    for (const s of seen) expect(s).toMatch(/^initializing: pulling( \d{1,3}%)?$/);
    expect(await holds(b, pushed.pull)).toBe(true);
    const job = await t.client().runSync('private', { input: { pulled: run } }, { timeoutMs: 60_000 });
    expect(job).toMatchObject({ status: 'COMPLETED', output: { pulled: run } });
    await removeEndpoint('private');
  });

  it('a wrong password makes the worker unhealthy at once, naming the host, the image and the registry\'s answer', async () => {
    const { id } = await t.admin.createRegistryCredential({ name: 'wrong', username: registry.login.username, password: 'not-the-password' });
    await t.admin.createEndpoint({ id: 'refused', workersMin: 1, workersMax: 1, worker: { image: pushed.refused, gpus: 1, registryCredentials: id } });
    const w = await eventually(async () => (t.gantry.gateway.autoscaler.view.workers('refused') ?? []).find((x) => x.state === 'unhealthy'), 60_000, 'the worker to be unhealthy');
    expect(w.restarts).toBe(1);
    expect(w.reason).toContain(`pulling ${pushed.refused} on Docker host b failed: `);
    expect(w.reason).toMatch(/unauthorized|authentication required|no basic auth credentials/);
    expect(w.reason).not.toContain('not-the-password');
    expect((await t.client().health('refused')).workers.unhealthy).toBe(1);
    expect(await holds(b, pushed.refused)).toBe(false);
    await removeEndpoint('refused');
  });

  it('prepull puts the image on every host that could run the worker, without a worker asking', async () => {
    const { id } = await t.admin.createRegistryCredential({ name: 'prepull', username: registry.login.username, password: registry.login.password });
    expect([await holds(a, pushed.prepull), await holds(b, pushed.prepull)]).toEqual([false, false]);
    await t.admin.createEndpoint({ id: 'pre', workersMin: 0, workersMax: 1, worker: { image: pushed.prepull, registryCredentials: id, prepull: true } });
    await eventually(async () => ((await holds(a, pushed.prepull)) && (await holds(b, pushed.prepull)) ? true : undefined), 150_000, 'the image on both engines');
    expect(await ours('pre')).toBe(0);
    expect(t.gantry.gateway.autoscaler.view.workers('pre') ?? []).toEqual([]);
    // Both hosts now hold it: a worker placed anywhere starts without a pull.
    await eventually(async () => (t.gantry.gateway.prepuller.inFlight().length === 0 ? true : undefined), 30_000, 'the prepulls to end');
    await t.admin.updateEndpoint('pre', { workersMin: 1 });
    const w = await eventually(async () => (t.gantry.gateway.autoscaler.view.workers('pre') ?? []).find((x) => x.state === 'idle'), 60_000, 'a prepulled worker');
    expect(w.restarts).toBe(0);
    await removeEndpoint('pre');
  });
});
