// Gantry's container image (issue 26.1), built by scripts/build-image.sh on a test engine from a
// base made on this machine (no registry): it prints only the tag; the container runs as a
// non-root user, answers its HEALTHCHECK (/readyz), completes a job on an echo endpoint (a pool
// worker inside it) and on the built-in image endpoint (its image served from /files), and after
// `docker restart` on the same volume has lost nothing: the finished job, the queued ones, the
// keys and endpoints. One test: the build is slow on a small machine.
import { execFile } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { afterAll, describe, expect, it } from 'vitest';
import { createAdminClient } from '../../src/sdk/admin-client.js';
import { createClient } from '../../src/sdk/client.js';
import { findTestEngines, type TestEngine } from '../fixtures/docker/test-engines.js';
import { eventually } from '../helpers/gantry.js';

const BUILD = fileURLToPath(new URL('../../scripts/build-image.sh', import.meta.url));
const TAG = 'gantry-image-test:latest';
const ADMIN_KEY = `image-admin-${randomBytes(8).toString('hex')}`;
const engines = await findTestEngines();
const cleanups: (() => Promise<unknown>)[] = [];
afterAll(async () => {
  for (const cleanup of cleanups.reverse()) await cleanup().catch(() => undefined);
});

/** The host address the container's 8080 is published on (it may change with a restart). */
async function published(engine: TestEngine, id: string): Promise<string> {
  const line = (await engine.cli('port', id, '8080/tcp')).split('\n')[0] ?? '';
  return `http://${line.trim()}`;
}

async function answering(url: string): Promise<void> {
  await eventually(async () => ((await fetch(`${url}/healthz`).catch(() => undefined))?.ok ? true : undefined), 120_000, 'the container answers /healthz');
}

describe.runIf(engines.length > 0 || process.env.CI === 'true')('the container image', () => {
  it('builds from a local base, runs as non-root, completes jobs, and keeps its volume across a restart', async () => {
    const engine = engines[0];
    if (!engine) throw new Error('no Docker engine answers (CI=true: test/fixtures/docker/engines.sh start)');
    const built = await promisify(execFile)(BUILD, [TAG], { env: { ...process.env, DOCKER_HOST: engine.url }, maxBuffer: 16 * 1024 * 1024 });
    expect(built.stdout).toBe(`${TAG}\n`);
    const size = Number(await engine.cli('image', 'inspect', '-f', '{{.Size}}', TAG));
    console.log(`image ${TAG}: ${(size / 1e6).toFixed(0)} MB`);

    const volume = `gantry-image-test-${randomBytes(4).toString('hex')}`;
    const id = (await engine.cli('run', '-d', '-v', `${volume}:/data`, '-p', '127.0.0.1::8080', '-e', `GANTRY_ADMIN_KEY=${ADMIN_KEY}`, TAG)).trim();
    cleanups.push(() => engine.cli('volume', 'rm', '-f', volume));
    cleanups.push(() => engine.cli('rm', '-f', id));
    let url = await published(engine, id);
    await answering(url);

    // Not root: the image's user, and the process itself.
    expect(JSON.parse(await engine.cli('inspect', '-f', '{{json .Config.User}}', id))).toBe('10001:10001');
    expect((await engine.cli('exec', id, 'node', '-e', 'console.log(process.getuid(), process.getgid())')).trim()).toBe('10001 10001');

    let admin = createAdminClient({ url, adminKey: ADMIN_KEY });
    await admin.createEndpoint({ id: 'echo', worker: { command: 'node /opt/gantry/dist/src/cli/main.js worker /opt/gantry/dist/examples/echo-worker.js' } });
    await admin.createEndpoint({ id: 'later' });
    const runKey = (await admin.createKey({ name: 'image test', scopes: ['run', 'read'] })).key;
    let client = createClient({ url, apiKey: runKey });
    const echoed = await client.runSync('echo', { input: { hello: 'from the image' } }, { timeoutMs: 120_000 });
    expect(echoed).toMatchObject({ status: 'COMPLETED', output: { hello: 'from the image' } });
    const image = await client.runSync<{ image_url: string }>('image-fast', { input: { prompt: 'a red cube', width: 256, height: 256 } }, { timeoutMs: 180_000 });
    expect(image.status).toBe('COMPLETED');
    const file = await fetch(new URL(new URL(image.output!.image_url).pathname + new URL(image.output!.image_url).search, url));
    expect(file.status).toBe(200);
    expect(file.headers.get('content-type')).toMatch(/^image\//);
    const queued = await Promise.all([1, 2, 3].map(async (n) => (await client.run('later', { input: { n } })).id));

    // Healthy by its own HEALTHCHECK (/readyz).
    await eventually(async () => (JSON.parse(await engine.cli('inspect', '-f', '{{json .State.Health.Status}}', id)) === 'healthy' ? true : undefined), 120_000, 'docker reports the container healthy');

    // A restart on the same volume (SIGTERM: it drains) loses nothing.
    await engine.cli('restart', '-t', '60', id);
    url = await published(engine, id);
    await answering(url);
    admin = createAdminClient({ url, adminKey: ADMIN_KEY });
    client = createClient({ url, apiKey: runKey });
    expect(await client.status('echo', echoed.id)).toMatchObject({ status: 'COMPLETED', output: { hello: 'from the image' } });
    expect(await client.status('image-fast', image.id)).toMatchObject({ status: 'COMPLETED' });
    for (const jobId of queued) expect(await client.status('later', jobId)).toMatchObject({ status: 'IN_QUEUE' });
    expect((await admin.listEndpoints()).map((e) => e.id)).toEqual(expect.arrayContaining(['echo', 'later']));
    expect(await client.runSync('echo', { input: { again: true } }, { timeoutMs: 120_000 })).toMatchObject({ status: 'COMPLETED', output: { again: true } });
  }, 900_000);
});
